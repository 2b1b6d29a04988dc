#include "stringrt/Data.h"

#include "SampleChunks.h"
#include "execution/Initializers.h"
#include "format/Json.h"
#include "stringrt/Error.h"
#include "stringrt/Idx.h"
#include "stringrt/TextCorpus.h"
#include "stringrt/cpu/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace stringrt {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// splitmix64 as a generator: each call returns the output for the current
// state and advances it by the golden gamma.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t r = detail::splitmix64(state_);
    state_ += kGolden;
    return r;
  }
  // Uniform in [0, bound), bound >= 1, without modulo bias.
  uint64_t below(uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound; // 2^64 mod bound
    for (;;) {
      uint64_t r = next();
      if (r >= threshold)
        return r % bound;
    }
  }

private:
  uint64_t state_;
};

int64_t windowCount(size_t tokens, int64_t context) {
  if (tokens < 1)
    return 0;
  return static_cast<int64_t>((tokens - 1) / static_cast<size_t>(context));
}

} // namespace

std::vector<int64_t> epochOrder(int64_t count, uint64_t seed, int64_t epoch) {
  if (count < 0)
    throw Error(fmt::format("epochOrder: negative count {}", count));
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    order[static_cast<size_t>(i)] = i;
  SplitMix64 rng(seed ^ detail::splitmix64(static_cast<uint64_t>(epoch)));
  for (int64_t i = count - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DataSet DataSet::idx(const std::string &dir, int numClasses) {
  IdxDataset data = loadIdxDataset(dir, numClasses);
  auto split = [](IdxSplit &idx) {
    ImageSplit split;
    split.u8 = std::move(idx.images.pixels);
    split.labels.assign(idx.labels.begin(), idx.labels.end());
    return split;
  };
  return images(1, data.train.images.rows, data.train.images.cols,
                split(data.train), split(data.test));
}

void ImageSplit::imageAsF32(uint64_t i, uint64_t image, float *dst) const {
  if (mapped && mappedDType == DType::F32) {
    std::memcpy(dst, mapped + i * image * sizeof(float), image * sizeof(float));
    for (uint64_t p = 0; p < image; ++p)
      if (!std::isfinite(dst[p]))
        throw Error(mappedFile, fmt::format("array {} has a non-finite pixel ({}) at element {}",
                                            detail::quoteForMessage(mappedArray), dst[p],
                                            i * image + p));
    return;
  }
  if (mapped || f32.empty()) {
    const uint8_t *src = (mapped ? mapped : u8.data()) + i * image;
    for (uint64_t p = 0; p < image; ++p)
      dst[p] = static_cast<float>(src[p]) / 255.0f;
    return;
  }
  std::copy(f32.begin() + static_cast<ptrdiff_t>(i * image),
            f32.begin() + static_cast<ptrdiff_t>((i + 1) * image), dst);
}

DataSet DataSet::images(int64_t channels, int64_t rows, int64_t cols,
                        ImageSplit train, ImageSplit test) {
  if (channels < 1 || rows < 1 || cols < 1)
    throw Error(fmt::format("images of {} x {} x {} pixels are empty", channels,
                            rows, cols));
  const auto image = static_cast<uint64_t>(channels * rows * cols);
  for (const auto &[split, name] : {std::pair{&train, "train"}, {&test, "test"}}) {
    if (split->labels.empty())
      throw Error(fmt::format("the {} split has no images", name));
    if (int(!split->u8.empty()) + int(!split->f32.empty()) + int(split->mapped != nullptr) > 1)
      throw Error(fmt::format("the {} split has pixels in more than one of u8, f32 and a "
                              "mapped file",
                              name));
    if (split->mapped && split->mappedDType != DType::U8 && split->mappedDType != DType::F32)
      throw Error(fmt::format("the {} split's mapped pixels are {}, not U8 or F32", name,
                              dtypeName(split->mappedDType)));
    const uint64_t pixels = split->u8.size() + split->f32.size() + split->mappedPixels;
    if (pixels != split->labels.size() * image)
      throw Error(fmt::format("the {} split has {} pixels for {} labels of "
                              "{} x {} x {} images",
                              name, pixels, split->labels.size(), channels,
                              rows, cols));
  }
  DataSet set;
  set.channels_ = channels;
  set.rows_ = rows;
  set.cols_ = cols;
  set.train_ = std::move(train);
  set.test_ = std::move(test);
  return set;
}

DataSet DataSet::text(const std::string &path, int64_t contextLength) {
  if (contextLength < 1)
    throw Error(path, fmt::format("text data needs a context length >= 1, "
                                  "got {}",
                                  contextLength));
  TextCorpus corpus =
      loadTextCorpus(path, static_cast<size_t>(contextLength) + 1);
  auto [train, test] = splitTrainTest(corpus, kTextTestFraction);
  auto need = static_cast<size_t>(contextLength) + 1;
  if (train.size() < need || test.size() < need)
    throw Error(path,
                fmt::format("text corpus of {} bytes is too short: its train "
                            "({} bytes) and test ({} bytes, the last {}) splits "
                            "each need one window of {} bytes",
                            corpus.tokens.size(), train.size(), test.size(),
                            kTextTestFraction, need));
  return textFromTokens(std::move(train), std::move(test), contextLength);
}

DataSet DataSet::textFromTokens(std::vector<int32_t> train,
                                std::vector<int32_t> test,
                                int64_t contextLength, int64_t vocabSize) {
  if (contextLength < 1)
    throw Error(fmt::format("text data needs a context length >= 1, got {}",
                            contextLength));
  auto need = static_cast<size_t>(contextLength) + 1;
  if (train.size() < need || test.size() < need)
    throw Error(fmt::format("text splits of {} and {} tokens: each needs at "
                            "least one window of {}",
                            train.size(), test.size(), need));
  for (const auto *tokens : {&train, &test})
    for (int32_t t : *tokens)
      if (t < 0 || t >= vocabSize)
        throw Error(fmt::format("text token {} is outside [0, {})", t,
                                vocabSize));
  DataSet set;
  set.text_ = true;
  set.context_ = contextLength;
  set.trainTokens_ = std::move(train);
  set.testTokens_ = std::move(test);
  return set;
}

int64_t DataSet::count(Split split) const {
  bool train = split == Split::Train;
  if (text_)
    return windowCount(train ? trainTokens_.size() : testTokens_.size(),
                       context_);
  return static_cast<int64_t>(train ? train_.labels.size() : test_.labels.size());
}

std::vector<std::vector<int64_t>> DataSet::exampleShapes() const {
  if (text_)
    return {{context_}, {context_}};
  return {{channels_, rows_, cols_}, {}};
}

std::vector<DType> DataSet::dtypes() const {
  if (text_)
    return {DType::I32, DType::I32};
  return {DType::F32, DType::I32};
}

Batch DataSet::batch(Split split, const int64_t *indices, size_t n, Batch recycled) const {
  const bool train = split == Split::Train;
  const int64_t total = count(split);
  for (size_t k = 0; k < n; ++k)
    if (indices[k] < 0 || indices[k] >= total)
      throw Error(fmt::format("example {} is out of range for a split of {}",
                              indices[k], total));
  const auto b = static_cast<int64_t>(n);
  Batch batch = std::move(recycled);
  batch.size = b;
  batch.tensors.resize(2);
  BatchTensor &first = batch.tensors[0];
  BatchTensor &second = batch.tensors[1];
  // A recycled tensor of the same size is written over without a resize
  // (resizing an emptied vector would zero-fill it again).
  if (text_) {
    first.f32.clear();
    second.f32.clear();
    const std::vector<int32_t> &tokens = train ? trainTokens_ : testTokens_;
    const auto t = static_cast<size_t>(context_);
    first.dtype = second.dtype = DType::I32;
    first.shape = second.shape = {b, context_};
    first.i32.resize(n * t);
    second.i32.resize(n * t);
    for (size_t k = 0; k < n; ++k) {
      const int32_t *window =
          tokens.data() + static_cast<size_t>(indices[k]) * t;
      std::copy(window, window + t, first.i32.data() + k * t);
      std::copy(window + 1, window + 1 + t, second.i32.data() + k * t);
    }
    return batch;
  }
  const ImageSplit &images = train ? train_ : test_;
  const auto image = static_cast<size_t>(channels_ * rows_ * cols_);
  first.i32.clear();
  second.f32.clear();
  first.dtype = DType::F32;
  first.shape = {b, channels_, rows_, cols_};
  first.f32.resize(n * image);
  second.dtype = DType::I32;
  second.shape = {b};
  second.i32.resize(n);
  // Samples in parallel on the CPU pool, each written by one chunk: the
  // same bits on any thread count.
  const int64_t grain = detail::samplesPerChunk(static_cast<int64_t>(image));
  cpu::parallelFor(0, b, grain, [&](int64_t kb, int64_t ke) {
    for (auto k = static_cast<size_t>(kb); k < static_cast<size_t>(ke); ++k) {
      const auto i = static_cast<size_t>(indices[k]);
      images.imageAsF32(i, image, first.f32.data() + k * image);
      second.i32[k] = images.labels[i];
    }
  });
  return batch;
}

Batch DataSet::range(Split split, int64_t begin, int64_t end, Batch recycled) const {
  if (begin < 0 || end < begin || end > count(split))
    throw Error(fmt::format("examples [{}, {}) are out of range for a split "
                            "of {}",
                            begin, end, count(split)));
  std::vector<int64_t> indices;
  for (int64_t i = begin; i < end; ++i)
    indices.push_back(i);
  return batch(split, indices.data(), indices.size(), std::move(recycled));
}

} // namespace stringrt
