// The sizes a package may declare (docs/package.md, "Limits"): the runtime's
// manifest loader refuses anything larger, and stringc refuses a model that
// would need it (at the .pe line that declares it), so the compiler never
// writes a package the runtime will not load. With these bounds nothing sized
// from a manifest overflows 64-bit arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stringrt {

// Dimensions of any shape.
constexpr size_t kMaxRank = 8;
// Any one dimension.
constexpr int64_t kMaxDim = int64_t(1) << 31;
// All parameters together (they are allocated from the manifest alone).
constexpr int64_t kMaxParamElements = int64_t(1) << 32;
// Any value's elements per example (its shape with the batch dimension as
// 1): times a batch of at most 2^31, every size fits an int64_t.
constexpr int64_t kMaxExampleElements = int64_t(1) << 32;

} // namespace stringrt
