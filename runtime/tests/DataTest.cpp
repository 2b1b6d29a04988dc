// Batching of training data: IDX images normalised to [0, 1] with their
// labels, text windows of T + 1 bytes, and the seeded, platform-independent
// epoch order.
#include "stringrt/Data.h"

#include "TestFiles.h"
#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace stringrt {
namespace {

using test::TempDir;
using test::writeFile;

std::string bigEndian(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xFF);
  return s;
}

// count images of rows x cols; pixel p of image i is (i * 10 + p) % 256,
// label of image i is i % 10.
void writeIdx(const std::string &dir, const std::string &prefix, uint32_t count,
              uint32_t rows, uint32_t cols) {
  std::string images = std::string("\0\0\x08\x03", 4) + bigEndian(count) +
                       bigEndian(rows) + bigEndian(cols);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t p = 0; p < rows * cols; ++p)
      images += static_cast<char>((i * 10 + p) % 256);
  std::string labels = std::string("\0\0\x08\x01", 4) + bigEndian(count);
  for (uint32_t i = 0; i < count; ++i)
    labels += static_cast<char>(i % 10);
  writeFile(dir + "/" + prefix + "-images-idx3-ubyte", images);
  writeFile(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
}

TEST(DataTest, IdxBatchesAreNormalisedImagesAndLabels) {
  TempDir dir;
  writeIdx(dir.path().string(), "train", 30, 2, 3);
  writeIdx(dir.path().string(), "t10k", 5, 2, 3);
  DataSet data = DataSet::idx(dir.path().string());
  EXPECT_FALSE(data.isText());
  EXPECT_EQ(data.count(Split::Train), 30);
  EXPECT_EQ(data.count(Split::Test), 5);
  EXPECT_EQ(data.exampleShapes(),
            (std::vector<std::vector<int64_t>>{{1, 2, 3}, {}}));
  EXPECT_EQ(data.dtypes(), (std::vector<DType>{DType::F32, DType::I32}));
  EXPECT_STREQ(data.unit(), "images");
  EXPECT_EQ(data.unitsPerExample(), 1);

  const int64_t indices[] = {25, 3};
  Batch b = data.batch(Split::Train, indices, 2);
  EXPECT_EQ(b.size, 2);
  ASSERT_EQ(b.tensors.size(), 2u);
  EXPECT_EQ(b.tensors[0].dtype, DType::F32);
  EXPECT_EQ(b.tensors[0].shape, (std::vector<int64_t>{2, 1, 2, 3}));
  EXPECT_EQ(b.tensors[1].dtype, DType::I32);
  EXPECT_EQ(b.tensors[1].shape, (std::vector<int64_t>{2}));
  ASSERT_EQ(b.tensors[0].f32.size(), 12u);
  for (int p = 0; p < 6; ++p) {
    EXPECT_FLOAT_EQ(b.tensors[0].f32[p], ((250 + p) % 256) / 255.0f);
    EXPECT_FLOAT_EQ(b.tensors[0].f32[6 + p], (30 + p) / 255.0f);
  }
  // Pixel 255 is exactly 1, pixel 0 exactly 0.
  EXPECT_EQ(b.tensors[0].f32[5], 1.0f);
  Batch first = data.range(Split::Train, 0, 1);
  EXPECT_EQ(first.tensors[0].f32[0], 0.0f);
  EXPECT_EQ(b.tensors[1].i32, (std::vector<int32_t>{5, 3}));

  Batch test = data.range(Split::Test, 1, 5);
  EXPECT_EQ(test.size, 4);
  EXPECT_EQ(test.tensors[1].i32, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(test.tensors[0].f32[0], 10 / 255.0f);

  const int64_t bad[] = {30};
  EXPECT_THROW(data.batch(Split::Train, bad, 1), Error);
  EXPECT_THROW(data.range(Split::Test, 2, 6), Error);
}

// Large images are gathered in parallel on the CPU pool: every thread count
// gives pixel / 255 of the chosen images, in order, and their labels; so
// does a batch made in a recycled one's buffers.
TEST(DataTest, ImageBatchesAreTheSameOnAnyThreadCountAndRecycled) {
  const int64_t count = 24, C = 3, H = 48, W = 48, n = C * H * W;
  for (bool asFloat : {false, true}) {
    ImageSplit train, test;
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t p = 0; p < n; ++p) {
        const auto pixel = static_cast<uint8_t>((i * 31 + p * 7) % 256);
        if (asFloat)
          train.f32.push_back(static_cast<float>(pixel) / 255.0f);
        else
          train.u8.push_back(pixel);
      }
      train.labels.push_back(static_cast<int32_t>(i % 10));
    }
    test = train;
    DataSet data = DataSet::images(C, H, W, std::move(train), std::move(test));
    std::vector<int64_t> indices;
    for (int64_t k = 0; k < 20; ++k)
      indices.push_back((k * 7 + 3) % count);
    const int original = cpu::numThreads();
    std::vector<Batch> batches;
    for (int threads : {1, 3, 8}) {
      cpu::setNumThreads(threads);
      batches.push_back(data.batch(Split::Train, indices.data(), indices.size()));
    }
    cpu::setNumThreads(original);
    for (const Batch &b : batches) {
      ASSERT_EQ(b.tensors[0].f32.size(), indices.size() * size_t(n));
      for (size_t k = 0; k < indices.size(); ++k) {
        EXPECT_EQ(b.tensors[1].i32[k], indices[k] % 10);
        for (int64_t p = 0; p < n; p += 97) {
          const auto pixel = static_cast<uint8_t>((indices[k] * 31 + p * 7) % 256);
          ASSERT_EQ(b.tensors[0].f32[k * size_t(n) + size_t(p)], static_cast<float>(pixel) / 255.0f)
              << "sample " << k << " value " << p;
        }
      }
      EXPECT_EQ(b.tensors[0].f32, batches[0].tensors[0].f32);
    }
    // A recycled batch lends its buffers and is written over entirely.
    Batch old = data.batch(Split::Train, indices.data() + 1, indices.size() - 1);
    old.tensors[0].f32.resize(indices.size() * size_t(n), -1.0f);
    const float *buffer = old.tensors[0].f32.data();
    Batch again = data.batch(Split::Train, indices.data(), indices.size(), std::move(old));
    EXPECT_EQ(again.tensors[0].f32.data(), buffer);
    EXPECT_EQ(again.size, int64_t(indices.size()));
    EXPECT_EQ(again.tensors[0].shape, (std::vector<int64_t>{int64_t(indices.size()), C, H, W}));
    EXPECT_EQ(again.tensors[0].f32, batches[0].tensors[0].f32);
    EXPECT_EQ(again.tensors[1].i32, batches[0].tensors[1].i32);
  }
}

TEST(DataTest, EpochOrderIsASeededPermutation) {
  std::vector<int64_t> a = epochOrder(100, 42, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(100);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, iota);
  // Determined by (seed, epoch) alone.
  EXPECT_EQ(epochOrder(100, 42, 0), a);
  EXPECT_NE(epochOrder(100, 42, 1), a);
  EXPECT_NE(epochOrder(100, 43, 0), a);
  EXPECT_EQ(epochOrder(0, 1, 0), std::vector<int64_t>{});
  EXPECT_EQ(epochOrder(1, 1, 0), std::vector<int64_t>{0});
  EXPECT_THROW(epochOrder(-1, 0, 0), Error);
}

TEST(DataTest, EpochOrderIsFixedAcrossPlatforms) {
  // Pinned values (computed independently in Python): splitmix64 and the Fisher-Yates shuffle are written out,
  // so these may only change with a deliberate format change (a changed order
  // would break resuming older checkpoints).
  EXPECT_EQ(epochOrder(8, 0, 0), (std::vector<int64_t>{1, 0, 6, 4, 3, 5, 2, 7}));
  EXPECT_EQ(epochOrder(8, 7, 3), (std::vector<int64_t>{3, 5, 1, 2, 6, 0, 4, 7}));
}

TEST(DataTest, TextWindows) {
  // 22 train tokens 0..21 and 6 test tokens; T = 4: windows start every 4
  // tokens and hold 5: floor((22 - 1) / 4) = 5 train windows, 1 test window.
  std::vector<int32_t> train(22), test = {100, 101, 102, 103, 104, 105};
  std::iota(train.begin(), train.end(), 0);
  DataSet data = DataSet::textFromTokens(train, test, 4);
  EXPECT_TRUE(data.isText());
  EXPECT_EQ(data.count(Split::Train), 5);
  EXPECT_EQ(data.count(Split::Test), 1);
  EXPECT_EQ(data.exampleShapes(),
            (std::vector<std::vector<int64_t>>{{4}, {4}}));
  EXPECT_EQ(data.dtypes(), (std::vector<DType>{DType::I32, DType::I32}));
  EXPECT_STREQ(data.unit(), "tokens");
  EXPECT_EQ(data.unitsPerExample(), 4);

  const int64_t indices[] = {4, 1};
  Batch b = data.batch(Split::Train, indices, 2);
  EXPECT_EQ(b.size, 2);
  EXPECT_EQ(b.tensors[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(b.tensors[1].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(b.tensors[0].i32,
            (std::vector<int32_t>{16, 17, 18, 19, 4, 5, 6, 7}));
  EXPECT_EQ(b.tensors[1].i32,
            (std::vector<int32_t>{17, 18, 19, 20, 5, 6, 7, 8}));
  const int64_t other[] = {0, 2};
  Batch recycled = data.batch(Split::Train, other, 2, std::move(b));
  EXPECT_EQ(recycled.tensors[0].i32, (std::vector<int32_t>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(recycled.tensors[1].i32, (std::vector<int32_t>{1, 2, 3, 4, 9, 10, 11, 12}));
  Batch t = data.range(Split::Test, 0, 1);
  EXPECT_EQ(t.tensors[0].i32, (std::vector<int32_t>{100, 101, 102, 103}));
  EXPECT_EQ(t.tensors[1].i32, (std::vector<int32_t>{101, 102, 103, 104}));

  EXPECT_THROW(DataSet::textFromTokens({1, 2}, test, 4), Error);
  EXPECT_THROW(DataSet::textFromTokens(train, test, 0), Error);
  EXPECT_THROW(DataSet::textFromTokens(train, {1, 2, 3, 4, 300}, 4), Error);
}

TEST(DataTest, TextFileSplitsOffTheLastTenth) {
  TempDir dir;
  std::string path = dir.file("corpus.txt");
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += static_cast<char>('a' + i % 26);
  writeFile(path, text);
  DataSet data = DataSet::text(path, 4);
  // 90 train bytes: 22 windows; 10 test bytes (the last): 2 windows.
  EXPECT_EQ(data.count(Split::Train), 22);
  EXPECT_EQ(data.count(Split::Test), 2);
  Batch t = data.range(Split::Test, 0, 1);
  // Byte 90 is 'a' + 90 % 26 = 'm'.
  EXPECT_EQ(t.tensors[0].i32, (std::vector<int32_t>{'m', 'n', 'o', 'p'}));

  // Too short for a test window.
  std::string shortPath = dir.file("short.txt");
  writeFile(shortPath, std::string(20, 'x'));
  EXPECT_TRUE(test::failsWith([&] { DataSet::text(shortPath, 4); }, shortPath,
                              {"too short"}));
}

} // namespace
} // namespace stringrt
