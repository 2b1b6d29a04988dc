//===- ElementwiseGen.cpp - add/sub/mul/scale/gelu/relu kernels -----------===//
//
// One loop nest per op, the innermost loop over contiguous elements (what
// LLVM's loop vectoriser wants). The views:
//   - same shapes: every tensor as [d0, n], n the product of the other
//     dimensions (a rank-1 static tensor [N] as [1, N], a scalar as [1, 1]);
//   - a trailing-suffix operand s of the result [d0, d1, ..., S...]: the
//     result and the other operand as [d0, m, |S|] (m the product of the
//     dimensions between; [d0, |S|] when that is 1), s as [|S|];
//   - a scalar operand: the others as [d0, n], the scalar as [1], loaded
//     once before the loops.
// The parallel loop runs over d0.
//
// The arithmetic is the runtime's: add/sub/mul in float (exact, the
// reference's bit for bit), scale in double rounded once (also bit for bit),
// gelu and its gradient in float: erf and exp(-x^2/2) by KernelMath.cpp's
// approximations, tanh (the approximate form) by MLIR's polynomial one
// (a few float ulps; docs/codegen.md).
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

/// [d0, product of the rest] (see the file comment).
Shape flatView(const Shape &shape) {
  if (shape.empty())
    return {1, 1};
  if (shape.size() == 1)
    return ShapedType::isDynamic(shape[0]) ? Shape{shape[0], 1} : Shape{1, shape[0]};
  return {shape[0], numel(llvm::ArrayRef<int64_t>(shape).drop_front())};
}

bool isBinary(Operation *op) { return isa<pe::AddOp, pe::SubOp, pe::MulOp>(op); }

std::string attrKey(Operation *op) {
  // The exact bits of the doubles: kernels with different constants differ.
  if (auto scale = dyn_cast<pe::ScaleOp>(op))
    return "f" + llvm::utohexstr(scale.getFactor().bitcastToAPInt().getZExtValue()) + "b" +
           llvm::utohexstr(scale.getBias().bitcastToAPInt().getZExtValue());
  if (auto gelu = dyn_cast<pe::GeluOp>(op))
    return gelu.getApproximate() ? "tanh" : "erf";
  if (auto grad = dyn_cast<pe::GeluGradOp>(op))
    return grad.getApproximate() ? "tanh" : "erf";
  return "";
}

/// The value of one element: `in` are the operands' elements.
Value elementValue(Operation *op, MemrefKernelBuilder &kb, ValueRange in) {
  OpBuilder &b = kb.b();
  Location loc = kb.loc();
  if (isa<pe::AddOp>(op))
    return kb.add(in[0], in[1]);
  if (isa<pe::SubOp>(op))
    return kb.sub(in[0], in[1]);
  if (isa<pe::MulOp>(op))
    return kb.mul(in[0], in[1]);
  if (auto scale = dyn_cast<pe::ScaleOp>(op)) {
    // In double, rounded once: the reference's value exactly.
    Value x = kb.toF64(in[0]);
    Value y = kb.add(kb.mul(kb.f64(scale.getFactor().convertToDouble()), x),
                     kb.f64(scale.getBias().convertToDouble()));
    return kb.toF32(y);
  }
  if (isa<pe::ReluOp>(op)) {
    // x > 0 or NaN keeps x (the reference's NaN passes through).
    Value keep = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UGT, in[0], kb.f32(0));
    return b.create<arith::SelectOp>(loc, keep, in[0], kb.f32(0));
  }
  if (isa<pe::ReluGradOp>(op)) {
    Value keep = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, in[0], kb.f32(0));
    return b.create<arith::SelectOp>(loc, keep, in[1], kb.f32(0));
  }
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  constexpr double kGeluC = 0.044715;
  bool approximate = isa<pe::GeluOp>(op) ? cast<pe::GeluOp>(op).getApproximate()
                                         : cast<pe::GeluGradOp>(op).getApproximate();
  Value x = in[0];
  Value half = kb.f32(0.5), one = kb.f32(1.0);
  if (approximate) {
    // t = tanh(sqrt(2/pi) (x + c x^3))
    Value x3 = kb.mul(kb.mul(x, x), x);
    Value u = kb.mul(kb.f32(kSqrt2OverPi), kb.add(x, kb.mul(kb.f32(kGeluC), x3)));
    Value t = b.create<math::TanhOp>(loc, u);
    if (isa<pe::GeluOp>(op))
      return kb.mul(kb.mul(half, x), kb.add(one, t));
    // (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3c x^2)
    Value left = kb.mul(half, kb.add(one, t));
    Value poly = kb.add(one, kb.mul(kb.f32(3 * kGeluC), kb.mul(x, x)));
    Value right = kb.mul(kb.mul(kb.mul(half, x), kb.sub(one, kb.mul(t, t))),
                         kb.mul(kb.f32(kSqrt2OverPi), poly));
    return kb.mul(in[1], kb.add(left, right));
  }
  // cdf = (1 + erf(x / sqrt 2)) / 2
  Value erf = kb.erf(kb.mul(x, kb.f32(kInvSqrt2)));
  Value cdf = kb.mul(half, kb.add(one, erf));
  if (isa<pe::GeluOp>(op))
    return kb.mul(x, cdf);
  // cdf + x exp(-x^2/2) / sqrt(2 pi) (for |x| > 13.2, exp(-87) ~ 1.6e-38
  // in place of a smaller number)
  Value e = kb.expOfNonPositive(kb.mul(kb.f32(-0.5), kb.mul(x, x)));
  Value pdf = kb.mul(e, kb.f32(kInvSqrt2Pi));
  return kb.mul(in[1], kb.add(cdf, kb.mul(x, pdf)));
}

} // namespace

std::vector<KernelSpec> elementwiseSpecs(Operation *op) {
  if (!isa<pe::AddOp, pe::SubOp, pe::MulOp, pe::ScaleOp, pe::GeluOp, pe::GeluGradOp, pe::ReluOp,
           pe::ReluGradOp>(op))
    return {};
  std::optional<Shape> result = kernelShape(op->getResult(0).getType());
  if (!result)
    return {};
  std::vector<Shape> operands;
  for (Value v : op->getOperands()) {
    std::optional<Shape> s = kernelShape(v.getType());
    if (!s)
      return {};
    operands.push_back(*s);
  }

  KernelSpec spec;
  spec.kind = op->getName().stripDialect().str();
  Shape out = flatView(*result);
  if (isBinary(op) && operands[0] != operands[1]) {
    // One operand is a trailing suffix of the other (the verifier's rule).
    const size_t small = operands[0].size() < operands[1].size() ? 0 : 1;
    const Shape &s = operands[small];
    if (s.size() >= result->size() || operands[1 - small] != *result)
      return {};
    Shape smallView;
    if (s.empty()) {
      smallView = {1};
    } else {
      // [d0, m, |S|]: the dims between d0 and the suffix collapse into m.
      llvm::ArrayRef<int64_t> dims(*result);
      int64_t m = numel(dims.slice(1, dims.size() - s.size() - 1));
      out = m == 1 ? Shape{dims[0], numel(s)} : Shape{dims[0], m, numel(s)};
      smallView = {numel(s)};
    }
    spec.views = small == 0 ? std::vector<Shape>{smallView, out} : std::vector<Shape>{out, smallView};
  } else {
    for (const Shape &s : operands) {
      if (s != *result)
        return {};
      spec.views.push_back(out);
    }
  }
  spec.views.push_back(out);
  spec.grain = grainFor(numel(llvm::ArrayRef<int64_t>(out).drop_front()));
  spec.key = spec.kind + "|" + attrKey(op);
  for (const Shape &v : spec.views)
    spec.key += "|" + shapeKey(v);
  return {spec};
}

void buildElementwiseKernel(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  const unsigned numOperands = op->getNumOperands();
  Value result = kb.arg(numOperands);
  const Shape &out = spec.views.back();
  // A scalar operand (view [1]) is loaded once.
  llvm::SmallVector<Value> hoisted(numOperands);
  for (unsigned k = 0; k < numOperands; ++k)
    if (spec.views[k] == Shape{1})
      hoisted[k] = kb.load(kb.arg(k), {kb.index(0)});

  auto element = [&](llvm::ArrayRef<Value> ivs) {
    llvm::SmallVector<Value> in;
    for (unsigned k = 0; k < numOperands; ++k) {
      if (hoisted[k])
        in.push_back(hoisted[k]);
      else if (spec.views[k].size() == 1) // the suffix operand: [|S|]
        in.push_back(kb.load(kb.arg(k), {ivs.back()}));
      else
        in.push_back(kb.load(kb.arg(k), ivs));
    }
    kb.store(elementValue(op, kb, in), result, ivs);
  };
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    if (out.size() == 2) {
      kb.loop(kb.index(0), kb.index(out[1]), [&](Value j) { element({i, j}); });
      return;
    }
    kb.loop(kb.index(0), kb.index(out[1]), [&](Value q) {
      kb.loop(kb.index(0), kb.index(out[2]), [&](Value j) { element({i, q, j}); });
    });
  });
  kb.finish();
}

} // namespace stringc::codegen::detail
