// Element types of tensors in checkpoints and packages, named as safetensors
// names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace stringrt {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

// "F32", "BF16", "BOOL", ... (the safetensors spelling).
const char *dtypeName(DType dtype);

// Bytes per element.
size_t dtypeSize(DType dtype);

// The inverse of dtypeName; nullopt for any other string (matching is exact).
std::optional<DType> parseDType(std::string_view name);

} // namespace stringrt
