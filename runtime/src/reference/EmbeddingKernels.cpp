// Reference kernels: patch_embed, token_embed and their backward ops.
#include "stringrt/reference/LayerKernels.h"

#include "KernelChecks.h"
#include "LayerKernelUtil.h"

#include <vector>

namespace stringrt::ref {

using layer::Acc;
using layer::checkPatchEmbedGradShapes;
using layer::checkPatchEmbedShapes;
using layer::PatchGrid;

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
  const PatchGrid g = checkPatchEmbedShapes(image, w, bias, patch, y);
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
void patchEmbedGrad(TensorRef<const T> image, TensorRef<const T> dy, int64_t patch,
                    TensorRef<T> dw, TensorRef<T> db) {
  const PatchGrid g = checkPatchEmbedGradShapes(image, dy, patch, dw, db);
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

// y[b, t, :] = table[ids[b, t], :]
template <typename T>
void tokenEmbed(TensorRef<const int32_t> ids, TensorRef<const T> table, TensorRef<T> y) {
  checks::tokenEmbed(ids, table, y);
  const int64_t D = table.dim(1);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d)
      y.data[i * D + d] = table.data[ids.data[i] * D + d];
}

// dtable[v, :] = sum of the dy rows whose id is v
template <typename T>
void tokenEmbedGrad(TensorRef<const int32_t> ids, TensorRef<const T> dy, TensorRef<T> dtable) {
  checks::tokenEmbedGrad(ids, dy, dtable);
  const int64_t V = dtable.dim(0), D = dtable.dim(1);
  std::vector<Acc> acc(static_cast<size_t>(V * D), 0);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d)
      acc[ids.data[i] * D + d] += dy.data[i * D + d];
  for (int64_t j = 0; j < V * D; ++j)
    dtable.data[j] = static_cast<T>(acc[j]);
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void patchEmbed<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,    \
                              int64_t, TensorRef<T>);                                        \
  template void patchEmbedGrad<T>(TensorRef<const T>, TensorRef<const T>, int64_t,          \
                                  TensorRef<T>, TensorRef<T>);                               \
  template void tokenEmbed<T>(TensorRef<const int32_t>, TensorRef<const T>, TensorRef<T>);   \
  template void tokenEmbedGrad<T>(TensorRef<const int32_t>, TensorRef<const T>,              \
                                  TensorRef<T>);

STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
