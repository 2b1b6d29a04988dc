//===- LossGen.cpp - cross_entropy_grad kernel ----------------------------===//
//
// pe.cross_entropy_grad: logits [lead..., C], labels [lead...] (i32), dy []
// -> dlogits = dy (softmax(logits) - target) / N, N the number of rows,
// target = (1 - e) onehot(labels) + e / C with e the op's `smoothing`. logits and dlogits are seen as [d0, m, C], labels as [d0, m]; the
// parallel loop runs over d0, each row (i, q) on its own:
//   max_c (float), e_c = exp(x_c - max) (float, MLIR's polynomial exp)
//   stored in the output row and summed (float, `reassoc` so that it
//   vectorises), then the row scaled by factor / sum and factor subtracted
//   at the label; factor = float(double(dy) / N). With smoothing e > 0
//   (a constant of the kernel, part of its key), factor e / C is subtracted
//   everywhere and factor (1 - e) at the label, each rounded from double.
// This is the fast kernel's algorithm (runtime/src/cpu/LossGen.cpp);
// against the reference (double exp and division) it agrees to float
// rounding. The executor checks the labels against C before the call
// (checkCompiledIndices).
//
// The forward pe.cross_entropy stays on the runtime: its result is one
// scalar, a mean over every row, which a split over rows cannot write
// without a scratch buffer for the per-row losses (the kernel ABI has none).
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

double smoothingOf(Operation *op) {
  return cast<pe::CrossEntropyGradOp>(op).getSmoothing().convertToDouble();
}

void buildCrossEntropyGrad(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  const double smoothing = smoothingOf(op);
  Value logits = kb.arg(0), labels = kb.arg(1), dy = kb.arg(2), dlogits = kb.arg(3);
  const int64_t m = spec.views[0][1], C = spec.views[0][2];
  OpBuilder &b = kb.b();
  Location loc = kb.loc();
  // factor = dy / N in double, rounded once; N = d0 * m rows.
  Value rows = b.create<arith::MulIOp>(loc, kb.dim(logits, 0), kb.index(m));
  Value rowsI64 = b.create<arith::IndexCastOp>(loc, b.getI64Type(), rows);
  Value rowsF64 = b.create<arith::SIToFPOp>(loc, b.getF64Type(), rowsI64);
  Value factorF64 = kb.div(kb.toF64(kb.load(dy, {kb.index(0)})), rowsF64);
  Value factor = kb.toF32(factorF64);
  // Without smoothing the kernel is the plain one, instruction for instruction.
  Value labelShift = factor, shift;
  if (smoothing != 0.0) {
    labelShift = kb.toF32(kb.mul(factorF64, kb.f64(1.0 - smoothing)));
    shift = kb.toF32(kb.mul(factorF64, kb.f64(smoothing / double(C))));
  }
  Value zero = kb.index(0), width = kb.index(C);
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(m), [&](Value q) {
      Value first = kb.load(logits, {i, q, zero});
      Value maxLogit = kb.reduce(kb.index(1), width, first, [&](Value c, Value acc) {
        return b.create<arith::MaxNumFOp>(loc, acc, kb.load(logits, {i, q, c}));
      });
      Value sum = kb.reduce(zero, width, kb.f32(0), [&](Value c, Value acc) {
        Value e = b.create<math::ExpOp>(loc, kb.sub(kb.load(logits, {i, q, c}), maxLogit));
        kb.store(e, dlogits, {i, q, c});
        return kb.add(acc, e, /*reassoc=*/true);
      });
      Value scale = kb.div(factor, sum);
      kb.loop(zero, width, [&](Value c) {
        Value scaled = kb.mul(kb.load(dlogits, {i, q, c}), scale);
        kb.store(shift ? kb.sub(scaled, shift) : scaled, dlogits, {i, q, c});
      });
      Value label = b.create<arith::IndexCastOp>(loc, b.getIndexType(),
                                                 kb.load(labels, {i, q}));
      kb.store(kb.sub(kb.load(dlogits, {i, q, label}), labelShift), dlogits, {i, q, label});
    });
  });
  kb.finish();
}

} // namespace

std::vector<KernelSpec> lossSpecs(Operation *op) {
  if (!isa<pe::CrossEntropyGradOp>(op))
    return {};
  std::optional<Shape> logits = kernelShape(op->getOperand(0).getType());
  std::optional<Shape> labels = kernelShapeI32(op->getOperand(1).getType());
  std::optional<Shape> dy = kernelShape(op->getOperand(2).getType());
  std::optional<Shape> dlogits = kernelShape(op->getResult(0).getType());
  if (!logits || !labels || !dy || !dlogits || logits->empty() || !dy->empty() ||
      *dlogits != *logits || ShapedType::isDynamic(logits->back()))
    return {};
  llvm::ArrayRef<int64_t> dims(*logits);
  if (llvm::ArrayRef<int64_t>(*labels) != dims.drop_back())
    return {};
  // [d0, m, C]: a rank-1 logits as [1, 1, C], rank 2 as [d0, 1, C].
  Shape rows = logits->size() == 1 ? Shape{1, 1, dims[0]}
                                   : Shape{dims[0], numel(dims.slice(1, dims.size() - 2)),
                                           dims.back()};
  KernelSpec spec;
  spec.kind = "cross_entropy_grad";
  spec.views = {rows, {rows[0], rows[1]}, {1}, rows};
  spec.i32Views = {false, true, false, false};
  spec.grain = grainFor(rows[1] * rows[2]);
  spec.build = buildCrossEntropyGrad;
  spec.key = spec.kind;
  if (double smoothing = smoothingOf(op); smoothing != 0.0)
    spec.key += "|smoothing" +
                llvm::utohexstr(llvm::APFloat(smoothing).bitcastToAPInt().getZExtValue());
  for (const Shape &v : spec.views)
    spec.key += "|" + shapeKey(v);
  return {spec};
}

} // namespace stringc::codegen::detail
