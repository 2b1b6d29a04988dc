// Value-returning wrappers of the fused rope reference kernels
// (ops/fused/RopeTable.cpp, RopeApply.cpp) in double, for their tests
// (RopeTableTest.cpp, RopeApplyTest.cpp, RopeAttentionTest.cpp).
#pragma once

#include "stringrt/ops/FusedOps.h"
#include "stringrt/reference/Tensor.h"

namespace stringrt::ref::fusedtest {

using TD = Tensor<double>;

// pe.rope_table: [T, F, 2] (cos, sin) of positions [T, axes], freqs [F, axes].
inline TD ropeTableOf(const TD &pos, const TD &freqs) {
  TD table = TD::zeros({pos.shape[0], freqs.shape[0], 2});
  ropeTable<double>(pos.cref(), freqs.cref(), table.ref());
  return table;
}

// pe.rope_apply: x rotated by the table (by its inverse with `inverse`).
inline TD ropeApplyOf(const TD &x, const TD &table, bool inverse) {
  TD y = TD::zeros(x.shape);
  ropeApply<double>(x.cref(), table.cref(), inverse, y.ref());
  return y;
}

} // namespace stringrt::ref::fusedtest
