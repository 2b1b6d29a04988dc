// IDX image and label files, plain and gzipped, and whole datasets.
#include "stringrt/Idx.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

namespace stringrt {
namespace {

using test::failsWith;
using test::gzipBytes;
using test::TempDir;
using test::writeFile;

std::string bigEndian32(uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
          static_cast<char>(value >> 8), static_cast<char>(value)};
}

// Pixel i of the file is i % 251.
std::string imagesFile(uint32_t count, uint32_t rows, uint32_t cols) {
  std::string bytes = bigEndian32(0x00000803) + bigEndian32(count) +
                      bigEndian32(rows) + bigEndian32(cols);
  for (uint64_t i = 0; i < uint64_t(count) * rows * cols; ++i)
    bytes += static_cast<char>(i % 251);
  return bytes;
}

std::string labelsFile(const std::vector<uint8_t> &labels) {
  return bigEndian32(0x00000801) +
         bigEndian32(static_cast<uint32_t>(labels.size())) +
         std::string(labels.begin(), labels.end());
}

void expectImages(const IdxImages &images, int64_t count, int64_t rows,
                  int64_t cols) {
  EXPECT_EQ(images.count, count);
  EXPECT_EQ(images.rows, rows);
  EXPECT_EQ(images.cols, cols);
  ASSERT_EQ(images.pixels.size(), static_cast<size_t>(count * rows * cols));
  for (size_t i = 0; i < images.pixels.size(); ++i)
    ASSERT_EQ(images.pixels[i], i % 251) << "pixel " << i;
}

class IdxTest : public ::testing::Test {
protected:
  std::string write(const std::string &name, const std::string &bytes) {
    std::string path = dir_.file(name);
    writeFile(path, bytes);
    return path;
  }

  TempDir dir_;
};

TEST_F(IdxTest, ReadsPlainImages) {
  expectImages(readIdxImages(write("images", imagesFile(3, 4, 5))), 3, 4, 5);
}

TEST_F(IdxTest, ReadsGzippedImages) {
  expectImages(
      readIdxImages(write("images.gz", gzipBytes(imagesFile(7, 28, 28)))), 7,
      28, 28);
}

TEST_F(IdxTest, ReadsZeroImages) {
  expectImages(readIdxImages(write("images", imagesFile(0, 28, 28))), 0, 28,
               28);
}

TEST_F(IdxTest, ReadsPlainAndGzippedLabels) {
  std::vector<uint8_t> labels = {0, 9, 3, 3, 1};
  EXPECT_EQ(readIdxLabels(write("labels", labelsFile(labels)), 10), labels);
  EXPECT_EQ(
      readIdxLabels(write("labels.gz", gzipBytes(labelsFile(labels))), 10),
      labels);
  std::vector<uint8_t> allBytes = {0, 128, 255};
  EXPECT_EQ(readIdxLabels(write("wide", labelsFile(allBytes)), 256), allBytes);
}

TEST_F(IdxTest, BadMagic) {
  std::string path = write("images", "PK\x03\x04" + std::string(20, '\0'));
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"bad magic 0x504B0304", "expected 0x00000803"}));
}

TEST_F(IdxTest, LabelFileReadAsImages) {
  std::string path = write("labels", labelsFile({1, 2}));
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"has 1 dimensions (magic 0x00000801), expected 3 for "
                         "images (magic 0x00000803)"}));
}

TEST_F(IdxTest, ImageFileReadAsLabels) {
  std::string path = write("images", imagesFile(1, 2, 2));
  EXPECT_TRUE(failsWith([&] { readIdxLabels(path, 10); }, path,
                        {"has 3 dimensions", "expected 1 for labels"}));
}

TEST_F(IdxTest, UnsupportedElementType) {
  std::string bytes = imagesFile(1, 2, 2);
  bytes[2] = 0x0D; // float
  std::string path = write("images", bytes);
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"IDX element type 0x0D is not supported"}));
}

TEST_F(IdxTest, TruncatedHeader) {
  std::string path = write("images", imagesFile(1, 2, 2).substr(0, 10));
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"is 10 bytes, too short for an IDX header"}));
  std::string tiny = write("tiny", "\0\0");
  EXPECT_TRUE(failsWith([&] { readIdxImages(tiny); }, tiny,
                        {"too short for an IDX header"}));
  std::string empty = write("empty", "");
  EXPECT_TRUE(failsWith([&] { readIdxLabels(empty, 10); }, empty,
                        {"is 0 bytes, too short"}));
}

TEST_F(IdxTest, TruncatedData) {
  std::string bytes = imagesFile(2, 28, 28);
  std::string path = write("images", bytes.substr(0, bytes.size() - 1));
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"is 1583 bytes but its header (2 x 28 x 28) implies "
                         "1584 bytes (16 of header, 1568 of data)"}));
}

TEST_F(IdxTest, TruncatedGzippedData) {
  std::string bytes = imagesFile(2, 28, 28);
  std::string path =
      write("images.gz", gzipBytes(bytes.substr(0, bytes.size() - 100)));
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"is 1484 bytes after decompression but its header (2 "
                         "x 28 x 28) implies 1584 bytes"}));
  std::string compressed = gzipBytes(bytes);
  std::string cut =
      write("cut.gz", compressed.substr(0, compressed.size() / 2));
  EXPECT_TRUE(
      failsWith([&] { readIdxImages(cut); }, cut, {"gzip data is truncated"}));
}

TEST_F(IdxTest, TrailingBytes) {
  std::string path = write("labels", labelsFile({1, 2, 3}) + "x");
  EXPECT_TRUE(failsWith([&] { readIdxLabels(path, 10); }, path,
                        {"is 12 bytes but its header (3) implies 11 bytes (8 "
                         "of header, 3 of data)"}));
}

TEST_F(IdxTest, DimensionsOverflowing64Bits) {
  std::string bytes = bigEndian32(0x00000803) + bigEndian32(0xFFFFFFFF) +
                      bigEndian32(0xFFFFFFFF) + bigEndian32(0xFFFFFFFF) + "xyz";
  std::string path = write("images", bytes);
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"is 19 bytes but its header (4294967295 x 4294967295 "
                         "x 4294967295) implies more than 2^64 bytes"}));
}

TEST_F(IdxTest, EmptyImages) {
  std::string path = write("images", imagesFile(5, 0, 28));
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"images are 0 x 28 pixels, which is empty"}));
}

TEST_F(IdxTest, LabelOutOfRange) {
  std::string path = write("labels", labelsFile({1, 9, 10, 2}));
  EXPECT_TRUE(
      failsWith([&] { readIdxLabels(path, 10); }, path,
                {"label 10 at index 2 is out of range for 10 classes"}));
}

TEST_F(IdxTest, InvalidClassCount) {
  std::string path = write("labels", labelsFile({0}));
  for (int numClasses : {0, -1, 257})
    EXPECT_TRUE(failsWith([&] { readIdxLabels(path, numClasses); }, path,
                          {"the class count must be in 1..256"}));
}

TEST_F(IdxTest, TooLarge) {
  std::string path = write("huge", "");
  std::filesystem::resize_file(path, kMaxIdxBytes +
                                         1); // Sparse: takes no disk space.
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path,
                        {"over the 1073741824-byte limit for IDX files"}));
}

TEST_F(IdxTest, MissingFile) {
  std::string path = dir_.file("absent");
  EXPECT_TRUE(failsWith([&] { readIdxImages(path); }, path, {"no such file"}));
}

// A dataset directory with the four standard files.
class IdxDatasetTest : public ::testing::Test {
protected:
  void writeDataset(uint32_t trainCount, uint32_t testCount, bool gzipped) {
    std::string suffix = gzipped ? ".gz" : "";
    auto put = [&](const std::string &name, const std::string &bytes) {
      writeFile(dir_.file(name + suffix), gzipped ? gzipBytes(bytes) : bytes);
    };
    put("train-images-idx3-ubyte", imagesFile(trainCount, 4, 4));
    put("train-labels-idx1-ubyte", labelsFile(labelsFor(trainCount)));
    put("t10k-images-idx3-ubyte", imagesFile(testCount, 4, 4));
    put("t10k-labels-idx1-ubyte", labelsFile(labelsFor(testCount)));
  }

  static std::vector<uint8_t> labelsFor(uint32_t count) {
    std::vector<uint8_t> labels;
    for (uint32_t i = 0; i < count; ++i)
      labels.push_back(static_cast<uint8_t>(i % 10));
    return labels;
  }

  std::string dir() const { return dir_.path().string(); }

  TempDir dir_;
};

TEST_F(IdxDatasetTest, LoadsPlainFiles) {
  writeDataset(12, 5, false);
  IdxDataset dataset = loadIdxDataset(dir());
  expectImages(dataset.train.images, 12, 4, 4);
  expectImages(dataset.test.images, 5, 4, 4);
  EXPECT_EQ(dataset.train.labels, labelsFor(12));
  EXPECT_EQ(dataset.test.labels, labelsFor(5));
}

TEST_F(IdxDatasetTest, LoadsGzippedFiles) {
  writeDataset(12, 5, true);
  IdxDataset dataset = loadIdxDataset(dir());
  expectImages(dataset.train.images, 12, 4, 4);
  EXPECT_EQ(dataset.test.labels, labelsFor(5));
}

TEST_F(IdxDatasetTest, PrefersPlainFilesOverGzipped) {
  writeDataset(12, 5, true);
  writeFile(dir_.file("train-labels-idx1-ubyte"),
            labelsFile(std::vector<uint8_t>(12, 7)));
  EXPECT_EQ(loadIdxDataset(dir()).train.labels, std::vector<uint8_t>(12, 7));
}

TEST_F(IdxDatasetTest, CountMismatch) {
  writeDataset(12, 5, false);
  writeFile(dir_.file("t10k-labels-idx1-ubyte"), labelsFile(labelsFor(4)));
  EXPECT_TRUE(
      failsWith([&] { loadIdxDataset(dir()); }, dir(),
                {dir_.file("t10k-images-idx3-ubyte") + " has 5 images but " +
                 dir_.file("t10k-labels-idx1-ubyte") + " has 4 labels"}));
}

TEST_F(IdxDatasetTest, MissingFile) {
  writeDataset(12, 5, true);
  std::filesystem::remove(dir_.file("t10k-labels-idx1-ubyte.gz"));
  EXPECT_TRUE(failsWith(
      [&] { loadIdxDataset(dir()); }, dir(),
      {"missing t10k-labels-idx1-ubyte (or t10k-labels-idx1-ubyte.gz)"}));
}

TEST_F(IdxDatasetTest, LabelOutOfRangeForClassCount) {
  writeDataset(12, 5, false);
  EXPECT_TRUE(failsWith([&] { loadIdxDataset(dir(), 5); },
                        dir_.file("train-labels-idx1-ubyte"),
                        {"label 5 at index 5 is out of range for 5 classes"}));
}

TEST_F(IdxDatasetTest, EmptySplit) {
  writeDataset(0, 5, false);
  EXPECT_TRUE(failsWith([&] { loadIdxDataset(dir()); },
                        dir_.file("train-images-idx3-ubyte"),
                        {"contains no images"}));
}

TEST_F(IdxDatasetTest, ImageSizeMismatchBetweenSplits) {
  writeDataset(12, 5, false);
  writeFile(dir_.file("t10k-images-idx3-ubyte"), imagesFile(5, 3, 4));
  EXPECT_TRUE(failsWith([&] { loadIdxDataset(dir()); }, dir(),
                        {"train images are 4 x 4 but test images are 3 x 4"}));
}

TEST_F(IdxDatasetTest, MissingDirectory) {
  std::string missing = dir_.file("nope");
  EXPECT_TRUE(failsWith([&] { loadIdxDataset(missing); }, missing,
                        {"no such directory"}));
  writeFile(missing, "file");
  EXPECT_TRUE(failsWith([&] { loadIdxDataset(missing); }, missing,
                        {"is not a directory"}));
}

} // namespace
} // namespace stringrt
