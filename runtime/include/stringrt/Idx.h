// IDX data files, the format of MNIST and Fashion-MNIST: a 4-byte magic
// (0, 0, element type, number of dimensions), big-endian u32 dimensions, then
// the elements. Files may be gzipped. Every file is untrusted: malformed ones
// throw stringrt::Error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt {

// Limit on an IDX file's size, and on its size after decompression.
constexpr uint64_t kMaxIdxBytes = uint64_t(1) << 30;

// Unsigned-byte images, row-major: pixels[(i * rows + r) * cols + c].
struct IdxImages {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;
};

// An image file (magic 0x00000803: u8, 3 dimensions), plain or gzipped.
IdxImages readIdxImages(const std::string &path);

// A label file (magic 0x00000801: u8, 1 dimension), plain or gzipped; every
// label must be below numClasses (1..256).
std::vector<uint8_t> readIdxLabels(const std::string &path, int numClasses);

struct IdxSplit {
  IdxImages images;
  std::vector<uint8_t> labels;
};

struct IdxDataset {
  IdxSplit train;
  IdxSplit test;
};

// Loads train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte from `dir`, each plain or
// with a .gz suffix (plain preferred when both exist). Checks that each split
// has as many labels as images, is not empty, and that both splits' images
// have the same size.
IdxDataset loadIdxDataset(const std::string &dir, int numClasses = 10);

// The files loadIdxDataset would read in `dir`: of each of the four, the
// plain and the gzipped name that exist (both when both do: outputs must
// not overwrite either).
std::vector<std::string> idxDatasetFiles(const std::string &dir);

} // namespace stringrt
