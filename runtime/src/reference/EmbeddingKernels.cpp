// Reference kernels: token_embed and its backward op.
#include "stringrt/reference/LayerKernels.h"

#include "KernelChecks.h"
#include "LayerKernelUtil.h"

#include <vector>

namespace stringrt::ref {

using layer::Acc;

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
  template void tokenEmbed<T>(TensorRef<const int32_t>, TensorRef<const T>, TensorRef<T>);   \
  template void tokenEmbedGrad<T>(TensorRef<const int32_t>, TensorRef<const T>,              \
                                  TensorRef<T>);

STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
