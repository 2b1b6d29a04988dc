//===- SharedObject.cpp - ELF object -> shared object with in-process lld -===//
//
// lld runs as a library (Debian's liblld-19-dev, linked against libLLVM.so).
// Its driver reads and writes files, so the object goes through a private
// temporary directory that is removed afterwards. The shared object is
// linked against libc and libm (--as-needed: only what the kernels call,
// e.g. memset for a zeroing loop, or fmaf on a CPU without FMA) so that
// `-z defs` can reject any other undefined symbol here rather than at
// dlopen time in the runtime.
//
//===----------------------------------------------------------------------===//
#include "HostCompile.h"

#include "lld/Common/Driver.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>
#include <vector>

LLD_HAS_DRIVER(elf)

namespace stringc::codegen::detail {
namespace {

/// libc.so.6 and libm.so.6 of this machine, where the usual library
/// directories have them.
std::vector<std::string> systemLibraries() {
  std::vector<std::string> found;
  for (const char *dir : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                          "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64",
                          "/usr/lib64"}) {
    std::string libc = std::string(dir) + "/libc.so.6", libm = std::string(dir) + "/libm.so.6";
    if (llvm::sys::fs::exists(libc) && llvm::sys::fs::exists(libm)) {
      found = {libc, libm};
      break;
    }
  }
  return found;
}

/// Removes the directory and the files in it when it goes out of scope.
struct TempDir {
  llvm::SmallString<128> path;
  ~TempDir() {
    if (!path.empty())
      llvm::sys::fs::remove_directories(path);
  }
};

} // namespace

bool linkSharedObject(const std::string &object, std::string &sharedObject, std::string &error) {
  TempDir dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("stringc-link", dir.path)) {
    error = "cannot create a temporary directory for linking: " + ec.message();
    return false;
  }
  llvm::SmallString<128> objPath(dir.path), soPath(dir.path);
  llvm::sys::path::append(objPath, "kernels.o");
  llvm::sys::path::append(soPath, "kernels.so");
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(objPath, ec);
    if (!ec) {
      out << object;
      out.close();
      ec = out.error();
    }
    if (ec) {
      error = "cannot write '" + objPath.str().str() + "': " + ec.message();
      return false;
    }
  }

  std::vector<std::string> libraries = systemLibraries();
  std::vector<const char *> args = {"ld.lld",   "-shared",     "--hash-style=gnu", "-z",
                                    "noexecstack", "-z",       "now",              "-soname",
                                    "libstringc_kernels.so",   "-o", soPath.c_str(),
                                    objPath.c_str()};
  if (!libraries.empty()) {
    args.insert(args.end(), {"-z", "defs", "--as-needed"});
    for (const std::string &lib : libraries)
      args.push_back(lib.c_str());
  }
  std::string messages;
  llvm::raw_string_ostream out(messages), err(messages);
  // lld keeps global state: one link at a time.
  static std::mutex lldMutex;
  lld::Result result;
  {
    std::lock_guard<std::mutex> lock(lldMutex);
    result = lld::lldMain(args, out, err, {{lld::Gnu, &lld::elf::link}});
  }
  out.flush();
  err.flush();
  if (result.retCode != 0) {
    error = "linking the kernels' shared object with lld failed: " + messages;
    return false;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> so = llvm::MemoryBuffer::getFile(soPath);
  if (!so) {
    error = "cannot read the linked shared object: " + so.getError().message();
    return false;
  }
  sharedObject.assign((*so)->getBufferStart(), (*so)->getBufferEnd());
  return true;
}

} // namespace stringc::codegen::detail
