#include "TestFiles.h"

#include "stringrt/Error.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace stringrt::test {

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "stringrt-test-XXXXXX")
          .string();
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("cannot create a temporary directory from " +
                             pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  // Tests may leave read-only directories behind; make them removable.
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path_, ignored);
}

std::vector<std::string> TempDir::entries() const {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(path_))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write test file " + path);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read test file " + path);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string gzipBytes(const std::string &bytes) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&stream, bytes.size()) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef *>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int status = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (status != Z_STREAM_END)
    throw std::runtime_error("deflate failed");
  return out;
}

std::string littleEndian(uint64_t value, int count) {
  std::string bytes;
  for (int i = 0; i < count; ++i)
    bytes += static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

::testing::AssertionResult
failsWith(const std::function<void()> &action, const std::string &path,
          const std::vector<std::string> &fragments) {
  try {
    action();
  } catch (const stringrt::Error &error) {
    std::string message = error.what();
    if (error.path() != path)
      return ::testing::AssertionFailure()
             << "error is about \"" << error.path() << "\", expected \"" << path
             << "\": " << message;
    if (!path.empty() && message.rfind(path + ": ", 0) != 0)
      return ::testing::AssertionFailure()
             << "message does not start with the path: " << message;
    for (const std::string &fragment : fragments)
      if (message.find(fragment) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message lacks \"" << fragment << "\": " << message;
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception &error) {
    return ::testing::AssertionFailure()
           << "threw something other than stringrt::Error: " << error.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

std::string existingPathFromEnv(const char *variable, std::string &why) {
  const char *path = std::getenv(variable);
  if (!path || !*path) {
    why = std::string(variable) + " is not set";
    return "";
  }
  if (!std::filesystem::exists(path)) {
    why = std::string(variable) + "=" + path + " does not exist";
    return "";
  }
  return path;
}

} // namespace stringrt::test
