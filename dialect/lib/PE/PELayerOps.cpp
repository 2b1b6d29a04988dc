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
  if (failed(checkLinearWeight(op, getX(), "x", getW(), 0)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX()), w = shapeOf(getW());
  if (getB() && (failed(checkStatic(op, getB(), "b", 1)) ||
                 failed(checkShape(op, getB(), "b", {w[1]}, "[O]"))))
    return failure();
  return checkResultShape(op, replaceLast(x, {w[1]}));
}

LogicalResult LayerNormOp::verify() {
  Operation *op = getOperation();
  if (failed(checkLayerNorm(op, getX(),
                            {{getGamma(), "gamma"}, {getBeta(), "beta"}},
                            getEpsilon().convertToDouble())))
    return failure();
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
  if (failed(checkMeanAxis(op, axis, x.size())))
    return failure();
  return checkResultShape(op, dropDim(x, axis));
}

LogicalResult PatchEmbedOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getImage(), "image", 4)) ||
      failed(checkStatic(op, getW(), "w", 2)) ||
      failed(checkStatic(op, getB(), "b", 1)))
    return failure();
  int64_t p = getPatchAttr().getInt();
  if (failed(checkPatch(op, getImage(), p)))
    return failure();
  ArrayRef<int64_t> img = shapeOf(getImage()), w = shapeOf(getW());
  int64_t c = img[1], h = img[2], wd = img[3];
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
  if (failed(checkTokenIndex(op, getIndexAttr().getInt(), x[1])))
    return failure();
  return checkResultShape(op, {x[0], x[2]});
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(checkAttention(op, getQ(), getK(), getV(), getRel(),
                            getHeadsAttr().getInt(),
                            getScaleAttr().getValueAsDouble(),
                            getMask() == MaskKind::Skip, getSkipBaseAttr())))
    return failure();
  return checkSameAsInput(op, getQ());
}

LogicalResult CrossEntropyOp::verify() {
  return checkCrossEntropy(*this, getLogits(), getLabels(),
                           getSmoothing().convertToDouble());
}
