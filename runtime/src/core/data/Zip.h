// Reading the members of a zip archive (the container of NumPy's .npz
// files): the central directory is read when the archive is opened, a
// member's bytes when asked for. Stored and deflated members (np.savez and
// np.savez_compressed) are supported, each checked against its CRC-32;
// encrypted members, multi-disk archives and ZIP64 end records (archives
// over 4 GiB) are refused. Private to the runtime.
#pragma once

#include "format/InputFile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

struct ZipEntry {
  std::string name;
  uint16_t method = 0; // 0: stored, 8: deflated.
  uint32_t crc32 = 0;
  uint64_t compressedSize = 0;
  uint64_t size = 0;
  uint64_t localHeaderOffset = 0;
};

class ZipArchive {
public:
  // Opens `path` and reads its central directory; throws Error(path, ...)
  // if it is not a well-formed zip archive.
  explicit ZipArchive(const std::string &path);

  const std::vector<ZipEntry> &entries() const { return entries_; }
  // A member's uncompressed bytes; throws if it is larger than `maxBytes`,
  // corrupt, or compressed with a method other than stored or deflated.
  std::vector<uint8_t> read(const ZipEntry &entry, uint64_t maxBytes) const;

private:
  InputFile file_;
  uint64_t directoryOffset_ = 0; // Members' data ends before it.
  std::vector<ZipEntry> entries_;
};

} // namespace stringrt::detail
