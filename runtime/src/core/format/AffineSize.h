// A program value's element count as a function of the batch size: shapes
// hold at most one kBatchDim, so the count is perBatch * B or fixed. Private
// to the runtime (the arena plan's and the compiled kernels' checks).
#pragma once

#include "stringrt/Manifest.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace stringrt::detail {

// {per batch, fixed}: {product of the other dimensions, 0} for a batched
// shape, {0, product} for a static one.
inline std::pair<int64_t, int64_t> affineSize(const std::vector<int64_t> &shape) {
  int64_t product = 1;
  bool batched = false;
  for (int64_t d : shape) {
    if (d == kBatchDim)
      batched = true;
    else
      product *= d;
  }
  return batched ? std::make_pair(product, int64_t(0)) : std::make_pair(int64_t(0), product);
}

} // namespace stringrt::detail
