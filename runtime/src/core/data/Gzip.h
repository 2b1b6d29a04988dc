// Gzip decompression with a size cap, for data files. Private to the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

// True if `bytes` starts with the gzip magic 1f 8b.
bool isGzip(const std::vector<uint8_t> &bytes);

// Decompresses a whole gzip file (one or more concatenated members). Throws an
// Error naming `path` if the data is corrupt or truncated, or if it would
// decompress to more than `maxBytes` (so a small "zip bomb" cannot exhaust
// memory).
std::vector<uint8_t> gunzip(const std::string &path,
                            const std::vector<uint8_t> &compressed,
                            uint64_t maxBytes);

} // namespace stringrt::detail
