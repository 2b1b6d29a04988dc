// Private helpers shared by the layer reference kernels.
#pragma once

#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::ref::layer {

// Every sum accumulates in double; results are rounded once to T.
using Acc = double;

// Product of all dimensions but the last (the number of rows of [..., D]).
inline int64_t rowCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i)
    n *= shape[i];
  return n;
}

// `shape` with its last dimension replaced by `last`.
inline std::vector<int64_t> withLast(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// Whether `small` equals the trailing dimensions of `big`.
inline bool isTrailingSuffix(const std::vector<int64_t> &small,
                             const std::vector<int64_t> &big) {
  if (small.size() > big.size())
    return false;
  size_t offset = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i)
    if (small[i] != big[offset + i])
      return false;
  return true;
}

// Throws unless t has at least rank 1 (a last dimension to work on).
template <typename T> void checkHasLastDim(const char *what, const TensorRef<T> &t) {
  check(t.rank() >= 1, what, "expected rank >= 1, got a scalar");
}

} // namespace stringrt::ref::layer
