// writeSafetensors: validating tensors, building the header, writing
// atomically.
#include "stringrt/Safetensors.h"

#include "format/AtomicFileWriter.h"
#include "format/Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <set>

static_assert(
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "safetensors data is little-endian and is written without byte swapping");

namespace stringrt {

using detail::appendJsonString;
using detail::quoteForMessage;

namespace {

// Byte size of a tensor view; throws for shapes that cannot be written.
uint64_t checkedByteSize(const std::string &path, const TensorView &view) {
  auto fail = [&](const std::string &what) {
    throw Error(path, fmt::format("cannot write tensor {}: {}",
                                  quoteForMessage(view.name), what));
  };
  uint64_t bytes = dtypeSize(view.dtype);
  for (size_t i = 0; i < view.shape.size(); ++i) {
    int64_t dim = view.shape[i];
    if (dim < 0)
      fail(fmt::format("shape dimension {} is negative ({})", i, dim));
    if (dim != 0 &&
        bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                    static_cast<uint64_t>(dim))
      fail("shape has too many elements");
    bytes *= static_cast<uint64_t>(dim);
  }
  if (bytes > 0 && !view.data)
    fail("data is null");
  return bytes;
}

// Position in the reference implementation's Dtype enum, whose descending
// order it writes tensors in; this puts larger element types first.
int referenceOrder(DType dtype) {
  switch (dtype) {
  case DType::Bool:
    return 0;
  case DType::U8:
    return 1;
  case DType::I8:
    return 2;
  case DType::I16:
    return 3;
  case DType::F16:
    return 4;
  case DType::BF16:
    return 5;
  case DType::I32:
    return 6;
  case DType::F32:
    return 7;
  case DType::F64:
    return 8;
  case DType::I64:
    return 9;
  }
  return 0;
}

void checkText(const std::string &path, std::string_view text,
               const char *what) {
  if (!detail::isValidUtf8(text))
    throw Error(path, fmt::format("cannot write {} {}: not valid UTF-8", what,
                                  quoteForMessage(text)));
}

} // namespace

void writeSafetensors(const std::string &path,
                      const std::vector<TensorView> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::vector<uint64_t> sizes;
  std::set<std::string_view> names;
  for (const TensorView &view : tensors) {
    checkText(path, view.name, "tensor name");
    if (view.name == "__metadata__")
      throw Error(
          path,
          "cannot write a tensor named \"__metadata__\": the name is reserved");
    if (!names.insert(view.name).second)
      throw Error(path, fmt::format("cannot write tensor {} twice",
                                    quoteForMessage(view.name)));
    sizes.push_back(checkedByteSize(path, view));
  }
  for (const auto &[key, value] : metadata) {
    checkText(path, key, "metadata key");
    checkText(path, value, "metadata value");
  }

  // The reference writer's order: by dtype, descending, then by name.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int rankA = referenceOrder(tensors[a].dtype),
        rankB = referenceOrder(tensors[b].dtype);
    return rankA != rankB ? rankA > rankB : tensors[a].name < tensors[b].name;
  });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      if (!first)
        header += ',';
      first = false;
      appendJsonString(header, key);
      header += ':';
      appendJsonString(header, value);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    const TensorView &view = tensors[i];
    if (sizes[i] > std::numeric_limits<uint64_t>::max() - offset)
      throw Error(
          path,
          "cannot write: the tensors' total size does not fit in 64 bits");
    if (header.size() > 1)
      header += ',';
    appendJsonString(header, view.name);
    header += fmt::format(
        ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
        dtypeName(view.dtype), fmt::join(view.shape, ","), offset,
        offset + sizes[i]);
    offset += sizes[i];
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxSafetensorsHeaderBytes)
    throw Error(path, fmt::format("cannot write: the header would be {} bytes, "
                                  "over the {}-byte limit",
                                  header.size(), kMaxSafetensorsHeaderBytes));

  unsigned char lengthBytes[8];
  for (int i = 0; i < 8; ++i)
    lengthBytes[i] = static_cast<unsigned char>(
        static_cast<uint64_t>(header.size()) >> (8 * i));

  detail::AtomicFileWriter writer(path);
  writer.write(lengthBytes, sizeof lengthBytes);
  writer.write(header.data(), header.size());
  for (size_t i : order)
    writer.write(tensors[i].data, static_cast<size_t>(sizes[i]));
  writer.commit();
}

} // namespace stringrt
