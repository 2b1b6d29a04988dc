// SafetensorsFile: reading and validating a safetensors header, then tensor
// data on demand. The writer is in SafetensorsWriter.cpp.
#include "stringrt/Safetensors.h"

#include "format/InputFile.h"
#include "format/Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

static_assert(
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "safetensors data is little-endian and is read without byte swapping");

namespace stringrt {

using detail::JsonMember;
using detail::JsonValue;
using detail::quoteForMessage;

int64_t TensorInfo::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string rangeText(const TensorInfo &info) {
  return fmt::format("{} [{}, {})", quoteForMessage(info.name), info.begin,
                     info.end);
}

// Validates one header entry "name": {"dtype", "shape", "data_offsets"}.
class EntryParser {
public:
  EntryParser(const std::string &path, const std::string &name)
      : path_(path), name_(name) {}

  TensorInfo parse(const JsonValue &entry, uint64_t dataSize) {
    if (entry.kind != JsonValue::Kind::Object)
      fail(fmt::format("entry must be an object, got {}",
                       jsonKindName(entry.kind)));
    const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const JsonMember &member : entry.members) {
      const JsonValue **slot = member.key == "dtype"          ? &dtype
                               : member.key == "shape"        ? &shape
                               : member.key == "data_offsets" ? &offsets
                                                              : nullptr;
      if (!slot)
        fail(fmt::format(
            "unexpected key {} (expected dtype, shape, data_offsets)",
            quoteForMessage(member.key)));
      if (*slot)
        fail(fmt::format("key {} appears twice", quoteForMessage(member.key)));
      *slot = &member.value;
    }
    for (auto [value, key] : {std::pair{dtype, "dtype"},
                              {shape, "shape"},
                              {offsets, "data_offsets"}})
      if (!value)
        fail(fmt::format("missing \"{}\"", key));

    TensorInfo info;
    info.name = name_;
    info.dtype = parseDTypeField(*dtype);
    info.shape = parseShape(*shape);
    parseOffsets(*offsets, info);
    checkSize(info, dataSize);
    return info;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path_,
                fmt::format("tensor {}: {}", quoteForMessage(name_), what));
  }

  DType parseDTypeField(const JsonValue &value) const {
    if (value.kind != JsonValue::Kind::String)
      fail(fmt::format("dtype must be a string, got {}",
                       jsonKindName(value.kind)));
    std::optional<DType> dtype = parseDType(value.text);
    if (!dtype)
      fail(fmt::format("unsupported dtype {} (expected F64, F32, F16, BF16, "
                       "I64, I32, I16, I8, U8 or BOOL)",
                       quoteForMessage(value.text)));
    return *dtype;
  }

  std::vector<int64_t> parseShape(const JsonValue &value) const {
    if (value.kind != JsonValue::Kind::Array)
      fail(fmt::format("shape must be an array, got {}",
                       jsonKindName(value.kind)));
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (size_t i = 0; i < value.elements.size(); ++i) {
      const JsonValue &element = value.elements[i];
      std::optional<int64_t> dim = element.asInt64();
      if (!dim)
        fail(fmt::format("shape dimension {} must be an integer that fits in "
                         "64 bits, got {}",
                         i,
                         element.kind == JsonValue::Kind::Number
                             ? element.text
                             : jsonKindName(element.kind)));
      if (*dim < 0)
        fail(fmt::format("shape dimension {} is negative ({})", i, *dim));
      shape.push_back(*dim);
      if (*dim != 0 && numel > std::numeric_limits<int64_t>::max() / *dim)
        fail(fmt::format("shape {} has too many elements to count in 64 bits",
                         value.elements.size() == shape.size()
                             ? shapeText(shape)
                             : shapeText(shape) + "..."));
      numel *= *dim;
    }
    return shape;
  }

  void parseOffsets(const JsonValue &value, TensorInfo &info) const {
    if (value.kind != JsonValue::Kind::Array)
      fail(fmt::format("data_offsets must be an array [begin, end], got {}",
                       jsonKindName(value.kind)));
    if (value.elements.size() != 2)
      fail(fmt::format("data_offsets must have 2 elements [begin, end], got {}",
                       value.elements.size()));
    std::optional<uint64_t> begin = value.elements[0].asUInt64();
    std::optional<uint64_t> end = value.elements[1].asUInt64();
    if (!begin || !end)
      fail("data_offsets must be non-negative integers that fit in 64 bits");
    if (*end < *begin)
      fail(fmt::format("data_offsets [{}, {}] end before they begin", *begin,
                       *end));
    info.begin = *begin;
    info.end = *end;
  }

  void checkSize(const TensorInfo &info, uint64_t dataSize) const {
    if (info.end > dataSize)
      fail(fmt::format("data_offsets [{}, {}] run past the end of the data "
                       "section ({} bytes)",
                       info.begin, info.end, dataSize));
    uint64_t numel = static_cast<uint64_t>(info.numel());
    uint64_t elementSize = dtypeSize(info.dtype);
    uint64_t span = info.end - info.begin;
    // numel * elementSize may overflow, but then it exceeds any span.
    if (numel > span / elementSize || numel * elementSize != span)
      fail(fmt::format("data_offsets [{}, {}] span {} bytes but {} {} needs {} "
                       "elements of {} bytes",
                       info.begin, info.end, span, dtypeName(info.dtype),
                       shapeText(info.shape), numel, elementSize));
  }

  const std::string &path_;
  const std::string &name_;
};

std::map<std::string, std::string> parseMetadata(const std::string &path,
                                                 const JsonValue &value) {
  if (value.kind != JsonValue::Kind::Object)
    throw Error(path,
                fmt::format("__metadata__ must be an object of strings, got {}",
                            jsonKindName(value.kind)));
  std::map<std::string, std::string> metadata;
  for (const JsonMember &member : value.members) {
    if (member.value.kind != JsonValue::Kind::String)
      throw Error(
          path,
          fmt::format("__metadata__ value for {} must be a string, got {}",
                      quoteForMessage(member.key),
                      jsonKindName(member.value.kind)));
    if (!metadata.emplace(member.key, member.value.text).second)
      throw Error(path, fmt::format("__metadata__ key {} appears twice",
                                    quoteForMessage(member.key)));
  }
  return metadata;
}

// Tensors sorted by offset must tile the data section exactly, as the
// reference implementation requires: no overlap, no gap, nothing after.
void checkLayout(const std::string &path, const std::vector<TensorInfo> &sorted,
                 uint64_t dataSize) {
  uint64_t covered = 0;
  const TensorInfo *previous = nullptr;
  for (const TensorInfo &info : sorted) {
    if (info.begin < covered)
      throw Error(path, fmt::format("tensors {} and {} overlap",
                                    rangeText(*previous), rangeText(info)));
    if (info.begin > covered)
      throw Error(
          path,
          fmt::format("bytes [{}, {}) of the data section belong to no tensor",
                      covered, info.begin));
    covered = info.end;
    previous = &info;
  }
  if (covered != dataSize)
    throw Error(
        path,
        fmt::format(
            "bytes [{}, {}) at the end of the data section belong to no tensor",
            covered, dataSize));
}

} // namespace

SafetensorsFile SafetensorsFile::open(const std::string &path) {
  auto file = std::make_shared<detail::InputFile>(path);
  uint64_t fileSize = file->size();
  if (fileSize < 8)
    throw Error(
        path,
        fmt::format("file is {} bytes, too short for the 8-byte header length",
                    fileSize));
  unsigned char lengthBytes[8];
  file->readAt(0, lengthBytes, sizeof lengthBytes);
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i)
    headerLength = (headerLength << 8) | lengthBytes[i];
  if (headerLength > kMaxSafetensorsHeaderBytes)
    throw Error(path,
                fmt::format("header length {} exceeds the limit of {} bytes",
                            headerLength, kMaxSafetensorsHeaderBytes));
  if (headerLength > fileSize - 8)
    throw Error(
        path,
        fmt::format("header length {} runs past the end of the file ({} bytes)",
                    headerLength, fileSize));

  std::string header(static_cast<size_t>(headerLength), '\0');
  file->readAt(8, header.data(), header.size());
  JsonValue root;
  try {
    root = detail::parseJson(header);
  } catch (const detail::JsonParseError &error) {
    throw Error(
        path,
        fmt::format("header is not valid JSON (at byte {} of the header): {}",
                    error.offset(), error.reason()));
  }
  if (root.kind != JsonValue::Kind::Object)
    throw Error(path, fmt::format("header must be a JSON object, got {}",
                                  jsonKindName(root.kind)));

  SafetensorsFile result;
  result.path_ = path;
  result.dataStart_ = 8 + headerLength;
  uint64_t dataSize = fileSize - result.dataStart_;
  bool sawMetadata = false;
  for (const JsonMember &member : root.members) {
    if (member.key == "__metadata__") {
      if (sawMetadata)
        throw Error(path, "\"__metadata__\" appears twice in the header");
      sawMetadata = true;
      result.metadata_ = parseMetadata(path, member.value);
      continue;
    }
    if (!result.index_.emplace(member.key, result.tensors_.size()).second)
      throw Error(path, fmt::format("tensor {} appears twice in the header",
                                    quoteForMessage(member.key)));
    result.tensors_.push_back(
        EntryParser(path, member.key).parse(member.value, dataSize));
  }

  std::stable_sort(result.tensors_.begin(), result.tensors_.end(),
                   [](const TensorInfo &a, const TensorInfo &b) {
                     return a.begin != b.begin ? a.begin < b.begin
                                               : a.end < b.end;
                   });
  checkLayout(path, result.tensors_, dataSize);
  for (size_t i = 0; i < result.tensors_.size(); ++i)
    result.index_[result.tensors_[i].name] = i;
  result.file_ = std::move(file);
  return result;
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo &SafetensorsFile::require(std::string_view name) const {
  const TensorInfo *info = find(name);
  if (!info)
    throw Error(path_,
                fmt::format("no tensor named {}", quoteForMessage(name)));
  return *info;
}

std::vector<uint8_t> SafetensorsFile::readBytes(std::string_view name) const {
  const TensorInfo &info = require(name);
  std::vector<uint8_t> bytes(static_cast<size_t>(info.end - info.begin));
  file_->readAt(dataStart_ + info.begin, bytes.data(), bytes.size());
  return bytes;
}

std::shared_ptr<const detail::MappedRegion> SafetensorsFile::mapBytes(std::string_view name) const {
  const TensorInfo &info = require(name);
  return std::make_shared<const detail::MappedRegion>(*file_, dataStart_ + info.begin,
                                                      info.end - info.begin);
}

std::vector<float> SafetensorsFile::readF32(std::string_view name) const {
  const TensorInfo &info = require(name);
  if (info.dtype != DType::F32)
    throw Error(path_,
                fmt::format("tensor {} has dtype {}, not F32",
                            quoteForMessage(name), dtypeName(info.dtype)));
  std::vector<float> values(static_cast<size_t>(info.numel()));
  file_->readAt(dataStart_ + info.begin, values.data(),
                values.size() * sizeof(float));
  return values;
}

} // namespace stringrt
