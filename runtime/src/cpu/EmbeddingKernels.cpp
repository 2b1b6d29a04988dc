// Fast patch and token embeddings and their backward ops.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "KernelUtil.h"

#include <algorithm>
#include <vector>

namespace stringrt::cpu {

using namespace util;
using ref::layer::checkPatchEmbedGradShapes;
using ref::layer::checkPatchEmbedShapes;
using ref::layer::PatchGrid;

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
void patchEmbed(TensorRef<const float> image, TensorRef<const float> w,
                TensorRef<const float> bias, int64_t patch, TensorRef<float> y) {
  const PatchGrid g = checkPatchEmbedShapes(image, w, bias, patch, y);
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
  const PatchGrid g = checkPatchEmbedGradShapes(image, dy, patch, dw, db);
  const int64_t D = dy.dim(2);
  const int64_t rows = g.B * g.patches;
  const std::vector<float> u = unfoldPatches(g, image.data);
  gemm(Trans::Yes, Trans::No, g.K, D, rows, 1.0f, u.data(), g.K, dy.data, D, 0.0f, dw.data, D);
  columnSums(dy.data, rows, D, db.data);
}

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
