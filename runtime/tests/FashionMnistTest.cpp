// Loads the real Fashion-MNIST data from Debian's dataset-fashion-mnist
// package when it is installed.
#include "stringrt/Idx.h"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>

namespace stringrt {
namespace {

constexpr const char *kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

TEST(FashionMnistTest, LoadsTheInstalledDataset) {
  if (!std::filesystem::exists(std::filesystem::path(kFashionMnistDir) /
                               "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << kFashionMnistDir << " is not installed";
  IdxDataset dataset = loadIdxDataset(kFashionMnistDir);
  EXPECT_EQ(dataset.train.images.count, 60000);
  EXPECT_EQ(dataset.test.images.count, 10000);
  for (const IdxSplit *split : {&dataset.train, &dataset.test}) {
    EXPECT_EQ(split->images.rows, 28);
    EXPECT_EQ(split->images.cols, 28);
    EXPECT_EQ(split->images.pixels.size(),
              static_cast<size_t>(split->images.count) * 28 * 28);
    EXPECT_EQ(split->labels.size(), static_cast<size_t>(split->images.count));
  }
  std::array<int, 10> trainCounts{}, testCounts{};
  for (uint8_t label : dataset.train.labels)
    ++trainCounts.at(label);
  for (uint8_t label : dataset.test.labels)
    ++testCounts.at(label);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(trainCounts[c], 6000) << "class " << c;
    EXPECT_EQ(testCounts[c], 1000) << "class " << c;
  }
}

} // namespace
} // namespace stringrt
