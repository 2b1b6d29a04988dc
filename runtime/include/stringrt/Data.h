// Training data as batches of model inputs (docs/package.md, "Training"):
//
// - Image sets (IDX, or arrays from .npz / safetensors files, ArrayData.h):
//   example i is image i as f32 [C, H, W] (u8 pixels as pixel / 255, f32
//   pixels as they are) and its label as i32; a batch is f32 [B, C, H, W]
//   and i32 [B]. IDX images have C = 1.
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
#include <memory>
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

// One split of an image set: count images of C x H x W pixels, row-major,
// in exactly one of `u8` (scaled by 1/255 when batched), `f32` or a mapped
// file, and one label per image.
struct ImageSplit {
  std::vector<uint8_t> u8;
  std::vector<float> f32;
  std::vector<int32_t> labels;
  // Or the pixels in place in a memory-mapped file (loadArrayImages of a
  // safetensors file, docs/data.md): `mappedPixels` pixels of `mappedDType`
  // (U8, or F32 little-endian and not necessarily aligned) at `mapped`,
  // kept alive by `mapping`. A batch reads the images it takes, so a
  // process touches only their pages (a data-parallel rank its share) and
  // a data set larger than RAM trains; F32 pixels are checked to be finite
  // as they are read (an error naming the file and the array), not at load.
  std::shared_ptr<const void> mapping;
  const uint8_t *mapped = nullptr;
  DType mappedDType = DType::U8;
  uint64_t mappedPixels = 0;
  std::string mappedFile, mappedArray;

  // Image i's `image` pixels as f32 into dst (u8 scaled by 1/255).
  void imageAsF32(uint64_t i, uint64_t image, float *dst) const;
};

class DataSet {
public:
  // The images and labels of an IDX directory (loadIdxDataset).
  static DataSet idx(const std::string &dir, int numClasses = 10);
  // Images of `channels` x `rows` x `cols` pixels; checks that each split
  // holds pixels for exactly one image per label and is not empty.
  static DataSet images(int64_t channels, int64_t rows, int64_t cols,
                        ImageSplit train, ImageSplit test);
  // A byte-level text corpus with windows of contextLength + 1 bytes.
  static DataSet text(const std::string &path, int64_t contextLength);
  // From already loaded token sequences (each at least contextLength + 1
  // long), every token in [0, vocabSize).
  static DataSet textFromTokens(std::vector<int32_t> train,
                                std::vector<int32_t> test,
                                int64_t contextLength,
                                int64_t vocabSize = 256);

  bool isText() const { return text_; }
  // Number of examples (images or windows) of a split.
  int64_t count(Split split) const;
  // The shapes of one example's tensors, without the batch dimension:
  // {{C, H, W}, {}} or {{T}, {T}}.
  std::vector<std::vector<int64_t>> exampleShapes() const;
  std::vector<DType> dtypes() const;
  // Human-readable unit of an example for throughput: "images" / "tokens",
  // and how many of them one example is (1 / T).
  const char *unit() const { return text_ ? "tokens" : "images"; }
  int64_t unitsPerExample() const { return text_ ? context_ : 1; }

  // The batch of the examples `indices[0..n)` of a split (each < count()).
  // `recycled`, a batch no longer needed (e.g. the step before last's), lends
  // its buffers: a batch of the same shape allocates nothing, where a fresh
  // one of 256 x 3 x 224 x 224 floats spends about 60 ms zero-filling and
  // faulting in new pages. Its contents are overwritten.
  Batch batch(Split split, const int64_t *indices, size_t n, Batch recycled = {}) const;
  // The batch of examples [begin, end) in order (for evaluation), in a
  // recycled batch's buffers as batch() does.
  Batch range(Split split, int64_t begin, int64_t end, Batch recycled = {}) const;

  // For evaluation at another image size: an image set whose test split is
  // this one's, each image resized to rows x cols bilinearly as f32 pixels
  // (stringrt/Resize.h, torch's convention), and whose train split is empty
  // (training on it is refused). Defined in Resize.cpp.
  DataSet withTestImagesResized(int64_t rows, int64_t cols) const;

private:
  DataSet() = default;

  bool text_ = false;
  // Images.
  int64_t channels_ = 1, rows_ = 0, cols_ = 0;
  ImageSplit train_, test_;
  // Text.
  int64_t context_ = 0;
  std::vector<int32_t> trainTokens_, testTokens_;
};

} // namespace stringrt
