//===- IndexTableKernels.cpp - ops whose index arrays are attributes ------===//
//
// Kernels and op lowerings of the ops that index with an array attribute
// (docs/cuda.md, "Index-table and generator kernels"): the array travels as a
// constant buffer of the package (LaunchArg::constant, uploaded once when the
// device model is created), in a form that makes every kernel one thread per
// output element with no search:
// - sparse_skew: `entry` (i32, dim * dim): 0 for a zero of S, m + 1 where
//   S holds params[m], -(m + 1) where it holds -params[m];
// - sparse_skew_grad: `pairs` (i32, 2K): the flat indices (i_m d + j_m,
//   j_m d + i_m) of support entry m;
// - offset_table: the offsets as an f32 constant, copied by pe_broadcast_to
//   (exact: |offset| <= 2^24);
// - pair_gather: `index` (i32, T * T) as the attribute;
// - pair_gather_grad: the inverse of `index` in compressed rows: `starts`
//   (i32, U + 1) and `pairs` (i32, T * T, the pairs reading row u in
//   increasing order at starts[u] .. starts[u + 1] - 1). One thread per
//   dtable element sums its pairs in that fixed order: no atomics, the same
//   bits on every run.
// Indices read from a constant are checked against the sizes the launch
// passes: an entry out of range (a corrupt package) gives NaN, never a read
// outside a buffer.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include <limits>

using namespace mlir;

namespace stringc::cudagen {
namespace {

const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

/// 0 <= v < limit (i64)
Value inRange(KernelBuilder &k, Value v, Value limit) {
  return andI(k, cmpI(k, Pred::sge, v, k.i64(0)), cmpI(k, Pred::slt, v, limit));
}

void appendSparseSkewKernels(std::vector<KernelDef> &defs) {
  // s[e] = sign(entry[e]) params[|entry[e]| - 1], 0 where entry[e] = 0.
  defs.push_back(
      {makeSpec("pe_sparse_skew", pe::SparseSkewOp::getOperationName(),
                {{"s", P}, {"params", P}, {"entry", P}, {"n", I}, {"params_count", I}}),
       [](KernelBuilder &k) {
         k.forGridStride(k.arg(3), [&](Value e) {
           Value entry = loadI32AsI64(k, k.arg(2), e);
           Value negative = cmpI(k, Pred::slt, entry, k.i64(0));
           Value m = k.sub(select(k, negative, k.sub(k.i64(0), entry), entry), k.i64(1));
           Value valid = inRange(k, m, k.arg(4));
           Value p = k.load(k.arg(1), select(k, valid, m, k.i64(0)));
           Value value = select(k, negative, k.sub(k.f32(0.0), p), p);
           Value zero = cmpI(k, Pred::eq, entry, k.i64(0));
           k.store(select(k, zero, k.f32(0.0), select(k, valid, value, nanF32(k))), k.arg(0), e);
         });
       }});
  // dparams[m] = dy[pairs[2m]] - dy[pairs[2m + 1]].
  defs.push_back(
      {makeSpec("pe_sparse_skew_grad", pe::SparseSkewGradOp::getOperationName(),
                {{"dparams", P}, {"dy", P}, {"pairs", P}, {"n", I}, {"dy_count", I}}),
       [](KernelBuilder &k) {
         k.forGridStride(k.arg(3), [&](Value m) {
           Value upper = loadI32AsI64(k, k.arg(2), k.mul(m, k.i64(2)));
           Value lower = loadI32AsI64(k, k.arg(2), k.add(k.mul(m, k.i64(2)), k.i64(1)));
           Value valid = andI(k, inRange(k, upper, k.arg(4)), inRange(k, lower, k.arg(4)));
           Value a = k.load(k.arg(1), select(k, valid, upper, k.i64(0)));
           Value b = k.load(k.arg(1), select(k, valid, lower, k.i64(0)));
           k.store(select(k, valid, k.sub(a, b), nanF32(k)), k.arg(0), m);
         });
       }});
}

void appendPairGatherKernels(std::vector<KernelDef> &defs) {
  // y[p * row + s] = table[index[p] * row + s]
  defs.push_back({makeSpec("pe_pair_gather", pe::PairGatherOp::getOperationName(),
                           {{"y", P}, {"table", P}, {"index", P}, {"n", I}, {"row", I},
                            {"table_rows", I}}),
                  [](KernelBuilder &k) {
                    Value row = k.arg(4);
                    k.forGridStride(k.arg(3), [&](Value e) {
                      Value p = divU(k, e, row), s = remU(k, e, row);
                      Value u = loadI32AsI64(k, k.arg(2), p);
                      Value valid = inRange(k, u, k.arg(5));
                      Value at = select(k, valid, k.add(k.mul(u, row), s), k.i64(0));
                      Value v = k.load(k.arg(1), at);
                      k.store(select(k, valid, v, nanF32(k)), k.arg(0), e);
                    });
                  }});
  // dtable[u * row + s] = sum_{q in [starts[u], starts[u + 1])} dy[pairs[q] * row + s]
  defs.push_back(
      {makeSpec("pe_pair_gather_grad", pe::PairGatherGradOp::getOperationName(),
                {{"dtable", P}, {"dy", P}, {"starts", P}, {"pairs", P}, {"n", I}, {"row", I},
                 {"pair_count", I}}),
       [](KernelBuilder &k) {
         Value row = k.arg(5), pairCount = k.arg(6);
         k.forGridStride(k.arg(4), [&](Value e) {
           Value u = divU(k, e, row), s = remU(k, e, row);
           // Clamped to the pairs array: a corrupt `starts` cannot make a
           // thread read past it.
           Value begin = minI(k, loadI32AsI64(k, k.arg(2), u), pairCount);
           Value end = minI(k, loadI32AsI64(k, k.arg(2), k.add(u, k.i64(1))), pairCount);
           begin = select(k, cmpI(k, Pred::slt, begin, k.i64(0)), k.i64(0), begin);
           ValueRange sum = k.forLoop(begin, end, k.i64(1), {k.f32(0.0)}, [&](Value q, ValueRange acc) {
             Value p = loadI32AsI64(k, k.arg(3), q);
             Value valid = inRange(k, p, pairCount);
             Value v = k.load(k.arg(1), select(k, valid, k.add(k.mul(p, row), s), k.i64(0)));
             return SmallVector<Value>{k.add(acc[0], select(k, valid, v, nanF32(k)))};
           });
           k.store(sum[0], k.arg(0), e);
         });
       }});
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();

/// The static shape of `v`, or nullopt when a dimension is dynamic.
std::optional<std::vector<int64_t>> staticShape(Value v) {
  auto shape = batchShape(v.getType());
  if (!shape || llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return std::nullopt;
  return shape;
}

/// The (i, j) pair of upper-triangle index `k` of a dim x dim matrix, in the
/// order of pe.skew: (0, 1), (0, 2), ..., (1, 2), ...; nullopt out of range.
std::optional<std::pair<int64_t, int64_t>> upperPair(int64_t dim, int64_t k) {
  if (k < 0)
    return std::nullopt;
  for (int64_t i = 0; i + 1 < dim; ++i) {
    int64_t length = dim - 1 - i;
    if (k < length)
      return std::make_pair(i, i + 1 + k);
    k -= length;
  }
  return std::nullopt;
}

/// Checks sparse_skew's shapes and support (params [K], s [dim, dim]) and
/// returns the pairs of the support; nullopt when the op is not served.
std::optional<std::vector<std::pair<int64_t, int64_t>>>
supportPairs(int64_t dim, ArrayRef<int64_t> support, Value params, Value matrix) {
  auto p = staticShape(params), s = staticShape(matrix);
  if (dim < 2 || dim * dim > kMaxI32 || support.empty() || int64_t(support.size()) >= kMaxI32 ||
      !p || *p != std::vector<int64_t>{int64_t(support.size())} || !s ||
      *s != std::vector<int64_t>{dim, dim})
    return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t k : support) {
    auto pair = upperPair(dim, k);
    if (!pair)
      return std::nullopt;
    pairs.push_back(*pair);
  }
  return pairs;
}

std::optional<OpSteps> lowerSparseSkew(Operation &op) {
  auto skew = cast<pe::SparseSkewOp>(op);
  int64_t dim = int64_t(skew.getDim());
  auto pairs = supportPairs(dim, skew.getSupport(), skew.getParams(), skew.getResult());
  if (!pairs)
    return std::nullopt;
  std::vector<int32_t> entry(size_t(dim * dim), 0);
  for (size_t m = 0; m < pairs->size(); ++m) {
    auto [i, j] = (*pairs)[m];
    entry[size_t(i * dim + j)] = int32_t(m + 1);
    entry[size_t(j * dim + i)] = -int32_t(m + 1);
  }
  OpSteps steps;
  steps.constants.push_back(ConstantArray::ints(std::move(entry)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_sparse_skew", {A::result(0), A::operand(0), A::constant(0), A::i64(dim * dim),
                         A::i64(int64_t(pairs->size()))}));
  return steps;
}

std::optional<OpSteps> lowerSparseSkewGrad(Operation &op) {
  auto grad = cast<pe::SparseSkewGradOp>(op);
  int64_t dim = int64_t(grad.getDim());
  auto pairs = supportPairs(dim, grad.getSupport(), grad.getDparams(), grad.getDy());
  if (!pairs)
    return std::nullopt;
  std::vector<int32_t> flat;
  for (auto [i, j] : *pairs) {
    flat.push_back(int32_t(i * dim + j));
    flat.push_back(int32_t(j * dim + i));
  }
  OpSteps steps;
  steps.constants.push_back(ConstantArray::ints(std::move(flat)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_sparse_skew_grad", {A::result(0), A::operand(0), A::constant(0),
                              A::i64(int64_t(pairs->size())), A::i64(dim * dim)}));
  return steps;
}

std::optional<OpSteps> lowerOffsetTable(Operation &op) {
  auto table = cast<pe::OffsetTableOp>(op);
  auto shape = staticShape(table.getResult());
  ArrayRef<int64_t> offsets = table.getOffsets();
  constexpr int64_t kExact = int64_t(1) << 24; // integers f32 holds exactly
  if (!shape || shape->size() != 2 || offsets.empty() ||
      int64_t(offsets.size()) != (*shape)[0] * (*shape)[1])
    return std::nullopt;
  std::vector<float> values;
  for (int64_t offset : offsets) {
    if (offset < -kExact || offset > kExact)
      return std::nullopt;
    values.push_back(float(offset));
  }
  int64_t n = int64_t(values.size());
  OpSteps steps;
  steps.constants.push_back(ConstantArray::floats(std::move(values)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_broadcast_to", {A::result(0), A::constant(0), A::i64(n), A::i64(n)}));
  return steps;
}

/// The geometry of a pair gather between a table [U, S...] and the pairs
/// [T, T, S...], with `index` checked (T * T entries in [0, U)).
struct PairGeometry {
  int64_t tokens = 0, rows = 0, row = 0;
};
std::optional<PairGeometry> pairGeometry(Value table, Value pairs, ArrayRef<int64_t> index) {
  auto t = staticShape(table), p = staticShape(pairs);
  if (!t || !p || t->empty() || p->size() != t->size() + 1 || (*p)[0] != (*p)[1])
    return std::nullopt;
  for (size_t d = 1; d < t->size(); ++d)
    if ((*t)[d] != (*p)[d + 1])
      return std::nullopt;
  PairGeometry g;
  g.tokens = (*p)[0];
  g.rows = (*t)[0];
  g.row = *staticProduct(*t, 1, t->size());
  if (g.tokens < 1 || g.rows < 1 || g.row < 1 || g.tokens * g.tokens > kMaxI32 ||
      int64_t(index.size()) != g.tokens * g.tokens)
    return std::nullopt;
  for (int64_t u : index)
    if (u < 0 || u >= g.rows)
      return std::nullopt;
  return g;
}

std::optional<OpSteps> lowerPairGather(Operation &op) {
  auto gather = cast<pe::PairGatherOp>(op);
  auto g = pairGeometry(gather.getTable(), gather.getResult(), gather.getIndex());
  if (!g)
    return std::nullopt;
  OpSteps steps;
  steps.constants.push_back(ConstantArray::ints(
      std::vector<int32_t>(gather.getIndex().begin(), gather.getIndex().end())));
  steps.launches.push_back(Launch::kernelCall(
      "pe_pair_gather", {A::result(0), A::operand(0), A::constant(0),
                         A::i64(g->tokens * g->tokens * g->row), A::i64(g->row),
                         A::i64(g->rows)}));
  return steps;
}

std::optional<OpSteps> lowerPairGatherGrad(Operation &op) {
  auto grad = cast<pe::PairGatherGradOp>(op);
  ArrayRef<int64_t> index = grad.getIndex();
  auto g = pairGeometry(grad.getDtable(), grad.getDy(), index);
  if (!g)
    return std::nullopt;
  // starts[u] = number of pairs reading rows before u; pairs grouped by row,
  // each group in increasing pair order (a stable counting sort).
  std::vector<int32_t> starts(size_t(g->rows + 1), 0), pairs(index.size());
  for (int64_t u : index)
    ++starts[size_t(u + 1)];
  for (size_t u = 1; u < starts.size(); ++u)
    starts[u] += starts[u - 1];
  std::vector<int32_t> next(starts.begin(), starts.end() - 1);
  for (size_t p = 0; p < index.size(); ++p)
    pairs[size_t(next[size_t(index[p])]++)] = int32_t(p);
  int64_t pairCount = int64_t(index.size());
  OpSteps steps;
  steps.constants.push_back(ConstantArray::ints(std::move(starts)));
  steps.constants.push_back(ConstantArray::ints(std::move(pairs)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_pair_gather_grad", {A::result(0), A::operand(0), A::constant(0), A::constant(1),
                              A::i64(g->rows * g->row), A::i64(g->row), A::i64(pairCount)}));
  return steps;
}

} // namespace

void appendIndexTableKernels(std::vector<KernelDef> &defs) {
  appendSparseSkewKernels(defs);
  appendPairGatherKernels(defs);
}

void appendIndexTableLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SparseSkewOp>(lowerSparseSkew));
  lowerings.push_back(loweringOf<pe::SparseSkewGradOp>(lowerSparseSkewGrad));
  lowerings.push_back(loweringOf<pe::OffsetTableOp>(lowerOffsetTable));
  lowerings.push_back(loweringOf<pe::PairGatherOp>(lowerPairGather));
  lowerings.push_back(loweringOf<pe::PairGatherGradOp>(lowerPairGatherGrad));
}

} // namespace stringc::cudagen
