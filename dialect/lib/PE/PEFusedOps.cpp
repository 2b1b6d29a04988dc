//===- PEFusedOps.cpp - verifiers of the hoisted and fused ops ------------===//
//
// Shape rules of the ops in PEFusedOps.td. Each fused op reuses the rules of
// the ops it replaces (PEVerify.h), so a fused op is valid exactly when the
// unfused composition is.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PEVerify.h"

using namespace mlir;
using namespace mlir::pe;
using namespace mlir::pe::verify;

/// Result `index` (`name`) has `shape`.
static LogicalResult checkNamedResult(Operation *op, unsigned index,
                                      StringRef name, ArrayRef<int64_t> shape,
                                      StringRef what) {
  auto type = cast<RankedTensorType>(op->getResult(index).getType());
  if (type.getShape() == shape)
    return success();
  return op->emitOpError() << "result '" << name << "' must have shape "
                           << shapeStr(shape) << " (" << what << "), got "
                           << type;
}

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
  return checkResultShape(*this, shapeOf(getQ()));
}

LogicalResult LinearGeluOp::verify() {
  Operation *op = getOperation();
  SmallVector<int64_t> shape;
  if (failed(checkLinear(op, getX(), getW(), getB(), shape)) ||
      failed(checkNamedResult(op, 0, "result", shape, "[..., O]")) ||
      failed(checkNamedResult(op, 1, "pre", shape, "[..., O]")))
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

LogicalResult RopeTableGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkTableInputs(op, getPos(), getFreqs())))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getPos()), f = shapeOf(getFreqs());
  if (failed(checkStatic(op, getDy(), "dy", 3)) ||
      failed(checkShape(op, getDy(), "dy", {p[0], f[0], 2},
                        "the table shape [T, P, 2]")))
    return failure();
  return checkNamedResult(op, 0, "dfreqs", f, "the shape of 'freqs'");
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
  return checkNamedResult(op, 0, "dtable", {xs[1], xs[2] / 2, 2},
                          "[T, D/2, 2]");
}

LogicalResult CayleyWeightGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkStatic(op, getS(), "s", 2)))
    return failure();
  ArrayRef<int64_t> s = shapeOf(getS());
  if (failed(checkShape(op, getS(), "s", {s[0], s[0]}, "[D, D]")) ||
      failed(checkShape(op, getDw(), "dw", s, "the shape of 's'")))
    return failure();
  return checkNamedResult(op, 0, "ds", s, "the shape of 's'");
}

LogicalResult RopeAttentionGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkRopeAttention(op, getQ(), getK(), getV(), getTable(),
                                getHeadsAttr().getInt(),
                                getScaleAttr().getValueAsDouble(), getMask())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQ());
  if (failed(checkShape(op, getDy(), "dy", q, "the shape of 'q'")))
    return failure();
  for (auto [index, name] :
       llvm::enumerate(ArrayRef<StringRef>{"dq", "dk", "dv"}))
    if (failed(checkNamedResult(op, index, name, q, "the shape of 'q'")))
      return failure();
  return success();
}
