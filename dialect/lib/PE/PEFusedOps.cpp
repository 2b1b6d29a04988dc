//===- PEFusedOps.cpp - the hoisted and fused ops -------------------------===//
//
// What the ops of PEFusedOps.td need beyond their ODS: the shape rules (each
// fused op reuses the rules of the ops it replaces, PEVerify.h, so a fused op
// is valid exactly when the unfused composition is), the vector-Jacobian
// products and the costs (those of the ops they replace).
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PECostModel.h"
#include "PEVerify.h"

using namespace mlir;
using namespace mlir::pe;
using namespace mlir::pe::cost;
using namespace mlir::pe::verify;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

/// `pos` static `[T, A]` (A in {1, 2}) and `freqs` static `[P, A]`.
static LogicalResult checkTableInputs(Operation *op, Value pos, Value freqs) {
  if (failed(checkStatic(op, pos, "pos", 2)) ||
      failed(checkStatic(op, freqs, "freqs", 2)))
    return failure();
  ArrayRef<int64_t> p = shapeOf(pos), f = shapeOf(freqs);
  if (p[1] != 1 && p[1] != 2)
    return op->emitOpError() << "operand 'pos' must have 1 or 2 axes, got "
                             << p[1];
  return checkShape(op, freqs, "freqs", {f[0], p[1]}, "[P, A]");
}

/// `x` `[B, T, D]` with `D` even and `table` static `[T, D/2, 2]`.
static LogicalResult checkRopeTable(Operation *op, Value x, StringRef xName,
                                    Value table) {
  if (failed(checkActivation(op, x, xName, 3)) ||
      failed(checkStatic(op, table, "table", 3)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x);
  if (xs[2] % 2 != 0)
    return op->emitOpError() << "the last dimension of '" << xName
                             << "' must be even (interleaved pairs), got "
                             << xs[2];
  return checkShape(op, table, "table", {xs[1], xs[2] / 2, 2},
                    "[T, D/2, 2]");
}

/// The attention rules of pe.attention without `rel`, the mask none or
/// causal, and the table `[T, D/2, 2]`.
static LogicalResult checkRopeAttention(Operation *op, Value q, Value k,
                                        Value v, Value table, int64_t heads,
                                        double scale, MaskKind mask) {
  if (mask == MaskKind::Skip)
    return op->emitOpError()
           << "mask 'skip' is not supported (a skip mask ignores 'q' and "
              "'k'; use pe.attention)";
  if (failed(checkAttention(op, q, k, v, Value(), heads, scale,
                            /*skip=*/false, IntegerAttr())))
    return failure();
  // The kernel rotates whole pairs within each head's tile.
  int64_t dh = shapeOf(q)[2] / heads;
  if (dh % 2 != 0)
    return op->emitOpError() << "the head width D / heads must be even "
                                "(rotary pairs within a head), got "
                             << dh;
  return checkRopeTable(op, q, "q", table);
}

/// `x` `[..., I]`, `w` `[I, O]`, optional `b` `[O]`: the rules of
/// pe.linear. Returns the result shape `[..., O]` in `result`.
static LogicalResult checkLinear(Operation *op, Value x, Value w, Value b,
                                 SmallVectorImpl<int64_t> &result) {
  if (failed(checkLinearWeight(op, x, "x", w, 0)))
    return failure();
  ArrayRef<int64_t> ws = shapeOf(w);
  if (b && (failed(checkStatic(op, b, "b", 1)) ||
            failed(checkShape(op, b, "b", {ws[1]}, "[O]"))))
    return failure();
  result = replaceLast(shapeOf(x), {ws[1]});
  return success();
}

LogicalResult RopeTableOp::verify() {
  Operation *op = getOperation();
  if (failed(checkTableInputs(op, getPos(), getFreqs())))
    return failure();
  return checkResultShape(
      op, {shapeOf(getPos())[0], shapeOf(getFreqs())[0], 2});
}

LogicalResult RopeApplyOp::verify() {
  if (failed(checkRopeTable(*this, getX(), "x", getTable())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
}

LogicalResult CayleyWeightOp::verify() {
  if (failed(checkStatic(*this, getS(), "s", 2)))
    return failure();
  ArrayRef<int64_t> s = shapeOf(getS());
  if (failed(checkShape(*this, getS(), "s", {s[0], s[0]}, "[D, D]")))
    return failure();
  return checkResultShape(*this, s);
}

LogicalResult RopeAttentionOp::verify() {
  if (failed(checkRopeAttention(*this, getQ(), getK(), getV(), getTable(),
                                getHeadsAttr().getInt(),
                                getScaleAttr().getValueAsDouble(), getMask())))
    return failure();
  if (getLse() &&
      failed(checkResult(*this, 1, "lse",
                         attentionLseShape(getQ(), getHeadsAttr().getInt()),
                         "[B, heads, T]")))
    return failure();
  return checkResultShape(*this, shapeOf(getQ()));
}

LogicalResult LinearGeluOp::verify() {
  Operation *op = getOperation();
  SmallVector<int64_t> shape;
  if (failed(checkLinear(op, getX(), getW(), getB(), shape)) ||
      failed(checkResult(op, 0, "result", shape, "[..., O]")) ||
      failed(checkResult(op, 1, "pre", shape, "[..., O]")))
    return failure();
  return success();
}

LogicalResult LinearResidualOp::verify() {
  Operation *op = getOperation();
  SmallVector<int64_t> shape;
  if (failed(checkLinear(op, getX(), getW(), getB(), shape)) ||
      failed(checkShape(op, getResidual(), "residual", shape,
                        "the result shape [..., O]")))
    return failure();
  return checkResultShape(op, shape);
}

LogicalResult LinearGradInputAccOp::verify() {
  Operation *op = getOperation();
  if (failed(checkLinearWeight(op, getDy(), "dy", getW(), 1)))
    return failure();
  SmallVector<int64_t> shape = replaceLast(shapeOf(getDy()), {shapeOf(getW())[0]});
  if (failed(checkShape(op, getPrior(), "prior", shape, "the result shape [..., I]")))
    return failure();
  return checkResult(op, 0, "dx", shape, "[..., I]");
}

LogicalResult LayerNormGradAccOp::verify() {
  Operation *op = getOperation();
  if (failed(checkLayerNormGrad(op, getX(), getGamma(), getDy(),
                                getEpsilon().convertToDouble())))
    return failure();
  return checkShape(op, getPrior(), "prior", shapeOf(getX()), "the shape of 'x'");
}

LogicalResult RopeTableGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkTableInputs(op, getPos(), getFreqs())))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getPos()), f = shapeOf(getFreqs());
  if (failed(checkStatic(op, getDy(), "dy", 3)) ||
      failed(checkShape(op, getDy(), "dy", {p[0], f[0], 2},
                        "the table shape [T, P, 2]")))
    return failure();
  return checkResult(op, 0, "dfreqs", f, "the shape of 'freqs'");
}

LogicalResult RopeApplyGradTableOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", 3)) ||
      failed(checkShape(op, getDy(), "dy", shapeOf(getX()),
                        "the shape of 'x'")))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(getX());
  if (xs[2] % 2 != 0)
    return emitOpError()
           << "the last dimension of 'x' must be even (interleaved pairs), "
              "got "
           << xs[2];
  return checkResult(op, 0, "dtable", {xs[1], xs[2] / 2, 2},
                          "[T, D/2, 2]");
}

LogicalResult CayleyWeightGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkStatic(op, getS(), "s", 2)))
    return failure();
  ArrayRef<int64_t> s = shapeOf(getS());
  if (failed(checkShape(op, getS(), "s", {s[0], s[0]}, "[D, D]")) ||
      failed(checkShape(op, getDw(), "dw", s, "the shape of 's'")) ||
      (getWeight() &&
       failed(checkShape(op, getWeight(), "weight", s, "the shape of 's'"))))
    return failure();
  return checkResult(op, 0, "ds", s, "the shape of 's'");
}

LogicalResult RopeAttentionGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkRopeAttention(op, getQ(), getK(), getV(), getTable(),
                                getHeadsAttr().getInt(),
                                getScaleAttr().getValueAsDouble(), getMask())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQ());
  if (failed(checkAttentionSaved(op, getQ(), getY(), getLse(),
                                 getHeadsAttr().getInt())) ||
      failed(checkShape(op, getDy(), "dy", q, "the shape of 'q'")))
    return failure();
  for (auto [index, name] :
       llvm::enumerate(ArrayRef<StringRef>{"dq", "dk", "dv"}))
    if (failed(checkResult(op, index, name, q, "the shape of 'q'")))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products (DifferentiableOpInterface)
//
// docs/autodiff.md. Where a fused op is a composition of ordinary ops, its
// VJP is the composition of theirs, reusing their backward ops.
//===----------------------------------------------------------------------===//

/// `pos` is a position table: no gradient.
LogicalResult RopeTableOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dfreqs = builder.create<RopeTableGradOp>(
      getLoc(), getFreqs().getType(), getPos(), getFreqs(), resultGrads[0]);
  operandGrads.append({Value(), dfreqs});
  return success();
}

/// The transpose of the rotation: the same table, `inverse` flipped.
LogicalResult RopeApplyOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value dx = builder.create<RopeApplyOp>(loc, getX().getType(), dy, getTable(),
                                         builder.getBoolAttr(!getInverse()));
  Value dtable = builder.create<RopeApplyGradTableOp>(
      loc, getTable().getType(), getX(), dy, getInverseAttr());
  operandGrads.append({dx, dtable});
  return success();
}

LogicalResult CayleyWeightOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  // W itself goes to the gradient: M = (W^T + I) / 2 spares the GPU a
  // second factorisation (the CPU kernels ignore it).
  operandGrads.push_back(builder.create<CayleyWeightGradOp>(
      getLoc(), getS().getType(), getS(), resultGrads[0], getResult()));
  return success();
}

/// The table gets no gradient: pe-fuse-attention only fuses constant tables
/// (docs/passes.md); autodiff reports a trainable one.
Operation *RopeAttentionOp::withSavedResults(OpBuilder &builder) {
  if (getLse())
    return nullptr;
  OperationState state(getLoc(), getOperationName());
  state.addOperands(getOperation()->getOperands());
  state.addAttributes((*this)->getAttrs());
  state.addTypes({getResult().getType(),
                  RankedTensorType::get(
                      attentionLseShape(getQ(), getHeadsAttr().getInt()),
                      builder.getF32Type())});
  return builder.create(state);
}

/// As pe.attention's: the backward reads the result and the log-sum-exp.
LogicalResult RopeAttentionOp::buildVJP(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (!getLse())
    return emitOpError() << "cannot differentiate without its 'lse' result "
                            "(pe-autodiff adds it)";
  Type type = getQ().getType();
  auto grad = builder.create<RopeAttentionGradOp>(
      getLoc(), type, type, type, getQ(), getK(), getV(), getTable(),
      getResult(), getLse(), resultGrads[0], getHeadsAttr(), getScaleAttr(),
      getMaskAttr());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv(), Value()});
  return success();
}

/// The gradient of `linear` then `gelu`, from the kept pre-activation:
/// dpre = gelu_grad(pre, dy) (+ the gradient of `pre` itself when something
/// else reads it), then the gradients of pe.linear.
LogicalResult LinearGeluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dpre;
  if (Value dy = resultGrads[0])
    dpre = builder.create<GeluGradOp>(loc, getPre().getType(), getPre(), dy,
                                      getApproximateAttr());
  if (Value dPreDirect = resultGrads[1])
    dpre = dpre ? builder.create<AddOp>(loc, dpre.getType(), dpre, dPreDirect)
                      .getResult()
                : dPreDirect;
  if (!dpre)
    return emitOpError() << "VJP without a gradient for either result";
  operandGrads.push_back(
      builder.create<LinearGradInputOp>(loc, getX().getType(), dpre, getW()));
  operandGrads.push_back(
      builder.create<LinearGradWeightOp>(loc, getW().getType(), getX(), dpre));
  if (getB())
    operandGrads.push_back(
        builder.create<SumToOp>(loc, getB().getType(), dpre));
  return success();
}

LogicalResult LinearResidualOp::buildVJP(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(dy);
  operandGrads.push_back(
      builder.create<LinearGradInputOp>(loc, getX().getType(), dy, getW()));
  operandGrads.push_back(
      builder.create<LinearGradWeightOp>(loc, getW().getType(), getX(), dy));
  if (getB())
    operandGrads.push_back(builder.create<SumToOp>(loc, getB().getType(), dy));
  return success();
}

//===----------------------------------------------------------------------===//
// FLOPs (CostOpInterface, docs/dialect.md)
//===----------------------------------------------------------------------===//

/// RoPE fused into attention: the attention and the rotation of q and k.
static double ropeAttentionForward(Operation *op, int64_t heads, int64_t batch) {
  Value q = op->getOperand(0);
  double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
  double pairs = b * double(heads) * t * t;
  return 2 * pairs * (d / double(heads)) * 2 + 5 * pairs + 2 * 6 * b * t * d;
}

/// The inverse of (I + S) for the Cayley weight: LU, then d solves.
static double cayleyWeightInverse(Operation *op, int64_t batch) {
  double d = dimFromEnd(op->getOperand(0), 0, batch);
  return 2.0 / 3.0 * d * d * d + 2 * d * d * d;
}

double RopeTableOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 20); }
double RopeApplyOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 6); }

double CayleyWeightOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch);
  return cayleyWeightInverse(*this, batch) + 2 * cube(d);
}

double RopeAttentionOp::estimateFlops(int64_t batch) {
  return ropeAttentionForward(*this, getHeads(), batch);
}

double LinearGeluOp::estimateFlops(int64_t batch) { // x W + b, then gelu
  double out = resultElements(*this, batch);
  return 2 * out * dimFromEnd((*this)->getOperand(1), 1, batch) + 21 * out;
}

double LinearResidualOp::estimateFlops(int64_t batch) { // r + x W + b
  double out = resultElements(*this, batch);
  return 2 * out * dimFromEnd((*this)->getOperand(2), 1, batch) + 2 * out;
}

double LinearGradInputAccOp::estimateFlops(int64_t batch) { // prior + dy W^T: inner O
  return 2 * resultElements(*this, batch) * dimFromEnd((*this)->getOperand(2), 0, batch) +
         resultElements(*this, batch);
}

double LayerNormGradAccOp::estimateFlops(int64_t batch) { // layer_norm_grad's 10, + prior
  return perElement(*this, batch, 11);
}

double RopeTableGradOp::estimateFlops(int64_t batch) {
  return 24 * operandElements(*this, 2, batch);
}

double RopeApplyGradTableOp::estimateFlops(int64_t batch) {
  return 6 * operandElements(*this, 0, batch);
}

double CayleyWeightGradOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch);
  // With the forward's W the inverse is read off it (d^2); without, refactored.
  double inverse = getWeight() ? d * d : cayleyWeightInverse(*this, batch);
  return inverse + 6 * cube(d);
}

double RopeAttentionGradOp::estimateFlops(int64_t batch) {
  Value q = (*this)->getOperand(0);
  double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
  return 2.5 * ropeAttentionForward(*this, getHeads(), batch) + 2 * 6 * b * t * d;
}
