// What pe.generator_exp and pe.commutator_norm (PEPositionOps.td) share:
// both take the K learned generators L_k as generators [K, d, d]. The first
// part of their shape contracts and the reference kernels' reading of the
// generators into double matrices, for each op file (GeneratorExp.cpp,
// CommutatorNorm.cpp).
// Private to the runtime.
#pragma once

#include "../../reference/PositionLinalg.h"

#include "stringrt/reference/Tensor.h"

#include <string>
#include <vector>

namespace stringrt::ops::generators {

using ref::TensorRef;

// The contract's first part: generators [K, d, d] with K, d >= 1. Returns d.
template <typename T> int64_t contract(const char *op, const TensorRef<const T> &g) {
  ref::checkRank((std::string(op) + ": 'generators'").c_str(), g, 3);
  const int64_t count = g.dim(0), d = g.dim(1);
  ref::check(count >= 1 && d >= 1 && g.dim(2) == d, op,
             "'generators' must be [K, d, d] with K, d >= 1, got " + ref::shapeToString(g.shape));
  return d;
}

// The generators (checked) as K double matrices.
template <typename T> std::vector<ref::linalg::Matrix> read(const TensorRef<const T> &g) {
  const int64_t count = g.dim(0), d = g.dim(1);
  std::vector<ref::linalg::Matrix> mats(static_cast<size_t>(count),
                                        ref::linalg::Matrix(static_cast<size_t>(d * d)));
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < d * d; ++i)
      mats[k][i] = g[k * d * d + i];
  return mats;
}

} // namespace stringrt::ops::generators
