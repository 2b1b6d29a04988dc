// Private helpers shared by the layer reference kernels, and by the fast CPU
// kernels (through cpu/KernelUtil.h) where both must check their arguments
// the same way, with the same messages.
#pragma once

#include "stringrt/reference/LayerKernels.h"
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

// Product of shape[begin, end).
inline int64_t extent(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
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

// A dense layer's operands, x [..., I], w [I, O] and b? [O], checked with
// `op`'s name in the messages ("op: x", "op: w", "op: b"); returns O. The
// contracts of pe.linear and of the fused ops built on it share it.
template <typename T>
int64_t checkLinearOperands(const std::string &op, const TensorRef<const T> &x,
                            const TensorRef<const T> &w, const OptionalInput<T> &b) {
  const std::string xName = op + ": x", wName = op + ": w";
  checkHasLastDim(xName.c_str(), x);
  checkRank(wName.c_str(), w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape(xName.c_str(), x, withLast(x.shape, I));
  if (b)
    checkShape((op + ": b").c_str(), *b, {O});
  return O;
}

// Throws unless every id is in [0, V).
inline void checkIds(const char *kernel, const TensorRef<const int32_t> &ids, int64_t V) {
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    check(ids.data[i] >= 0 && ids.data[i] < V, kernel,
          "id " + std::to_string(ids.data[i]) + " at flat index " + std::to_string(i) +
              " is out of range [0, " + std::to_string(V) + ")");
}

// attention_grad's checks beyond the forward's: dy, dq, dk and dv of q's
// shape, drel given exactly when rel is, of rel's shape.
template <typename T>
void checkAttentionGradShapes(const TensorRef<const T> &q, const TensorRef<const T> &dy,
                              const OptionalInput<T> &rel, const TensorRef<T> &dq,
                              const TensorRef<T> &dk, const TensorRef<T> &dv,
                              const OptionalOutput<T> &drel) {
  checkShape("attention_grad: dy", dy, q.shape);
  checkShape("attention_grad: dq", dq, q.shape);
  checkShape("attention_grad: dk", dk, q.shape);
  checkShape("attention_grad: dv", dv, q.shape);
  check(rel.has_value() == drel.has_value(), "attention_grad",
        "drel must be given exactly when rel is");
  if (drel)
    checkShape("attention_grad: drel", *drel, rel->shape);
}

} // namespace stringrt::ref::layer
