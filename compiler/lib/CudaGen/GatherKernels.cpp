//===- GatherKernels.cpp - skip-n shifts, offset tables, pair gathers -----===//
//
// Kernels and op lowerings of the gather family (the reference's
// GatherKernels.cpp; docs/cuda.md, "Index-table and generator kernels"), one
// thread per output element:
// - skip_gather / skip_gather_grad: head s of token t reads token t - shift
//   (t + shift for the gradient), shift = skip_base + s, zeros outside;
// - offset_table: the offsets as an f32 constant, copied by pe_broadcast_to
//   (exact: |offset| <= 2^24);
// - pair_gather: `index` (i32, T * T) as a constant buffer of the package
//   (LaunchArg::constant, uploaded once when the device model is created);
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

using namespace param_kinds;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

void appendSkipGatherKernels(std::vector<KernelDef> &defs) {
  // Head s of token t reads token t - shift (gather, direction -1) or
  // t + shift (its gradient, +1), shift = skip_base + s; zeros outside [0, T).
  for (int direction : {-1, 1}) {
    std::string name = direction < 0 ? "pe_skip_gather" : "pe_skip_gather_grad";
    llvm::StringRef op = direction < 0 ? pe::SkipGatherOp::getOperationName()
                                       : pe::SkipGatherGradOp::getOperationName();
    defs.push_back({makeSpec(name, op,
                             {{"y", P},
                              {"v", P},
                              {"n", I},
                              {"tokens", I},
                              {"d", I},
                              {"head_dim", I},
                              {"skip_base", I}}),
                    [direction](KernelBuilder &k) {
                      Value tokens = k.arg(3), d = k.arg(4), dh = k.arg(5);
                      Value skipBase = k.arg(6);
                      k.forGridStride(k.arg(2), [&](Value i) {
                        Value col = remU(k, i, d);
                        Value t = remU(k, divU(k, i, d), tokens);
                        Value shift = k.add(skipBase, divU(k, col, dh));
                        Value src = direction < 0 ? k.sub(t, shift) : k.add(t, shift);
                        Value inside = andI(k, cmpI(k, Pred::sge, src, k.i64(0)),
                                            cmpI(k, Pred::slt, src, tokens));
                        Value offset = k.mul(shift, d);
                        Value at = direction < 0 ? k.sub(i, offset) : k.add(i, offset);
                        // Outside, read element i itself (in bounds) and write 0.
                        Value v = k.load(k.arg(1), select(k, inside, at, i));
                        k.store(select(k, inside, v, k.f32(0.0)), k.arg(0), i);
                      });
                    }});
  }
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


template <typename SkipOp> std::optional<OpSteps> lowerSkip(Operation &op, const char *kernel) {
  auto skip = cast<SkipOp>(op);
  auto shape = batchShape(op.getOperand(0).getType());
  int64_t heads = int64_t(skip.getHeads());
  if (!shape || shape->size() != 3 || heads <= 0 || (*shape)[2] % heads)
    return std::nullopt;
  int64_t tokens = (*shape)[1], d = (*shape)[2];
  return singleLaunch(kernel,
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))), A::i64(tokens),
                       A::i64(d), A::i64(d / heads), A::i64(int64_t(skip.getSkipBase()))});
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

void appendGatherKernels(std::vector<KernelDef> &defs) {
  appendSkipGatherKernels(defs);
  appendPairGatherKernels(defs);
}

void appendGatherLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SkipGatherOp>([](Operation &op) {
                         return lowerSkip<pe::SkipGatherOp>(op, "pe_skip_gather");
                       }));
  lowerings.push_back(loweringOf<pe::SkipGatherGradOp>([](Operation &op) {
                         return lowerSkip<pe::SkipGatherGradOp>(op, "pe_skip_gather_grad");
                       }));
  lowerings.push_back(loweringOf<pe::OffsetTableOp>(lowerOffsetTable));
  lowerings.push_back(loweringOf<pe::PairGatherOp>(lowerPairGather));
  lowerings.push_back(loweringOf<pe::PairGatherGradOp>(lowerPairGatherGrad));
}

} // namespace stringc::cudagen
