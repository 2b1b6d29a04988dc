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

// An image [B, C, H, W] cut into p x p patches: `patches` per image in
// row-major grid order, each flattened (c, py, px) to K = C p p values.
struct PatchGrid {
  int64_t B, C, H, W, p, cols, patches, K;
};

template <typename T>
PatchGrid patchGrid(const char *kernel, const TensorRef<const T> &image, int64_t patch) {
  checkRank((std::string(kernel) + ": image").c_str(), image, 4);
  check(patch > 0, kernel, "patch must be > 0, got " + std::to_string(patch));
  PatchGrid g{image.dim(0), image.dim(1), image.dim(2), image.dim(3), patch, 0, 0, 0};
  check(g.H % patch == 0 && g.W % patch == 0, kernel,
        "patch " + std::to_string(patch) + " does not divide the image size " +
            std::to_string(g.H) + "x" + std::to_string(g.W));
  g.cols = g.W / patch;
  g.patches = (g.H / patch) * g.cols;
  g.K = g.C * patch * patch;
  return g;
}

// patch_embed's checks: the grid of `image`, w [K, D], bias [D], y [B, patches, D].
// Returns the grid; D is w's second dimension.
template <typename T>
PatchGrid checkPatchEmbedShapes(const TensorRef<const T> &image, const TensorRef<const T> &w,
                                const TensorRef<const T> &bias, int64_t patch,
                                const TensorRef<T> &y) {
  const PatchGrid g = patchGrid("patch_embed", image, patch);
  checkRank("patch_embed: w", w, 2);
  checkShape("patch_embed: w", w, {g.K, w.dim(1)});
  const int64_t D = w.dim(1);
  checkShape("patch_embed: b", bias, {D});
  checkShape("patch_embed: result", y, {g.B, g.patches, D});
  return g;
}

// patch_embed_grad's checks: dy [B, patches, D], dw [K, D], db [D].
template <typename T>
PatchGrid checkPatchEmbedGradShapes(const TensorRef<const T> &image, const TensorRef<const T> &dy,
                                    int64_t patch, const TensorRef<T> &dw,
                                    const TensorRef<T> &db) {
  const PatchGrid g = patchGrid("patch_embed_grad", image, patch);
  checkRank("patch_embed_grad: dy", dy, 3);
  const int64_t D = dy.dim(2);
  checkShape("patch_embed_grad: dy", dy, {g.B, g.patches, D});
  checkShape("patch_embed_grad: dw", dw, {g.K, D});
  checkShape("patch_embed_grad: db", db, {D});
  return g;
}

} // namespace stringrt::ref::layer
