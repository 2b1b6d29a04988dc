// Randomly corrupted files are either read correctly or rejected with a
// stringrt::Error; never a crash, a hang or another kind of exception. The
// corruptions are seeded, so failures reproduce.
#include "stringrt/Error.h"
#include "stringrt/Idx.h"
#include "stringrt/Safetensors.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <random>

namespace stringrt {
namespace {

using test::TempDir;

// Flips, overwrites, truncates or extends `bytes` at random.
std::string corrupt(std::string bytes, std::mt19937 &rng) {
  int edits = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int e = 0; e < edits; ++e) {
    size_t size = bytes.size();
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0: // Flip one bit.
      if (size > 0)
        bytes[rng() % size] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 1: // Overwrite one byte, favouring bytes that matter in headers.
      if (size > 0) {
        const char interesting[] = {'\0', '\xff', '{', '}', '[', ']',
                                    '"',  ',',    ':', '-', '9', ' '};
        bytes[rng() % size] = interesting[rng() % sizeof interesting];
      }
      break;
    case 2: // Truncate.
      bytes.resize(size == 0 ? 0 : rng() % size);
      break;
    case 3: // Append junk.
      bytes += std::string(rng() % 16 + 1, static_cast<char>(rng()));
      break;
    }
  }
  return bytes;
}

template <typename Read>
void checkCorruptions(const std::string &original, const std::string &path,
                      Read read, int iterations) {
  std::mt19937 rng(12345);
  int rejected = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string bytes = corrupt(original, rng);
    test::writeFile(path, bytes);
    try {
      read();
    } catch (const Error &error) {
      ++rejected;
      ASSERT_EQ(error.path(), path) << error.what();
    } catch (const std::exception &error) {
      FAIL() << "iteration " << i << ": unexpected exception: " << error.what();
    }
  }
  EXPECT_GT(rejected, iterations / 2);
}

TEST(CorruptionTest, SafetensorsFiles) {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  std::vector<float> weight(24, 0.25f);
  std::vector<int64_t> step = {7};
  std::vector<uint16_t> half(5, 0x3c00);
  writeSafetensors(path,
                   {{"weight", DType::F32, {2, 3, 4}, weight.data()},
                    {"step", DType::I64, {}, step.data()},
                    {"half", DType::F16, {5}, half.data()}},
                   {{"format", "pt"}});
  std::string original = test::readFile(path);
  checkCorruptions(
      original, path,
      [&] {
        SafetensorsFile file = SafetensorsFile::open(path);
        for (const TensorInfo &info : file.tensors()) {
          std::vector<uint8_t> bytes = file.readBytes(info.name);
          ASSERT_EQ(bytes.size(), info.numel() * dtypeSize(info.dtype));
        }
      },
      3000);
}

TEST(CorruptionTest, IdxFiles) {
  TempDir dir;
  std::string path = dir.file("images");
  std::string original =
      std::string("\0\0\x08\x03", 4) + test::littleEndian(0x05000000, 4) +
      test::littleEndian(0x03000000, 4) + test::littleEndian(0x03000000, 4) +
      std::string(45, '\x7f');
  checkCorruptions(
      original, path, [&] { readIdxImages(path); }, 1000);
  checkCorruptions(
      test::gzipBytes(original), path, [&] { readIdxImages(path); }, 1000);
}

} // namespace
} // namespace stringrt
