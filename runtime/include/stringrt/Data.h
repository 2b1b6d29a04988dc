// Training data as batches of model inputs (docs/package.md, "Training"):
//
// - IDX image sets: example i is image i as f32 [1, H, W] (pixel / 255) and
//   its label as i32; a batch is f32 [B, 1, H, W] and i32 [B].
// - Byte-level text: the split is cut into windows of T + 1 bytes starting
//   every T bytes (so every byte but the first is a target exactly once);
//   example i is window i: tokens = its first T bytes, targets = its last T;
//   a batch is i32 [B, T] twice. The test split is the last kTextTestFraction
//   of the corpus (splitTrainTest).
//
// The training order of an epoch is a permutation that depends only on
// (seed, epoch) and is computed with splitmix64 and a Fisher-Yates shuffle
// written out here, so it is the same on every platform and a resumed run
// sees the batches an unbroken one would.
#pragma once

#include "stringrt/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt {

// Fraction of a text corpus held out for evaluation.
constexpr double kTextTestFraction = 0.1;

// A deterministic random permutation of [0, count) for `epoch` of a run with
// data seed `seed`: Fisher-Yates (i from count-1 down to 1 swaps i with
// j = r mod (i + 1), r rejected below 2^64 mod (i + 1)) driven by the
// splitmix64 generator started at seed ^ splitmix64(epoch).
std::vector<int64_t> epochOrder(int64_t count, uint64_t seed, int64_t epoch);

// One input tensor of a batch: F32 (f32 filled) or I32 (i32 filled).
struct BatchTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;
};

// The model's inputs, in the manifest's order (image, label or tokens,
// targets).
struct Batch {
  int64_t size = 0;
  std::vector<BatchTensor> tensors;
};

enum class Split { Train, Test };

class DataSet {
public:
  // The images and labels of an IDX directory (loadIdxDataset).
  static DataSet idx(const std::string &dir, int numClasses = 10);
  // A byte-level text corpus with windows of contextLength + 1 bytes.
  static DataSet text(const std::string &path, int64_t contextLength);
  // From already loaded token sequences (each at least contextLength + 1
  // long).
  static DataSet textFromTokens(std::vector<int32_t> train,
                                std::vector<int32_t> test,
                                int64_t contextLength);

  bool isText() const { return text_; }
  // Number of examples (images or windows) of a split.
  int64_t count(Split split) const;
  // The shapes of one example's tensors, without the batch dimension:
  // {{1, H, W}, {}} or {{T}, {T}}.
  std::vector<std::vector<int64_t>> exampleShapes() const;
  std::vector<DType> dtypes() const;
  // Human-readable unit of an example for throughput: "images" / "tokens",
  // and how many of them one example is (1 / T).
  const char *unit() const { return text_ ? "tokens" : "images"; }
  int64_t unitsPerExample() const { return text_ ? context_ : 1; }

  // The batch of the examples `indices[0..n)` of a split (each < count()).
  Batch batch(Split split, const int64_t *indices, size_t n) const;
  // The batch of examples [begin, end) in order (for evaluation).
  Batch range(Split split, int64_t begin, int64_t end) const;

private:
  DataSet() = default;

  bool text_ = false;
  // IDX.
  int64_t rows_ = 0, cols_ = 0;
  std::vector<uint8_t> trainPixels_, testPixels_;
  std::vector<uint8_t> trainLabels_, testLabels_;
  // Text.
  int64_t context_ = 0;
  std::vector<int32_t> trainTokens_, testTokens_;
};

} // namespace stringrt
