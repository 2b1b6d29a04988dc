// What the runtime reads of a kernel library's ELF image before anything
// loads it (KernelLibrary.h, PackageKernels.cpp): the header, that every
// table and segment lies inside the bytes, the symbols it exports and the
// segments that hold code. Private to the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

// Checks the ELF header the dynamic loader would read (64-bit
// little-endian shared object) and that the program header table, the
// section header table and every segment lie inside `bytes`. Returns the
// ELF machine (EM_*). Throws Error(what, ...).
uint16_t checkKernelElf(const std::vector<uint8_t> &bytes, const std::string &what);

// The symbols a library exports (defined, global or weak, default or
// protected visibility, in .dynsym): `functions` are plain functions
// (STT_FUNC), `others` anything else (objects, IFUNC resolvers, TLS, ...).
// Throws Error(what, ...) when the symbol table or its strings lie outside
// the bytes, or there is no dynamic symbol table.
struct ElfExports {
  std::vector<std::string> functions;
  std::vector<std::string> others;
};
ElfExports elfExports(const std::vector<uint8_t> &bytes, const std::string &what);

// [begin, end) virtual addresses (before relocation by the load base) of
// the executable PT_LOAD segments.
struct ElfRange {
  uint64_t begin = 0, end = 0;
};
std::vector<ElfRange> elfExecutableSegments(const std::vector<uint8_t> &bytes);

// The ELF machine of an LLVM triple's architecture ("x86_64-pc-linux-gnu"
// -> EM_X86_64); EM_NONE for an architecture the runtime does not know.
uint16_t elfMachineOfTriple(const std::string &triple);

} // namespace stringrt::detail
