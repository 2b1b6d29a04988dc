#include "data/Gzip.h"

#include "stringrt/Error.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <limits>

namespace stringrt::detail {

bool isGzip(const std::vector<uint8_t> &bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

namespace {
class Inflater {
public:
  explicit Inflater(const std::string &path) : path_(path) {
    // 16 + MAX_WBITS: accept the gzip wrapper only.
    if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK)
      throw Error(path, "cannot initialise zlib");
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(const Inflater &) = delete;
  Inflater &operator=(const Inflater &) = delete;

  z_stream &stream() { return stream_; }

  [[noreturn]] void fail(int status) const {
    const char *detail = stream_.msg ? stream_.msg : zError(status);
    throw Error(path_, fmt::format("gzip data is corrupt: {}", detail));
  }

private:
  const std::string &path_;
  z_stream stream_{};
};
} // namespace

std::vector<uint8_t> gunzip(const std::string &path,
                            const std::vector<uint8_t> &compressed,
                            uint64_t maxBytes) {
  constexpr size_t kChunk = 1 << 20;
  constexpr size_t kMaxZlibCount = std::numeric_limits<uInt>::max();
  Inflater inflater(path);
  z_stream &stream = inflater.stream();
  std::vector<uint8_t> out;
  size_t inputUsed = 0;
  bool memberDone = false;
  while (true) {
    if (stream.avail_in == 0 && inputUsed < compressed.size()) {
      size_t count = std::min(compressed.size() - inputUsed, kMaxZlibCount);
      stream.next_in = const_cast<Bytef *>(compressed.data() + inputUsed);
      stream.avail_in = static_cast<uInt>(count);
      inputUsed += count;
    }
    if (memberDone) {
      if (stream.avail_in == 0)
        break; // Every member ended and no input is left.
      // Another gzip member follows, as `cat a.gz b.gz` produces.
      if (inflateReset(&stream) != Z_OK)
        throw Error(path, "cannot reset zlib");
      memberDone = false;
    }
    // One byte beyond the limit is allowed to arrive, so that data of exactly
    // maxBytes can still reach its end marker and over-long data is detected.
    size_t room = static_cast<size_t>(
        std::min<uint64_t>(kChunk, maxBytes + 1 - out.size()));
    size_t before = out.size();
    out.resize(before + room);
    stream.next_out = out.data() + before;
    stream.avail_out = static_cast<uInt>(room);
    int status = inflate(&stream, Z_NO_FLUSH);
    out.resize(before + room - stream.avail_out);
    if (out.size() > maxBytes)
      throw Error(
          path,
          fmt::format("decompresses to more than the {}-byte limit", maxBytes));
    if (status == Z_STREAM_END) {
      memberDone = true;
      continue;
    }
    // Z_BUF_ERROR means no progress was possible; output room was given, so
    // the input ran out.
    if (status == Z_BUF_ERROR && stream.avail_in == 0 &&
        inputUsed == compressed.size())
      throw Error(path, "gzip data is truncated");
    if (status != Z_OK)
      inflater.fail(status);
  }
  return out;
}

} // namespace stringrt::detail
