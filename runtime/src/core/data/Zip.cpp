#include "data/Zip.h"

#include "format/Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <optional>
#include <set>

namespace stringrt::detail {

namespace {

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kDirectorySignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr size_t kEndSize = 22;
constexpr size_t kDirectoryEntrySize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr uint32_t kUnset32 = 0xFFFFFFFF; // "see the ZIP64 extra field"
constexpr uint16_t kZip64ExtraId = 0x0001;

uint16_t le16(const uint8_t *p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t le32(const uint8_t *p) { return uint32_t(le16(p)) | uint32_t(le16(p + 2)) << 16; }
uint64_t le64(const uint8_t *p) { return uint64_t(le32(p)) | uint64_t(le32(p + 4)) << 32; }

std::string member(const std::string &name) { return "zip member " + quoteForMessage(name); }

// Replaces the 32-bit fields set to 0xFFFFFFFF by the 64-bit values of the
// ZIP64 extra field, which holds them in this order.
void readZip64Extra(const std::string &path, const uint8_t *extra, size_t length, ZipEntry &entry) {
  std::vector<uint64_t *> wanted;
  for (uint64_t *field : {&entry.size, &entry.compressedSize, &entry.localHeaderOffset})
    if (*field == kUnset32)
      wanted.push_back(field);
  if (wanted.empty())
    return;
  for (size_t pos = 0; pos + 4 <= length;) {
    uint16_t id = le16(extra + pos), size = le16(extra + pos + 2);
    if (pos + 4 + size > length)
      break;
    if (id == kZip64ExtraId) {
      if (size < 8 * wanted.size())
        break;
      for (size_t i = 0; i < wanted.size(); ++i)
        *wanted[i] = le64(extra + pos + 4 + 8 * i);
      return;
    }
    pos += 4 + size;
  }
  throw Error(path, fmt::format("{} has 32-bit sizes marked as ZIP64 but no "
                                "valid ZIP64 extra field",
                                member(entry.name)));
}

// Inflates raw deflate data to exactly `size` bytes.
std::vector<uint8_t> inflateRaw(const std::string &path, const std::string &name,
                                std::vector<uint8_t> &compressed, uint64_t size) {
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK)
    throw Error(path, "cannot initialise zlib");
  struct End {
    z_stream &s;
    ~End() { inflateEnd(&s); }
  } end{stream};
  // One byte of spare room tells data longer than recorded from data that
  // fits exactly.
  std::vector<uint8_t> out(static_cast<size_t>(size) + 1);
  stream.next_in = compressed.data();
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  int status = inflate(&stream, Z_FINISH);
  if (status == Z_STREAM_END && stream.total_out == size) {
    out.pop_back();
    return out;
  }
  if (status == Z_STREAM_END || stream.avail_out == 0)
    throw Error(path, fmt::format("{} does not inflate to its recorded size of "
                                  "{} bytes",
                                  member(name), size));
  if (status == Z_BUF_ERROR)
    throw Error(path, fmt::format("{}: deflated data is truncated", member(name)));
  throw Error(path, fmt::format("{}: deflated data is corrupt: {}", member(name),
                                stream.msg ? stream.msg : zError(status)));
}

} // namespace

ZipArchive::ZipArchive(const std::string &path) : file_(path) {
  const uint64_t size = file_.size();
  if (size < kEndSize)
    throw Error(path, fmt::format("is {} bytes, too short for a zip archive", size));
  // The end record: 22 bytes and a comment of up to 65535 bytes, at the end.
  const uint64_t tailSize = std::min<uint64_t>(size, kEndSize + 0xFFFF);
  std::vector<uint8_t> tail(static_cast<size_t>(tailSize));
  file_.readAt(size - tailSize, tail.data(), tail.size());
  std::optional<size_t> endAt;
  for (size_t i = tail.size() - kEndSize + 1; i-- > 0;)
    if (le32(&tail[i]) == kEndSignature && i + kEndSize + le16(&tail[i + 20]) == tail.size()) {
      endAt = i;
      break;
    }
  if (!endAt)
    throw Error(path, "not a zip archive: no end-of-central-directory record");
  const uint8_t *e = &tail[*endAt];
  const uint16_t disk = le16(e + 4), directoryDisk = le16(e + 6);
  const uint16_t diskEntries = le16(e + 8), count = le16(e + 10);
  const uint32_t directorySize = le32(e + 12), directoryOffset = le32(e + 16);
  if (disk != 0 || directoryDisk != 0 || diskEntries != count)
    throw Error(path, "multi-disk zip archives are not supported");
  if (count == 0xFFFF || directorySize == kUnset32 || directoryOffset == kUnset32)
    throw Error(path, "ZIP64 archives (over 4 GiB or 65535 members) are not supported");
  const uint64_t endOffset = size - tailSize + *endAt;
  if (uint64_t(directoryOffset) + directorySize > endOffset)
    throw Error(path,
                fmt::format("the central directory [{}, {}) runs past its "
                            "end record at {}: truncated or corrupt",
                            directoryOffset, uint64_t(directoryOffset) + directorySize, endOffset));
  directoryOffset_ = directoryOffset;

  std::vector<uint8_t> directory(directorySize);
  file_.readAt(directoryOffset, directory.data(), directory.size());
  std::set<std::string> names;
  size_t pos = 0;
  for (uint16_t i = 0; i < count; ++i) {
    const uint8_t *d = directory.data() + pos;
    if (pos + kDirectoryEntrySize > directory.size() || le32(d) != kDirectorySignature)
      throw Error(path, fmt::format("central directory entry {} of {} is "
                                    "missing or corrupt",
                                    i + 1, count));
    const uint16_t flags = le16(d + 8), nameLength = le16(d + 28);
    const uint16_t extraLength = le16(d + 30), commentLength = le16(d + 32);
    const size_t next = pos + kDirectoryEntrySize + nameLength + extraLength + commentLength;
    if (next > directory.size())
      throw Error(path, fmt::format("central directory entry {} of {} runs past "
                                    "the directory",
                                    i + 1, count));
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char *>(d + kDirectoryEntrySize), nameLength);
    entry.method = le16(d + 10);
    entry.crc32 = le32(d + 16);
    entry.compressedSize = le32(d + 20);
    entry.size = le32(d + 24);
    entry.localHeaderOffset = le32(d + 42);
    readZip64Extra(path, d + kDirectoryEntrySize + nameLength, extraLength, entry);
    if (flags & 1)
      throw Error(path, fmt::format("{} is encrypted", member(entry.name)));
    if (entry.localHeaderOffset >= directoryOffset_)
      throw Error(path, fmt::format("{} starts at byte {}, past the member data",
                                    member(entry.name), entry.localHeaderOffset));
    if (!names.insert(entry.name).second)
      throw Error(path, fmt::format("{} appears twice", member(entry.name)));
    entries_.push_back(std::move(entry));
    pos = next;
  }
}

std::vector<uint8_t> ZipArchive::read(const ZipEntry &entry, uint64_t maxBytes) const {
  const std::string &path = file_.path();
  if (entry.method != 0 && entry.method != 8)
    throw Error(path, fmt::format("{} uses compression method {}; only stored "
                                  "(0) and deflated (8) members are supported",
                                  member(entry.name), entry.method));
  if (entry.size > maxBytes)
    throw Error(path, fmt::format("{} is {} bytes, over the limit of {}", member(entry.name),
                                  entry.size, maxBytes));
  uint8_t local[kLocalHeaderSize];
  if (entry.localHeaderOffset + kLocalHeaderSize > directoryOffset_)
    throw Error(path, fmt::format("{}: local header is truncated", member(entry.name)));
  file_.readAt(entry.localHeaderOffset, local, sizeof local);
  if (le32(local) != kLocalSignature)
    throw Error(path, fmt::format("{}: local header has a bad signature", member(entry.name)));
  const uint64_t dataStart =
      entry.localHeaderOffset + kLocalHeaderSize + le16(local + 26) + le16(local + 28);
  if (dataStart > directoryOffset_ || entry.compressedSize > directoryOffset_ - dataStart)
    throw Error(path, fmt::format("{}: its {} bytes of data run into the central "
                                  "directory: truncated or corrupt",
                                  member(entry.name), entry.compressedSize));
  if (entry.method == 0 && entry.compressedSize != entry.size)
    throw Error(path, fmt::format("{} is stored but records {} bytes compressed "
                                  "and {} uncompressed",
                                  member(entry.name), entry.compressedSize, entry.size));
  // Deflate makes at most 1032 bytes of one (zlib's FAQ): a member claiming
  // more is corrupt, and is refused before its claimed size is allocated.
  if (entry.method == 8 && entry.size / 1032 > entry.compressedSize)
    throw Error(path, fmt::format("{} records {} bytes uncompressed, more than "
                                  "deflate can make of {}: corrupt",
                                  member(entry.name), entry.size, entry.compressedSize));
  std::vector<uint8_t> bytes(static_cast<size_t>(entry.compressedSize));
  file_.readAt(dataStart, bytes.data(), bytes.size());
  if (entry.method == 8)
    bytes = inflateRaw(path, entry.name, bytes, entry.size);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < bytes.size();) {
    auto chunk = static_cast<uInt>(std::min<size_t>(bytes.size() - done, 1u << 30));
    crc = crc32(crc, bytes.data() + done, chunk);
    done += chunk;
  }
  if (crc != entry.crc32)
    throw Error(path, fmt::format("{} fails its CRC-32 check: corrupt", member(entry.name)));
  return bytes;
}

} // namespace stringrt::detail
