// pe.token_embed and its gradient pe.token_embed_grad (PELayerOps.td: rows
// of an embedding table gathered by token id, a GPT's tokens; the gradient
// sums dy's rows into the table rows of their ids): the shape contract, the
// reference and fast kernels and the registration (ops/OpLibrary.h). The
// kernels' declarations are in stringrt/ops/LayerOps.h; stringc's
// generated kernels of these ops are CpuGen/TokenGen.cpp's, checked here
// (ids included) before they run.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

// token_embed: ids [B, T] in [0, V) of table [V, D]; the result [B, T, D].
template <typename T>
void tokenEmbedContract(const TensorRef<const int32_t> &ids, const TensorRef<const T> &table,
                        const TensorRef<T> &y) {
  checkRank("token_embed: ids", ids, 2);
  checkRank("token_embed: table", table, 2);
  checkShape("token_embed: result", y, {ids.dim(0), ids.dim(1), table.dim(1)});
  ref::layer::checkIds("token_embed", ids, table.dim(0));
}

// token_embed_grad: ids [B, T] in [0, V) of dtable [V, D]; dy [B, T, D].
template <typename T>
void tokenEmbedGradContract(const TensorRef<const int32_t> &ids, const TensorRef<const T> &dy,
                            const TensorRef<T> &dtable) {
  checkRank("token_embed_grad: ids", ids, 2);
  checkRank("token_embed_grad: dtable", dtable, 2);
  checkShape("token_embed_grad: dy", dy, {ids.dim(0), ids.dim(1), dtable.dim(1)});
  ref::layer::checkIds("token_embed_grad", ids, dtable.dim(0));
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

// y[b, t, :] = table[ids[b, t], :]
template <typename T>
void tokenEmbed(TensorRef<const int32_t> ids, TensorRef<const T> table, TensorRef<T> y) {
  ops::tokenEmbedContract(ids, table, y);
  const int64_t D = table.dim(1);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d)
      y.data[i * D + d] = table.data[ids.data[i] * D + d];
}

// dtable[v, :] = sum of the dy rows whose id is v
template <typename T>
void tokenEmbedGrad(TensorRef<const int32_t> ids, TensorRef<const T> dy, TensorRef<T> dtable) {
  ops::tokenEmbedGradContract(ids, dy, dtable);
  const int64_t V = dtable.dim(0), D = dtable.dim(1);
  std::vector<Acc> acc(static_cast<size_t>(V * D), 0);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d)
      acc[ids.data[i] * D + d] += dy.data[i * D + d];
  for (int64_t j = 0; j < V * D; ++j)
    dtable.data[j] = static_cast<T>(acc[j]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void tokenEmbed<T>(TensorRef<const int32_t>, TensorRef<const T>, TensorRef<T>);         \
  template void tokenEmbedGrad<T>(TensorRef<const int32_t>, TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: rows in parallel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::rowGrain;

void tokenEmbed(TensorRef<const int32_t> ids, TensorRef<const float> table, TensorRef<float> y) {
  ops::tokenEmbedContract(ids, table, y);
  const int64_t D = table.dim(1);
  parallelFor(0, ids.numel(), rowGrain(D), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float *src = table.data + static_cast<int64_t>(ids.data[i]) * D;
      std::copy(src, src + D, y.data + i * D);
    }
  });
}

// A scatter-add written as a gather: a counting sort buckets the positions
// by id (each bucket in position order), then each table row sums its own
// bucket. Rows are independent - parallel with no atomics - and each sums in
// a fixed order.
void tokenEmbedGrad(TensorRef<const int32_t> ids, TensorRef<const float> dy,
                    TensorRef<float> dtable) {
  ops::tokenEmbedGradContract(ids, dy, dtable);
  const int64_t V = dtable.dim(0), D = dtable.dim(1);
  const int64_t n = ids.numel();

  // Bucket v is positions[start[v] .. start[v + 1]).
  std::vector<int64_t> start(static_cast<size_t>(V + 1), 0), positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ++start[ids.data[i] + 1];
  for (int64_t v = 0; v < V; ++v)
    start[v + 1] += start[v];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i)
    positions[fill[ids.data[i]]++] = i;

  parallelFor(0, V, rowGrain(D), [&](int64_t v0, int64_t v1) {
    std::vector<double> acc(static_cast<size_t>(D));
    for (int64_t v = v0; v < v1; ++v) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t at = start[v]; at < start[v + 1]; ++at) {
        const float *row = dy.data + positions[at] * D;
        for (int64_t d = 0; d < D; ++d)
          acc[d] += row[d];
      }
      float *out = dtable.data + v * D;
      for (int64_t d = 0; d < D; ++d)
        out[d] = static_cast<float>(acc[d]);
    }
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runTokenEmbed(const OpContext &c) { ref::tokenEmbed<float>(c.inI32(0), c.in(1), c.out(0)); }
void checkTokenEmbed(const OpContext &c) {
  tokenEmbedContract<float>(c.inI32(0), c.in(1), c.out(0));
}
void runFastTokenEmbed(const OpContext &c) { cpu::tokenEmbed(c.inI32(0), c.in(1), c.out(0)); }

void runTokenEmbedGrad(const OpContext &c) {
  ref::tokenEmbedGrad<float>(c.inI32(0), c.in(1), c.out(0));
}
void checkTokenEmbedGrad(const OpContext &c) {
  tokenEmbedGradContract<float>(c.inI32(0), c.in(1), c.out(0));
}
void runFastTokenEmbedGrad(const OpContext &c) {
  cpu::tokenEmbedGrad(c.inI32(0), c.in(1), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::TokenEmbed>(OpRegistry &registry) {
  registry.add(OpCode::TokenEmbed, {runTokenEmbed, checkTokenEmbed, runFastTokenEmbed});
  registry.add(OpCode::TokenEmbedGrad,
               {runTokenEmbedGrad, checkTokenEmbedGrad, runFastTokenEmbedGrad});
}

} // namespace stringrt::ops
