#include "stringrt/DType.h"

#include "stringrt/Error.h"

#include <string>

namespace stringrt {

namespace {
struct DTypeEntry {
  DType dtype;
  const char *name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8},   {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::Bool, "BOOL", 1},
};

const DTypeEntry &entryOf(DType dtype) {
  for (const DTypeEntry &entry : kDTypes)
    if (entry.dtype == dtype)
      return entry;
  // Only reachable by casting an out-of-range integer to DType.
  throw Error("invalid DType value " + std::to_string(static_cast<int>(dtype)));
}
} // namespace

const char *dtypeName(DType dtype) { return entryOf(dtype).name; }

size_t dtypeSize(DType dtype) { return entryOf(dtype).size; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeEntry &entry : kDTypes)
    if (name == entry.name)
      return entry.dtype;
  return std::nullopt;
}

} // namespace stringrt
