// pe.patch_embed and its gradient pe.patch_embed_grad (PELayerOps.td: an
// image cut into p x p patches, each flattened and projected, a ViT's
// tokens): the shape contract, the reference and fast kernels and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/LayerOps.h.
#include "../OpLibrary.h"

#include "../../cpu/Gemm.h"
#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

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

// patch_embed: the grid of `image`, w [K, D], bias [D], y [B, patches, D].
// Returns the grid; D is w's second dimension.
template <typename T>
PatchGrid patchEmbedContract(const TensorRef<const T> &image, const TensorRef<const T> &w,
                             const TensorRef<const T> &bias, int64_t patch, const TensorRef<T> &y) {
  const PatchGrid g = patchGrid("patch_embed", image, patch);
  checkRank("patch_embed: w", w, 2);
  checkShape("patch_embed: w", w, {g.K, w.dim(1)});
  const int64_t D = w.dim(1);
  checkShape("patch_embed: b", bias, {D});
  checkShape("patch_embed: result", y, {g.B, g.patches, D});
  return g;
}

// patch_embed_grad: dy [B, patches, D], dw [K, D], db [D].
template <typename T>
PatchGrid patchEmbedGradContract(const TensorRef<const T> &image, const TensorRef<const T> &dy,
                                 int64_t patch, const TensorRef<T> &dw, const TensorRef<T> &db) {
  const PatchGrid g = patchGrid("patch_embed_grad", image, patch);
  checkRank("patch_embed_grad: dy", dy, 3);
  const int64_t D = dy.dim(2);
  checkShape("patch_embed_grad: dy", dy, {g.B, g.patches, D});
  checkShape("patch_embed_grad: dw", dw, {g.K, D});
  checkShape("patch_embed_grad: db", db, {D});
  return g;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;
using ops::PatchGrid;

namespace {

// v[(c p + py) p + px] = image[b, c, row p + py, col p + px] for patch n.
template <typename T>
void extractPatch(const TensorRef<const T> &image, const PatchGrid &g, int64_t b, int64_t n,
                  std::vector<Acc> &v) {
  const int64_t row = n / g.cols, col = n % g.cols;
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t py = 0; py < g.p; ++py)
      for (int64_t px = 0; px < g.p; ++px)
        v[(c * g.p + py) * g.p + px] =
            image.data[((b * g.C + c) * g.H + row * g.p + py) * g.W + col * g.p + px];
}

} // namespace

// y[b, n, d] = bias[d] + sum_k v(b, n)[k] w[k, d]
template <typename T>
void patchEmbed(TensorRef<const T> image, TensorRef<const T> w, TensorRef<const T> bias,
                int64_t patch, TensorRef<T> y) {
  const PatchGrid g = ops::patchEmbedContract(image, w, bias, patch, y);
  const int64_t D = w.dim(1);
  std::vector<Acc> v(static_cast<size_t>(g.K)), acc(static_cast<size_t>(D));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t n = 0; n < g.patches; ++n) {
      extractPatch(image, g, b, n, v);
      for (int64_t d = 0; d < D; ++d)
        acc[d] = bias.data[d];
      for (int64_t k = 0; k < g.K; ++k)
        for (int64_t d = 0; d < D; ++d)
          acc[d] += v[k] * Acc(w.data[k * D + d]);
      for (int64_t d = 0; d < D; ++d)
        y.data[(b * g.patches + n) * D + d] = static_cast<T>(acc[d]);
    }
}

// dw[k, d] = sum_{b,n} v(b, n)[k] dy[b, n, d],  db[d] = sum_{b,n} dy[b, n, d]
template <typename T>
void patchEmbedGrad(TensorRef<const T> image, TensorRef<const T> dy, int64_t patch, TensorRef<T> dw,
                    TensorRef<T> db) {
  const PatchGrid g = ops::patchEmbedGradContract(image, dy, patch, dw, db);
  const int64_t D = dy.dim(2);
  std::vector<Acc> v(static_cast<size_t>(g.K));
  std::vector<Acc> dwAcc(static_cast<size_t>(g.K * D), 0), dbAcc(static_cast<size_t>(D), 0);
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t n = 0; n < g.patches; ++n) {
      extractPatch(image, g, b, n, v);
      const T *dyRow = dy.data + (b * g.patches + n) * D;
      for (int64_t k = 0; k < g.K; ++k)
        for (int64_t d = 0; d < D; ++d)
          dwAcc[k * D + d] += v[k] * Acc(dyRow[d]);
      for (int64_t d = 0; d < D; ++d)
        dbAcc[d] += dyRow[d];
    }
  for (int64_t j = 0; j < g.K * D; ++j)
    dw.data[j] = static_cast<T>(dwAcc[j]);
  for (int64_t d = 0; d < D; ++d)
    db.data[d] = static_cast<T>(dbAcc[d]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void patchEmbed<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>, int64_t, \
                              TensorRef<T>);                                                       \
  template void patchEmbedGrad<T>(TensorRef<const T>, TensorRef<const T>, int64_t, TensorRef<T>,   \
                                  TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: the patches unfolded in parallel, then GEMMs (float sums)
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using ops::PatchGrid;
using util::rowGrain;

namespace {

// im2col: U [B patches, K], U[b patches + n, (c p + py) p + px] =
// image[b, c, row p + py, col p + px] (row = n / cols, col = n % cols). The
// embedding is then one GEMM with the [K, D] weight.
std::vector<float> unfoldPatches(const PatchGrid &g, const float *image) {
  std::vector<float> u(static_cast<size_t>(g.B * g.patches * g.K));
  parallelFor(0, g.B * g.patches, rowGrain(g.K), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.patches, n = r % g.patches;
      const int64_t row = n / g.cols, col = n % g.cols;
      float *out = u.data() + r * g.K;
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t py = 0; py < g.p; ++py) {
          const float *src = image + ((b * g.C + c) * g.H + row * g.p + py) * g.W + col * g.p;
          std::copy(src, src + g.p, out + (c * g.p + py) * g.p);
        }
    }
  });
  return u;
}

} // namespace

// y [B patches, D] = bias (per row), then += U w.
void patchEmbed(TensorRef<const float> image, TensorRef<const float> w, TensorRef<const float> bias,
                int64_t patch, TensorRef<float> y) {
  const PatchGrid g = ops::patchEmbedContract(image, w, bias, patch, y);
  const int64_t D = w.dim(1);
  const int64_t rows = g.B * g.patches;
  const std::vector<float> u = unfoldPatches(g, image.data);
  parallelFor(0, rows, rowGrain(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      std::copy(bias.data, bias.data + D, y.data + r * D);
  });
  gemm(Trans::No, Trans::No, rows, D, g.K, 1.0f, u.data(), g.K, w.data, D, 1.0f, y.data, D);
}

// dw [K, D] = U^T dy,  db = sum over the rows of dy.
void patchEmbedGrad(TensorRef<const float> image, TensorRef<const float> dy, int64_t patch,
                    TensorRef<float> dw, TensorRef<float> db) {
  const PatchGrid g = ops::patchEmbedGradContract(image, dy, patch, dw, db);
  const int64_t D = dy.dim(2);
  const int64_t rows = g.B * g.patches;
  const std::vector<float> u = unfoldPatches(g, image.data);
  gemm(Trans::Yes, Trans::No, g.K, D, rows, 1.0f, u.data(), g.K, dy.data, D, 0.0f, dw.data, D);
  util::columnSums(dy.data, rows, D, db.data);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runPatchEmbed(const OpContext &c) {
  ref::patchEmbed<float>(c.in(0), c.in(1), c.in(2), c.op().getInt("patch"), c.out(0));
}
void runFastPatchEmbed(const OpContext &c) {
  cpu::patchEmbed(c.in(0), c.in(1), c.in(2), c.op().getInt("patch"), c.out(0));
}

void runPatchEmbedGrad(const OpContext &c) {
  ref::patchEmbedGrad<float>(c.in(0), c.in(1), c.op().getInt("patch"), c.out(0), c.out(1));
}
void runFastPatchEmbedGrad(const OpContext &c) {
  cpu::patchEmbedGrad(c.in(0), c.in(1), c.op().getInt("patch"), c.out(0), c.out(1));
}

} // namespace

template <> void registerOps<OpCode::PatchEmbed>(OpRegistry &registry) {
  registry.add(OpCode::PatchEmbed, {runPatchEmbed, nullptr, runFastPatchEmbed});
  registry.add(OpCode::PatchEmbedGrad, {runPatchEmbedGrad, nullptr, runFastPatchEmbedGrad});
}

} // namespace stringrt::ops
