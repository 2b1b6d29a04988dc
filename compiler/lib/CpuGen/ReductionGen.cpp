//===- ReductionGen.cpp - sum_to kernels ----------------------------------===//
//
// pe.sum_to sums x [L..., S...] over its leading dimensions L into the
// trailing shape S (the adjoint of broadcasting: bias and residual
// gradients). x is seen as [d0, m, n] (n = |S|, m the product of the other
// leading dimensions), the result as [n]. The parallel loop runs over the n
// columns; each column is summed over the rows (i, q) in row order in
// double and rounded once - the reference's order and precision, so the
// result is the reference's bit for bit and does not depend on the thread
// count. The inner loop runs over a chunk of contiguous columns (one
// independent double accumulator each, on the stack), so it vectorises
// without reassociating anything.
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include <algorithm>

using namespace mlir;

namespace stringc::codegen::detail {

std::vector<KernelSpec> sumToSpecs(Operation *op) {
  if (!isa<pe::SumToOp>(op))
    return {};
  std::optional<Shape> x = kernelShape(op->getOperand(0).getType());
  std::optional<Shape> y = kernelShape(op->getResult(0).getType());
  // A sum over no dimension is a copy, and a scalar result a full sum: both
  // stay on the runtime (nothing to split over columns).
  if (!x || !y || y->empty() || y->size() >= x->size())
    return {};
  llvm::ArrayRef<int64_t> dims(*x);
  if (dims.take_back(y->size()) != llvm::ArrayRef<int64_t>(*y))
    return {};
  const int64_t n = numel(*y);
  const int64_t m = numel(dims.slice(1, dims.size() - y->size() - 1));
  KernelSpec spec;
  spec.kind = "sum_to";
  spec.views = {{dims[0], m, n}, {n}};
  // Every chunk reads all the rows: keep at most about 8 of them.
  spec.grain = std::max<int64_t>(16, (n + 7) / 8);
  spec.key = spec.kind + "|" + shapeKey(spec.views[0]) + "|" + shapeKey(spec.views[1]);
  return {spec};
}

void buildSumToKernel(Operation *, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value x = kb.arg(0), y = kb.arg(1);
  const int64_t n = spec.views[1][0];
  OpBuilder &b = kb.b();
  Value acc = b.create<memref::AllocaOp>(kb.loc(), MemRefType::get({n}, b.getF64Type()));
  kb.loop(kb.begin(), kb.end(), [&](Value j) { kb.store(kb.f64(0), acc, {j}); });
  kb.loop(kb.index(0), kb.dim(x, 0), [&](Value i) {
    kb.loop(kb.index(0), kb.index(spec.views[0][1]), [&](Value q) {
      kb.loop(kb.begin(), kb.end(), [&](Value j) {
        Value sum = kb.add(kb.load(acc, {j}), kb.toF64(kb.load(x, {i, q, j})));
        kb.store(sum, acc, {j});
      });
    });
  });
  kb.loop(kb.begin(), kb.end(), [&](Value j) { kb.store(kb.toF32(kb.load(acc, {j})), y, {j}); });
  kb.finish();
}

} // namespace stringc::codegen::detail
