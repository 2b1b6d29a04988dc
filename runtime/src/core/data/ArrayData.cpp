// Image and token data sets from .npy, .npz and safetensors files
// (ArrayData.h): finding the arrays, checking their dtypes, shapes and
// values, and handing them to DataSet.
#include "stringrt/ArrayData.h"

#include "format/InputFile.h"
#include "format/Json.h"
#include "data/Npy.h"
#include "data/Zip.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"
#include "stringrt/TextCorpus.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>

namespace stringrt {

using detail::DataArray;
using detail::quoteForMessage;

namespace {

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The named arrays of an .npz file (members "NAME.npy") or a safetensors
// file (tensors), each read when asked for.
class ArraySource {
public:
  explicit ArraySource(const std::string &path) : path_(path) {
    if (endsWith(path, ".npz"))
      zip_.emplace(path);
    else
      safetensors_.emplace(SafetensorsFile::open(path));
  }

  const std::string &path() const { return path_; }

  // The array `name` of a safetensors file, whose bytes can be mapped in
  // place (map); none in an .npz file, whose members are read whole.
  const TensorInfo *mappable(const std::string &name) const {
    return safetensors_ ? safetensors_->find(name) : nullptr;
  }
  std::shared_ptr<const detail::MappedRegion> map(const std::string &name) const {
    return safetensors_->mapBytes(name);
  }

  DataArray require(const std::string &name) const {
    if (zip_) {
      for (const detail::ZipEntry &entry : zip_->entries())
        if (entry.name == name + ".npy")
          return detail::parseNpy(path_, entry.name, zip_->read(entry, kMaxDataArrayBytes));
    } else if (const TensorInfo *info = safetensors_->find(name)) {
      if (info->end - info->begin > kMaxDataArrayBytes)
        throw Error(path_, fmt::format("array {} is {} bytes, over the limit "
                                       "of {}",
                                       quoteForMessage(name), info->end - info->begin,
                                       kMaxDataArrayBytes));
      return DataArray{info->dtype, info->shape, safetensors_->readBytes(name)};
    }
    throw Error(path_,
                fmt::format("has no array {} (it has: {})", quoteForMessage(name), namesText()));
  }

private:
  std::string namesText() const {
    std::vector<std::string> names;
    if (zip_) {
      for (const detail::ZipEntry &entry : zip_->entries())
        names.push_back(endsWith(entry.name, ".npy") ? entry.name.substr(0, entry.name.size() - 4)
                                                     : entry.name + " (not a .npy member)");
    } else {
      for (const TensorInfo &info : safetensors_->tensors())
        names.push_back(info.name);
    }
    return names.empty() ? std::string("no arrays") : fmt::format("{}", fmt::join(names, ", "));
  }

  std::string path_;
  std::optional<detail::ZipArchive> zip_;
  std::optional<SafetensorsFile> safetensors_;
};

[[noreturn]] void fail(const std::string &path, const std::string &name, const std::string &what) {
  throw Error(path, fmt::format("array {} {}", quoteForMessage(name), what));
}

template <typename T> int64_t element(const DataArray &array, size_t i) {
  T value;
  std::memcpy(&value, array.bytes.data() + i * sizeof(T), sizeof(T));
  return static_cast<int64_t>(value);
}

// The elements of an integer array of shape [N], each in [0, limit).
std::vector<int32_t> integers(const std::string &path, const std::string &name,
                              const DataArray &array, int64_t limit, const char *what) {
  if (array.shape.size() != 1)
    fail(path, name, fmt::format("has shape {}, expected [N]", shapeText(array.shape)));
  int64_t (*read)(const DataArray &, size_t) = nullptr;
  switch (array.dtype) {
  case DType::I64:
    read = element<int64_t>;
    break;
  case DType::I32:
    read = element<int32_t>;
    break;
  case DType::I16:
    read = element<int16_t>;
    break;
  case DType::I8:
    read = element<int8_t>;
    break;
  case DType::U8:
    read = element<uint8_t>;
    break;
  default:
    fail(path, name,
         fmt::format("has dtype {}; {}s must be integers (I64, "
                     "I32, I16, I8 or U8)",
                     dtypeName(array.dtype), what));
  }
  std::vector<int32_t> values(static_cast<size_t>(array.shape[0]));
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t v = read(array, i);
    if (v < 0 || v >= limit)
      fail(path, name, fmt::format("has {} {} at index {}, outside [0, {})", what, v, i, limit));
    values[i] = static_cast<int32_t>(v);
  }
  return values;
}

// One split's images ([N, C, H, W] or [N, H, W], u8 or f32) and labels.
struct LoadedSplit {
  std::vector<int64_t> imageShape; // [C, H, W]
  ImageSplit split;
};

LoadedSplit loadImageSplit(const ArraySource &source, const std::string &prefix,
                           int64_t numClasses) {
  const std::string &path = source.path();
  const std::string imagesName = prefix + "_images", labelsName = prefix + "_labels";
  // Images of a safetensors file stay in the file, mapped (ImageSplit);
  // those of an .npz file are read whole.
  const TensorInfo *inPlace = source.mappable(imagesName);
  DataArray images = inPlace ? DataArray{inPlace->dtype, inPlace->shape, {}}
                             : source.require(imagesName);
  DataArray labels = source.require(labelsName);
  LoadedSplit loaded;
  const std::vector<int64_t> &shape = images.shape;
  if (shape.size() == 3)
    loaded.imageShape = {1, shape[1], shape[2]};
  else if (shape.size() == 4)
    loaded.imageShape = {shape[1], shape[2], shape[3]};
  else
    fail(path, imagesName,
         fmt::format("has shape {}, expected [N, C, H, W] or "
                     "[N, H, W]",
                     shapeText(shape)));
  if (shape[0] == 0)
    fail(path, imagesName, "holds no images");
  for (int64_t dim : loaded.imageShape)
    if (dim == 0)
      fail(path, imagesName, fmt::format("has empty images (shape {})", shapeText(shape)));
  loaded.split.labels = integers(path, labelsName, labels, numClasses, "label");
  if (static_cast<int64_t>(loaded.split.labels.size()) != shape[0])
    throw Error(path, fmt::format("array {} has {} images but {} has {} labels",
                                  quoteForMessage(imagesName), shape[0],
                                  quoteForMessage(labelsName), loaded.split.labels.size()));
  if (inPlace && (images.dtype == DType::U8 || images.dtype == DType::F32)) {
    std::shared_ptr<const detail::MappedRegion> region = source.map(imagesName);
    loaded.split.mapped = region->data();
    loaded.split.mappedPixels = region->size() / dtypeSize(images.dtype);
    loaded.split.mappedDType = images.dtype;
    loaded.split.mappedFile = path;
    loaded.split.mappedArray = imagesName;
    loaded.split.mapping = std::move(region);
  } else if (images.dtype == DType::U8) {
    loaded.split.u8 = std::move(images.bytes);
  } else if (images.dtype == DType::F32) {
    std::vector<float> &f32 = loaded.split.f32;
    f32.resize(images.bytes.size() / sizeof(float));
    std::memcpy(f32.data(), images.bytes.data(), images.bytes.size());
    for (size_t i = 0; i < f32.size(); ++i)
      if (!std::isfinite(f32[i]))
        fail(path, imagesName,
             fmt::format("has a non-finite pixel ({}) at "
                         "element {}",
                         f32[i], i));
  } else {
    fail(path, imagesName,
         fmt::format("has dtype {}; images must be U8 "
                     "(scaled by 1/255) or F32",
                     dtypeName(images.dtype)));
  }
  return loaded;
}

} // namespace

bool isArrayDataPath(const std::string &path) {
  return endsWith(path, ".npy") || endsWith(path, ".npz") || endsWith(path, ".safetensors");
}

DataSet loadArrayImages(const std::string &path, int64_t numClasses) {
  if (endsWith(path, ".npy"))
    throw Error(path, "a .npy file holds one array, but image data needs "
                      "train_images, train_labels, test_images and test_labels: "
                      "save them together in an .npz or safetensors file "
                      "(docs/data.md)");
  ArraySource source(path);
  LoadedSplit train = loadImageSplit(source, "train", numClasses);
  LoadedSplit test = loadImageSplit(source, "test", numClasses);
  if (train.imageShape != test.imageShape)
    throw Error(path, fmt::format("train images are {} but test images are {} "
                                  "(C, H, W)",
                                  shapeText(train.imageShape), shapeText(test.imageShape)));
  const std::vector<int64_t> &s = train.imageShape;
  try {
    return DataSet::images(s[0], s[1], s[2], std::move(train.split), std::move(test.split));
  } catch (const Error &error) {
    throw Error(path, error.what());
  }
}

DataSet loadArrayTokens(const std::string &path, int64_t contextLength, int64_t vocabSize) {
  std::vector<int32_t> train, test;
  if (endsWith(path, ".npy")) {
    DataArray all = detail::readNpyFile(path, kMaxDataArrayBytes);
    TextCorpus corpus;
    corpus.tokens = integers(path, "tokens", all, vocabSize, "token");
    try {
      std::tie(train, test) = splitTrainTest(corpus, kTextTestFraction);
    } catch (const Error &error) {
      throw Error(path, error.what());
    }
  } else {
    ArraySource source(path);
    train = integers(path, "train_tokens", source.require("train_tokens"), vocabSize, "token");
    test = integers(path, "test_tokens", source.require("test_tokens"), vocabSize, "token");
  }
  try {
    return DataSet::textFromTokens(std::move(train), std::move(test), contextLength, vocabSize);
  } catch (const Error &error) {
    throw Error(path, error.what());
  }
}

} // namespace stringrt
