//===- KernelResources.cpp - registers and shared memory from ptxas -v ----===//
//
// ptxas -v prints, per entry function,
//   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
//   ptxas info    : Function properties for NAME
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, ...
// (the smem part only when the kernel has shared memory).
//
// With $STRINGC_PTXAS_CACHE set to a directory, each kernel's answer is kept
// there under a hash of its PTX and the arch (one line: registers, shared
// bytes, spill bytes), so that reports of one model at several batches run
// ptxas once (tests/perf/calibrate.py).
//
//===----------------------------------------------------------------------===//
#include "stringc/CudaGen/KernelResources.h"

#include "stringc/CudaGen/GPUPipeline.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/xxhash.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <fstream>
#include <regex>

using namespace mlir;

namespace stringc::cudagen {
namespace {

/// The cache file of a kernel's PTX for `arch`, or "" without a cache.
std::string cachePath(const std::string &ptx, const std::string &arch) {
  const char *dir = std::getenv("STRINGC_PTXAS_CACHE");
  if (!dir || !*dir)
    return "";
  uint64_t hash = llvm::xxh3_64bits(llvm::StringRef(ptx + "\n" + arch));
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, llvm::utohexstr(hash) + ".ptxas");
  return path.str().str();
}

} // namespace

std::optional<KernelResources> parsePtxasInfo(llvm::StringRef log, llvm::StringRef kernel) {
  // The lines after "Function properties for KERNEL", up to the next
  // "Compiling entry function" (ptxas may print several functions).
  std::string text = log.str();
  size_t at = text.find("Function properties for " + kernel.str() + "\n");
  if (at == std::string::npos)
    return std::nullopt;
  size_t end = text.find("Compiling entry function", at);
  std::string section = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::smatch match;
  if (!std::regex_search(section, match, std::regex("Used ([0-9]+) registers")))
    return std::nullopt;
  KernelResources r;
  r.registers = std::stoi(match[1]);
  if (std::regex_search(section, match, std::regex("([0-9]+) bytes smem")))
    r.sharedBytes = std::stoll(match[1]);
  if (std::regex_search(section, match, std::regex("([0-9]+) bytes spill stores")))
    r.spillBytes = std::stoll(match[1]);
  return r;
}

LogicalResult measureKernelResources(const std::map<std::string, std::string> &ptx,
                                     const std::string &arch, KernelResourceTable &table,
                                     std::string &message) {
  if (ptxasPath().empty()) {
    message = "ptxas not found (set CUDA_HOME to the CUDA toolkit): the launch report's "
              "occupancy needs ptxas -v";
    return failure();
  }
  for (const auto &[kernel, text] : ptx) {
    std::string cached = cachePath(text, arch);
    if (!cached.empty()) {
      std::ifstream in(cached);
      KernelResources r;
      if (in >> r.registers >> r.sharedBytes >> r.spillBytes) {
        table[kernel] = r;
        continue;
      }
    }
    std::string cubin, logText;
    if (failed(runPtxas(kernel, text, arch, /*verbose=*/true, cubin, logText, message)))
      return failure();
    std::optional<KernelResources> r = parsePtxasInfo(logText, kernel);
    if (!r) {
      message = "ptxas -v reported no registers for kernel '" + kernel + "':\n" + logText;
      return failure();
    }
    table[kernel] = *r;
    if (!cached.empty()) {
      llvm::sys::fs::create_directories(llvm::sys::path::parent_path(cached));
      std::ofstream(cached) << r->registers << " " << r->sharedBytes << " " << r->spillBytes
                            << "\n";
    }
  }
  return success();
}

} // namespace stringc::cudagen
