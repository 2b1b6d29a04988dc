// Reference kernels of the gather ops (GatherKernels.h): the pair gather
// and its scatter-add (skip_gather and offset_table are in the op library,
// ops/gather/).
#include "stringrt/reference/GatherKernels.h"

#include <string>

namespace stringrt::ref {
namespace {

// T*T entries, each in [0, rows).
void checkIndex(const char *what, const std::vector<int64_t> &index, int64_t tokens,
                int64_t rows) {
  check(static_cast<int64_t>(index.size()) == tokens * tokens, what,
        "'index' must have T*T = " + std::to_string(tokens * tokens) + " entries, got " +
            std::to_string(index.size()));
  for (int64_t u : index)
    check(u >= 0 && u < rows, what,
          "'index' entry " + std::to_string(u) + " out of range [0, " + std::to_string(rows) +
              ")");
}

// The pair shape [T, T, S...] of a table [U, S...] (T from `pairs`), checked.
template <typename P, typename Q>
int64_t checkPairs(const char *what, const TensorRef<P> &table, const TensorRef<Q> &pairs) {
  check(table.rank() >= 1, what, "the table must have rank >= 1");
  check(pairs.rank() == table.rank() + 1 && pairs.dim(0) == pairs.dim(1), what,
        "expected pairs [T, T, ...] for a table " + shapeToString(table.shape) + ", got " +
            shapeToString(pairs.shape));
  std::vector<int64_t> expected = {pairs.dim(0), pairs.dim(0)};
  expected.insert(expected.end(), table.shape.begin() + 1, table.shape.end());
  checkShape(what, pairs, expected);
  return pairs.dim(0);
}

} // namespace

template <typename T>
void pairGather(TensorRef<const T> table, const std::vector<int64_t> &index, TensorRef<T> y) {
  const char *what = "pair_gather";
  const int64_t tokens = checkPairs(what, table, y);
  checkIndex(what, index, tokens, table.dim(0));
  const int64_t row = table.numel() / table.dim(0);
  for (int64_t p = 0; p < tokens * tokens; ++p) {
    const T *in = table.data + index[static_cast<size_t>(p)] * row;
    T *out = y.data + p * row;
    for (int64_t s = 0; s < row; ++s)
      out[s] = in[s];
  }
}

template <typename T>
void pairGatherGrad(TensorRef<const T> dy, const std::vector<int64_t> &index,
                    TensorRef<T> dtable) {
  const char *what = "pair_gather_grad";
  const int64_t tokens = checkPairs(what, dtable, dy);
  checkIndex(what, index, tokens, dtable.dim(0));
  const int64_t row = dtable.numel() / dtable.dim(0);
  std::vector<double> sum(static_cast<size_t>(dtable.numel()), 0.0);
  for (int64_t p = 0; p < tokens * tokens; ++p) {
    double *acc = sum.data() + index[static_cast<size_t>(p)] * row;
    const T *in = dy.data + p * row;
    for (int64_t s = 0; s < row; ++s)
      acc[s] += static_cast<double>(in[s]);
  }
  for (int64_t e = 0; e < dtable.numel(); ++e)
    dtable[e] = static_cast<T>(sum[static_cast<size_t>(e)]);
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void pairGather<T>(TensorRef<const T>, const std::vector<int64_t> &, TensorRef<T>); \
  template void pairGatherGrad<T>(TensorRef<const T>, const std::vector<int64_t> &,          \
                                  TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
