// Helpers shared by the runtime tests: a scratch directory, file I/O and a
// check that an action fails with a stringrt::Error about a given file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace stringrt::test {

// A fresh directory under the system temporary directory, removed with its
// contents when the object goes away.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::filesystem::path &path() const { return path_; }
  // Path of `name` inside the directory.
  std::string file(const std::string &name) const {
    return (path_ / name).string();
  }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const;

private:
  std::filesystem::path path_;
};

void writeFile(const std::string &path, const std::string &bytes);

// The path the environment variable `variable` names, or "" with `why` set
// when it is unset, empty or names nothing that exists (a test then skips).
std::string existingPathFromEnv(const char *variable, std::string &why);
std::string readFile(const std::string &path);

// `bytes` compressed into the gzip format.
std::string gzipBytes(const std::string &bytes);

// `value` as `count` little-endian bytes.
std::string littleEndian(uint64_t value, int count = 8);

// The bytes of a vector's elements, as they are in memory.
template <typename T> std::string bytesOf(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(T));
}

// A safetensors file by hand: the header's length, the header, the data.
inline std::string safetensorsBytes(const std::string &header,
                                    const std::string &data) {
  return littleEndian(header.size()) + header + data;
}

// Success if `action` throws a stringrt::Error whose path() is `path` (empty:
// an error about no file), whose message starts with "<path>: " and contains
// every fragment.
::testing::AssertionResult failsWith(const std::function<void()> &action,
                                     const std::string &path,
                                     const std::vector<std::string> &fragments);

} // namespace stringrt::test
