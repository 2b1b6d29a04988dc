// pe.pair_gather and its gradient pe.pair_gather_grad (PEGatherOps.td: the
// per-pair rows of a table of distinct offsets, y[i, j] = table[index[i*T +
// j]], as pe-distinct-offsets gathers them, and its scatter-add): the shape
// contract, the reference kernels (every kernel set runs them: a copy and
// a scatter-add have no fast variants) and the registration
// (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/GatherOps.h. stringc generates no CPU kernels for them.
#include "../OpLibrary.h"

#include "stringrt/ops/GatherOps.h"

#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::shapeToString;
using ref::TensorRef;

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

// pair_gather (table, pairs = y) and pair_gather_grad (table = dtable,
// pairs = dy): a table [U, S...] (rank >= 1), pairs [T, T, S...] and an
// 'index' of T*T entries in [0, U); returns T.
template <typename P, typename Q>
int64_t pairGatherContract(const char *what, const TensorRef<P> &table,
                           const TensorRef<Q> &pairs, const std::vector<int64_t> &index) {
  check(table.rank() >= 1, what, "the table must have rank >= 1");
  check(pairs.rank() == table.rank() + 1 && pairs.dim(0) == pairs.dim(1), what,
        "expected pairs [T, T, ...] for a table " + shapeToString(table.shape) + ", got " +
            shapeToString(pairs.shape));
  std::vector<int64_t> expected = {pairs.dim(0), pairs.dim(0)};
  expected.insert(expected.end(), table.shape.begin() + 1, table.shape.end());
  checkShape(what, pairs, expected);
  const int64_t tokens = pairs.dim(0);
  checkIndex(what, index, tokens, table.dim(0));
  return tokens;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: a copy, and its scatter-add summed in double
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

template <typename T>
void pairGather(TensorRef<const T> table, const std::vector<int64_t> &index, TensorRef<T> y) {
  const int64_t tokens = ops::pairGatherContract("pair_gather", table, y, index);
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
  const int64_t tokens = ops::pairGatherContract("pair_gather_grad", dtable, dy, index);
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

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runPairGather(const OpContext &c) {
  ref::pairGather<float>(c.in(0), c.op().getInts("index"), c.out(0));
}

void runPairGatherGrad(const OpContext &c) {
  ref::pairGatherGrad<float>(c.in(0), c.op().getInts("index"), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::PairGather>(OpRegistry &registry) {
  registry.add(OpCode::PairGather, {runPairGather});
  registry.add(OpCode::PairGatherGrad, {runPairGatherGrad});
}

} // namespace stringrt::ops
