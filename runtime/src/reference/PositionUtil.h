// Private helpers shared by the positional-encoding kernels (the op
// library's ops/position/, and ops/fused/RopeApply.cpp).
#pragma once

#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::ref::position {

// Product of the dimensions of `shape` in front of its last `trailing` ones.
inline int64_t leadingCount(const std::vector<int64_t> &shape, size_t trailing) {
  int64_t n = 1;
  for (size_t i = 0; i + trailing < shape.size(); ++i)
    n *= shape[i];
  return n;
}

// `shape` without its last `trailing` dimensions.
inline std::vector<int64_t> leadingShape(const std::vector<int64_t> &shape, size_t trailing) {
  return std::vector<int64_t>(shape.begin(), shape.end() - static_cast<ptrdiff_t>(trailing));
}

// `lead` followed by `tail`.
inline std::vector<int64_t> concat(std::vector<int64_t> lead, const std::vector<int64_t> &tail) {
  lead.insert(lead.end(), tail.begin(), tail.end());
  return lead;
}

// Whether `small` equals the trailing dimensions of `big`.
inline bool isTrailingSuffix(const std::vector<int64_t> &small, const std::vector<int64_t> &big) {
  if (small.size() > big.size())
    return false;
  size_t offset = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i)
    if (small[i] != big[offset + i])
      return false;
  return true;
}

// The upper-triangle pairs (i, j), i < j, of a dim x dim matrix in row-major
// order: pair k is parameter k of pe.skew.
inline std::vector<std::pair<int64_t, int64_t>> upperPairs(int64_t dim) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < dim; ++i)
    for (int64_t j = i + 1; j < dim; ++j)
      pairs.emplace_back(i, j);
  return pairs;
}

// Throws unless a skew builder's `dim` is >= 2 (`what`: the op).
inline void checkSkewDim(const char *what, int64_t dim) {
  check(dim >= 2, what, "'dim' must be >= 2, got " + std::to_string(dim));
}

// Throws unless `support` is non-empty, strictly increasing and inside
// [0, dim(dim-1)/2).
inline void checkSupport(const char *what, int64_t dim, const std::vector<int64_t> &support) {
  const int64_t count = dim * (dim - 1) / 2;
  check(!support.empty(), what, "'support' must not be empty");
  for (size_t m = 0; m < support.size(); ++m) {
    check(support[m] >= 0 && support[m] < count, what,
          "'support' index " + std::to_string(support[m]) + " is outside [0, " +
              std::to_string(count) + ")");
    check(m == 0 || support[m] > support[m - 1], what,
          "'support' must be strictly increasing");
  }
}

} // namespace stringrt::ref::position
