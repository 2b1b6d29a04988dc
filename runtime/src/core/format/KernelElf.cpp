// Reading a kernel library's ELF image without loading it (KernelElf.h).
// Every offset comes from untrusted bytes: each read is bounds-checked.
#include "format/KernelElf.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cstring>

#include <elf.h>

namespace stringrt::detail {

namespace {

// Whether [offset, offset + length) lies inside `size` bytes.
bool inside(uint64_t size, uint64_t offset, uint64_t length) {
  return offset <= size && length <= size - offset;
}

template <typename T> T readAt(const std::vector<uint8_t> &bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

// The header of bytes checkKernelElf accepted.
Elf64_Ehdr header(const std::vector<uint8_t> &bytes) { return readAt<Elf64_Ehdr>(bytes, 0); }

} // namespace

uint16_t checkKernelElf(const std::vector<uint8_t> &bytes, const std::string &what) {
  if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
    throw Error(what, "the kernel library is not an ELF file");
  const Elf64_Ehdr h = header(bytes);
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB)
    throw Error(what, "the kernel library is not a 64-bit little-endian ELF file");
  if (h.e_type != ET_DYN)
    throw Error(what, "the kernel library is not an ELF shared object");
  // The loader maps segments straight from the file: one that runs past
  // its end would fault on first touch, so check every table and segment
  // lies inside the bytes we have.
  const uint64_t size = bytes.size();
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 ||
      !inside(size, h.e_phoff, uint64_t(h.e_phnum) * sizeof(Elf64_Phdr)))
    throw Error(what, "the kernel library is damaged: its program header table is missing or "
                      "lies outside the file");
  if (h.e_shnum != 0 && (h.e_shentsize != sizeof(Elf64_Shdr) ||
                         !inside(size, h.e_shoff, uint64_t(h.e_shnum) * sizeof(Elf64_Shdr))))
    throw Error(what, "the kernel library is damaged: its section header table lies outside "
                      "the file");
  for (uint16_t i = 0; i < h.e_phnum; ++i) {
    const auto segment = readAt<Elf64_Phdr>(bytes, h.e_phoff + i * sizeof(Elf64_Phdr));
    if (segment.p_type != PT_NULL && !inside(size, segment.p_offset, segment.p_filesz))
      throw Error(what, fmt::format("the kernel library is truncated or damaged: segment {} "
                                    "ends at byte {}, the library has {}",
                                    i, segment.p_offset + segment.p_filesz, size));
  }
  return h.e_machine;
}

ElfExports elfExports(const std::vector<uint8_t> &bytes, const std::string &what) {
  const Elf64_Ehdr h = header(bytes);
  const uint64_t size = bytes.size();
  auto section = [&](uint64_t index) {
    return readAt<Elf64_Shdr>(bytes, h.e_shoff + index * sizeof(Elf64_Shdr));
  };
  // The dynamic symbol table (what dlsym searches) and its string table.
  int64_t dynsym = -1;
  for (uint16_t i = 0; i < h.e_shnum; ++i)
    if (section(i).sh_type == SHT_DYNSYM) {
      if (dynsym >= 0)
        throw Error(what, "the kernel library has two dynamic symbol tables");
      dynsym = i;
    }
  if (dynsym < 0)
    throw Error(what, "the kernel library has no dynamic symbol table (it exports no kernel)");
  const Elf64_Shdr symbols = section(static_cast<uint64_t>(dynsym));
  if (symbols.sh_entsize != sizeof(Elf64_Sym) ||
      !inside(size, symbols.sh_offset, symbols.sh_size) || symbols.sh_link >= h.e_shnum)
    throw Error(what, "the kernel library is damaged: its dynamic symbol table lies outside the "
                      "file");
  const Elf64_Shdr strings = section(symbols.sh_link);
  if (strings.sh_type != SHT_STRTAB || !inside(size, strings.sh_offset, strings.sh_size))
    throw Error(what, "the kernel library is damaged: its symbol names lie outside the file");
  const char *names = reinterpret_cast<const char *>(bytes.data() + strings.sh_offset);

  ElfExports exports;
  const uint64_t count = symbols.sh_size / sizeof(Elf64_Sym);
  for (uint64_t i = 1; i < count; ++i) { // entry 0 is the undefined symbol
    const auto symbol = readAt<Elf64_Sym>(bytes, symbols.sh_offset + i * sizeof(Elf64_Sym));
    const unsigned binding = ELF64_ST_BIND(symbol.st_info);
    const unsigned visibility = ELF64_ST_VISIBILITY(symbol.st_other);
    if (symbol.st_shndx == SHN_UNDEF || binding == STB_LOCAL ||
        visibility == STV_HIDDEN || visibility == STV_INTERNAL)
      continue; // an import, or not visible outside the library
    if (symbol.st_name >= strings.sh_size ||
        !std::memchr(names + symbol.st_name, '\0', strings.sh_size - symbol.st_name))
      throw Error(what, fmt::format("the kernel library is damaged: the name of dynamic symbol "
                                    "{} lies outside its string table",
                                    i));
    std::string name(names + symbol.st_name);
    (ELF64_ST_TYPE(symbol.st_info) == STT_FUNC ? exports.functions : exports.others)
        .push_back(std::move(name));
  }
  return exports;
}

std::vector<ElfRange> elfExecutableSegments(const std::vector<uint8_t> &bytes) {
  const Elf64_Ehdr h = header(bytes);
  std::vector<ElfRange> ranges;
  for (uint16_t i = 0; i < h.e_phnum; ++i) {
    const auto segment = readAt<Elf64_Phdr>(bytes, h.e_phoff + i * sizeof(Elf64_Phdr));
    if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X) &&
        segment.p_memsz <= UINT64_MAX - segment.p_vaddr)
      ranges.push_back({segment.p_vaddr, segment.p_vaddr + segment.p_memsz});
  }
  return ranges;
}

uint16_t elfMachineOfTriple(const std::string &triple) {
  const std::string arch = triple.substr(0, triple.find('-'));
  if (arch == "x86_64" || arch == "amd64")
    return EM_X86_64;
  if (arch == "aarch64" || arch == "arm64")
    return EM_AARCH64;
  return EM_NONE;
}

} // namespace stringrt::detail
