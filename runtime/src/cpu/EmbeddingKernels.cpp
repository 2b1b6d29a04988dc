// Fast token embedding and its backward op.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <algorithm>
#include <vector>

namespace stringrt::cpu {

using namespace util;

void tokenEmbed(TensorRef<const int32_t> ids, TensorRef<const float> table, TensorRef<float> y) {
  checkRank("token_embed: ids", ids, 2);
  checkRank("token_embed: table", table, 2);
  const int64_t V = table.dim(0), D = table.dim(1);
  checkShape("token_embed: result", y, {ids.dim(0), ids.dim(1), D});
  checkIds("token_embed", ids, V);
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
  checkRank("token_embed_grad: ids", ids, 2);
  checkRank("token_embed_grad: dtable", dtable, 2);
  const int64_t V = dtable.dim(0), D = dtable.dim(1);
  checkShape("token_embed_grad: dy", dy, {ids.dim(0), ids.dim(1), D});
  checkIds("token_embed_grad", ids, V);
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
