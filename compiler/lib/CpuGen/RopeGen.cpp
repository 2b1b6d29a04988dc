//===- RopeGen.cpp - rope_apply and rope_apply_grad_table kernels ---------===//
//
// pe.rope_apply turns the interleaved pairs of x [lead..., T, D] by the cos /
// sin table [T, D/2, 2] (pe.rope_table, hoisted out of the blocks); with
// `inverse` by the transposed rotation (its own gradient with respect to x).
// x and y are seen as [d0, m, T, D] (m the product of the other leading
// dimensions, 1 for the [B, T, D] the verifier admits today), the table as
// [T, D]; the parallel loop runs over d0. Each pair is computed in float as
// the fast kernel does (runtime/src/cpu/RopeRow.h: x0 c - x1 s, x0 s + x1 c,
// no contraction): a double version, which rounds once as the reference
// does and matches it bit for bit, measured ~15% slower than the fast
// kernel (half the vector width), so float it is - within 2 ulp of the
// reference.
//
// pe.rope_apply_grad_table (the table's gradient) sums over every leading
// index: the parallel loop runs over the T tokens (static), each summing its
// D table entries over (i, q) in row order in double, rounded once - the
// reference's order and precision, so again bit for bit and independent of
// the thread count.
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

bool inverseOf(Operation *op) {
  if (auto apply = dyn_cast<pe::RopeApplyOp>(op))
    return apply.getInverse();
  return cast<pe::RopeApplyGradTableOp>(op).getInverse();
}

/// [d0, m, T, D] for x [lead..., T, D] (rank >= 2).
Shape applyView(const Shape &x) {
  llvm::ArrayRef<int64_t> dims(x);
  const int64_t T = dims[dims.size() - 2], D = dims.back();
  if (x.size() == 2)
    return {1, 1, T, D};
  return {dims.front(), numel(dims.slice(1, dims.size() - 3)), T, D};
}

void buildRopeApply(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value x = kb.arg(0), table = kb.arg(1), y = kb.arg(2);
  const Shape &view = spec.views[0];
  const double sign = inverseOf(op) ? -1.0 : 1.0;
  Value two = kb.index(2), one = kb.index(1);
  OpBuilder &b = kb.b();
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(view[1]), [&](Value q) {
      kb.loop(kb.index(0), kb.index(view[2]), [&](Value t) {
        kb.loop(kb.index(0), kb.index(view[3] / 2), [&](Value j) {
          Value even = b.create<arith::MulIOp>(kb.loc(), j, two);
          Value odd = b.create<arith::AddIOp>(kb.loc(), even, one);
          Value c = kb.load(table, {t, even});
          Value s = kb.mul(kb.f32(sign), kb.load(table, {t, odd}));
          Value x0 = kb.load(x, {i, q, t, even});
          Value x1 = kb.load(x, {i, q, t, odd});
          kb.store(kb.sub(kb.mul(x0, c), kb.mul(x1, s)), y, {i, q, t, even});
          kb.store(kb.add(kb.mul(x0, s), kb.mul(x1, c)), y, {i, q, t, odd});
        });
      });
    });
  });
  kb.finish();
}

void buildRopeApplyGradTable(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value x = kb.arg(0), dy = kb.arg(1), dtable = kb.arg(2);
  const Shape &view = spec.views[0];
  const int64_t D = view[3];
  const double sign = inverseOf(op) ? -1.0 : 1.0;
  Value two = kb.index(2), one = kb.index(1);
  OpBuilder &b = kb.b();
  // One token's D accumulators in double, on the stack (D is static).
  Value acc = b.create<memref::AllocaOp>(kb.loc(), MemRefType::get({D}, b.getF64Type()));
  kb.loop(kb.begin(), kb.end(), [&](Value t) {
    kb.loop(kb.index(0), kb.index(D), [&](Value d) { kb.store(kb.f64(0), acc, {d}); });
    kb.loop(kb.index(0), kb.dim(x, 0), [&](Value i) {
      kb.loop(kb.index(0), kb.index(view[1]), [&](Value q) {
        kb.loop(kb.index(0), kb.index(D / 2), [&](Value j) {
          Value even = b.create<arith::MulIOp>(kb.loc(), j, two);
          Value odd = b.create<arith::AddIOp>(kb.loc(), even, one);
          Value x0 = kb.toF64(kb.load(x, {i, q, t, even}));
          Value x1 = kb.toF64(kb.load(x, {i, q, t, odd}));
          Value d0 = kb.toF64(kb.load(dy, {i, q, t, even}));
          Value d1 = kb.toF64(kb.load(dy, {i, q, t, odd}));
          Value dc = kb.add(kb.mul(d0, x0), kb.mul(d1, x1));
          Value ds = kb.mul(kb.f64(sign), kb.sub(kb.mul(d1, x0), kb.mul(d0, x1)));
          kb.store(kb.add(kb.load(acc, {even}), dc), acc, {even});
          kb.store(kb.add(kb.load(acc, {odd}), ds), acc, {odd});
        });
      });
    });
    kb.loop(kb.index(0), kb.index(D), [&](Value d) {
      kb.store(kb.toF32(kb.load(acc, {d})), dtable, {t, d});
    });
  });
  kb.finish();
}

} // namespace

std::vector<KernelSpec> ropeSpecs(Operation *op) {
  if (!isa<pe::RopeApplyOp, pe::RopeApplyGradTableOp>(op))
    return {};
  std::optional<Shape> x = kernelShape(op->getOperand(0).getType());
  std::optional<Shape> second = kernelShape(op->getOperand(1).getType());
  std::optional<Shape> result = kernelShape(op->getResult(0).getType());
  if (!x || !second || !result || x->size() < 2)
    return {};
  const int64_t T = (*x)[x->size() - 2], D = x->back();
  if (ShapedType::isDynamic(T) || D % 2 != 0)
    return {};
  const Shape table = {T, D / 2, 2};
  const bool apply = isa<pe::RopeApplyOp>(op);
  // rope_apply: x, table -> y (x's shape); the gradient: x, dy (x's shape) -> dtable.
  if (apply ? (*second != table || *result != *x) : (*second != *x || *result != table))
    return {};
  const Shape rows = applyView(*x), flatTable = {T, D};
  const std::string inverse = inverseOf(op) ? "|inverse" : "";

  KernelSpec spec;
  if (apply) {
    spec.kind = "rope_apply";
    spec.views = {rows, flatTable, rows};
    spec.grain = grainFor(rows[1] * T * D);
    spec.build = buildRopeApply;
  } else {
    spec.kind = "rope_apply_grad_table";
    spec.views = {rows, rows, flatTable};
    spec.grain = 1; // each token sums over every row of the batch
    spec.build = buildRopeApplyGradTable;
  }
  spec.key = spec.kind + inverse;
  for (const Shape &v : spec.views)
    spec.key += "|" + shapeKey(v);
  return {spec};
}

} // namespace stringc::codegen::detail
