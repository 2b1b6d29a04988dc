//===- PELayerOps.cpp - verifiers of the network-layer ops ----------------===//
//
// Shape rules of the ops in PELayerOps.td. Element types are checked by ODS;
// ranks, static-vs-dynamic dimensions and shape agreement here.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PEVerify.h"

using namespace mlir;
using namespace mlir::pe;
using namespace mlir::pe::verify;

/// The result of a shape-preserving op has the type of operand `x`.
static LogicalResult checkSameAsInput(Operation *op, Value x) {
  return checkResultShape(op, shapeOf(x));
}

LogicalResult LinearOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", kAnyRank, 1)) ||
      failed(checkStatic(op, getW(), "w", 2)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX()), w = shapeOf(getW());
  if (w[0] != x.back())
    return emitOpError() << "operand 'w' must have " << x.back()
                         << " rows (the last dimension of 'x'), got "
                         << getW().getType();
  if (getB() && (failed(checkStatic(op, getB(), "b", 1)) ||
                 failed(checkShape(op, getB(), "b", {w[1]}, "[O]"))))
    return failure();
  return checkResultShape(op, replaceLast(x, {w[1]}));
}

LogicalResult LayerNormOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", kAnyRank, 1)))
    return failure();
  int64_t d = shapeOf(getX()).back();
  if (failed(checkStatic(op, getGamma(), "gamma", 1)) ||
      failed(checkStatic(op, getBeta(), "beta", 1)) ||
      failed(checkShape(op, getGamma(), "gamma", {d}, "[D]")) ||
      failed(checkShape(op, getBeta(), "beta", {d}, "[D]")))
    return failure();
  if (double eps = getEpsilon().convertToDouble(); !(eps > 0))
    return emitOpError() << "epsilon must be positive, got " << numStr(eps);
  return checkSameAsInput(op, getX());
}

LogicalResult GeluOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  return checkSameAsInput(*this, getX());
}

LogicalResult ReluOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  return checkSameAsInput(*this, getX());
}

/// Shared by add, sub and mul: equal shapes, or the lower-rank shape equals
/// the trailing dimensions of the other; the result has the longer shape.
static LogicalResult verifyBroadcast(Operation *op, Value lhs, Value rhs) {
  if (failed(checkActivation(op, lhs, "lhs", kAnyRank)) ||
      failed(checkActivation(op, rhs, "rhs", kAnyRank)))
    return failure();
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs);
  ArrayRef<int64_t> longer = a.size() >= b.size() ? a : b;
  ArrayRef<int64_t> shorter = a.size() >= b.size() ? b : a;
  if (longer.take_back(shorter.size()) != shorter)
    return op->emitOpError()
           << "operand shapes " << shapeStr(a) << " and " << shapeStr(b)
           << " do not broadcast: the lower-rank shape must equal the "
              "trailing dimensions of the other";
  return checkResultShape(op, longer);
}

LogicalResult AddOp::verify() {
  return verifyBroadcast(*this, getLhs(), getRhs());
}
LogicalResult SubOp::verify() {
  return verifyBroadcast(*this, getLhs(), getRhs());
}
LogicalResult MulOp::verify() {
  return verifyBroadcast(*this, getLhs(), getRhs());
}

LogicalResult ScaleOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  return checkSameAsInput(*this, getX());
}

LogicalResult MeanOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", kAnyRank)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  if (!getAxisAttr())
    return checkResultShape(op, {});
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= static_cast<int64_t>(x.size()))
    return emitOpError() << "axis " << axis << " is out of range for operand "
                         << "'x' of rank " << x.size();
  return checkResultShape(op, dropDim(x, axis));
}

LogicalResult PatchEmbedOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getImage(), "image", 4)) ||
      failed(checkStatic(op, getW(), "w", 2)) ||
      failed(checkStatic(op, getB(), "b", 1)))
    return failure();
  int64_t p = getPatchAttr().getInt();
  if (p <= 0)
    return emitOpError() << "patch must be positive, got " << p;
  ArrayRef<int64_t> img = shapeOf(getImage()), w = shapeOf(getW());
  int64_t c = img[1], h = img[2], wd = img[3];
  if (h % p != 0 || wd % p != 0)
    return emitOpError() << "patch " << p << " must divide the image height "
                         << h << " and width " << wd;
  if (w[0] != c * p * p)
    return emitOpError() << "operand 'w' must have C*p*p = " << c * p * p
                         << " rows, got " << getW().getType();
  if (failed(checkShape(op, getB(), "b", {w[1]}, "[D]")))
    return failure();
  return checkResultShape(op, {img[0], (h / p) * (wd / p), w[1]});
}

LogicalResult TokenEmbedOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getIds(), "ids", 2)) ||
      failed(checkStatic(op, getTable(), "table", 2)))
    return failure();
  ArrayRef<int64_t> ids = shapeOf(getIds());
  return checkResultShape(op, {ids[0], ids[1], shapeOf(getTable())[1]});
}

LogicalResult ClassTokenOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", 3)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  if (failed(checkStatic(op, getCls(), "cls", 1)) ||
      failed(checkShape(op, getCls(), "cls", {x[2]}, "[D]")))
    return failure();
  return checkResultShape(op, {x[0], x[1] + 1, x[2]});
}

LogicalResult SelectTokenOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", 3)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t index = getIndexAttr().getInt();
  if (index < 0 || index >= x[1])
    return emitOpError() << "index " << index << " is out of range for "
                         << x[1] << " tokens";
  return checkResultShape(op, {x[0], x[2]});
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getQ(), "q", 3)))
    return failure();
  if (getK().getType() != getQ().getType() ||
      getV().getType() != getQ().getType())
    return emitOpError() << "operands 'q', 'k' and 'v' must have the same "
                            "type, got "
                         << getQ().getType() << ", " << getK().getType()
                         << ", " << getV().getType();
  ArrayRef<int64_t> q = shapeOf(getQ());
  int64_t heads = getHeadsAttr().getInt();
  if (heads <= 0 || q[2] % heads != 0)
    return emitOpError() << "heads (" << heads
                         << ") must be positive and divide the model width "
                         << q[2];
  int64_t dh = q[2] / heads;
  if (getRel() && (failed(checkStatic(op, getRel(), "rel", 4)) ||
                   failed(checkShape(op, getRel(), "rel", {q[1], q[1], dh, dh},
                                     "[T, T, Dh, Dh]"))))
    return failure();
  if (double scale = getScaleAttr().getValueAsDouble(); !(scale > 0))
    return emitOpError() << "scale must be positive, got " << numStr(scale);
  bool skip = getMask() == MaskKind::Skip;
  if (skip && !getSkipBaseAttr())
    return emitOpError() << "mask 'skip' requires skip_base";
  if (!skip && getSkipBaseAttr())
    return emitOpError() << "skip_base applies only to mask 'skip'";
  if (skip && getSkipBaseAttr().getInt() < 0)
    return emitOpError() << "skip_base must be non-negative, got "
                         << getSkipBaseAttr().getInt();
  return checkSameAsInput(op, getQ());
}

LogicalResult CrossEntropyOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getLogits(), "logits", kAnyRank, 1)) ||
      failed(checkActivation(op, getLabels(), "labels", kAnyRank)))
    return failure();
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  // Rank-1 logits have no batch dimension, so their one dimension is C.
  if (ShapedType::isDynamic(logits.back()))
    return emitOpError() << "the class dimension of 'logits' must be static, "
                            "got "
                         << getLogits().getType();
  if (shapeOf(getLabels()) != logits.drop_back())
    return emitOpError() << "operand 'labels' must have shape "
                         << shapeStr(logits.drop_back())
                         << " (the shape of 'logits' without its last "
                            "dimension), got "
                         << getLabels().getType();
  return success();
}
