//===- PELayerOps.cpp - the network-layer ops -----------------------------===//
//
// What the ops of PELayerOps.td need beyond their ODS, each forward op
// beside its backward ops: the shape rules (element types are checked by
// ODS; ranks, static-vs-dynamic dimensions and shape agreement here; a
// backward op follows its forward op's rules on the operands they share,
// `dy` has the forward result's shape and each result `d<name>` the shape of
// the forward operand `<name>`), the vector-Jacobian products and the costs.
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

LogicalResult LinearGradInputOp::verify() {
  Operation *op = getOperation();
  if (failed(checkLinearWeight(op, getDy(), "dy", getW(), 1)))
    return failure();
  ArrayRef<int64_t> dy = shapeOf(getDy()), w = shapeOf(getW());
  return checkResult(op, 0, "dx", replaceLast(dy, {w[0]}), "[..., I]");
}

LogicalResult LinearGradWeightOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", kAnyRank, 1)) ||
      failed(checkActivation(op, getDy(), "dy", kAnyRank, 1)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX()), dy = shapeOf(getDy());
  // Rank-1 operands have no batch: their one dimension is I (or O).
  if (ShapedType::isDynamic(x.back()))
    return emitOpError() << "the last dimension of 'x' must be static, got "
                         << getX().getType();
  if (ShapedType::isDynamic(dy.back()))
    return emitOpError() << "the last dimension of 'dy' must be static, got "
                         << getDy().getType();
  if (failed(checkDy(op, getDy(), replaceLast(x, {dy.back()}),
                     "the leading dimensions of 'x', then O")))
    return failure();
  return checkResult(op, 0, "dw", {x.back(), dy.back()}, "[I, O]");
}

LogicalResult LayerNormOp::verify() {
  Operation *op = getOperation();
  if (failed(checkLayerNorm(op, getX(),
                            {{getGamma(), "gamma"}, {getBeta(), "beta"}},
                            getEpsilon().convertToDouble())))
    return failure();
  return checkSameAsInput(op, getX());
}

LogicalResult LayerNormGradOp::verify() {
  return checkLayerNormGrad(getOperation(), getX(), getGamma(), getDy(),
                            getEpsilon().convertToDouble());
}

LogicalResult GeluOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  return checkSameAsInput(*this, getX());
}

/// Shared by gelu_grad and relu_grad: `x`, `dy` and `dx` of one shape.
static LogicalResult verifyElementwiseGrad(Operation *op, Value x, Value dy) {
  if (failed(checkActivation(op, x, "x", kAnyRank)) ||
      failed(checkDy(op, dy, shapeOf(x), "the shape of 'x'")))
    return failure();
  return checkResult(op, 0, "dx", shapeOf(x), "the shape of 'x'");
}

LogicalResult GeluGradOp::verify() {
  return verifyElementwiseGrad(*this, getX(), getDy());
}

LogicalResult ReluOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  return checkSameAsInput(*this, getX());
}

LogicalResult ReluGradOp::verify() {
  return verifyElementwiseGrad(*this, getX(), getDy());
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

LogicalResult SumToOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (result.size() > x.size() || x.take_back(result.size()) != result)
    return emitOpError() << "result shape " << shapeStr(result)
                         << " must be a trailing suffix of the shape "
                         << shapeStr(x) << " of 'x'";
  return success();
}

LogicalResult BroadcastToOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  auto type = getResult().getType();
  ArrayRef<int64_t> x = shapeOf(getX()), result = type.getShape();
  for (size_t i = 1; i < result.size(); ++i)
    if (ShapedType::isDynamic(result[i]))
      return emitOpError() << "result may be dynamic only in dimension 0 "
                              "(the batch), got "
                           << type;
  if (x.size() > result.size() || result.take_back(x.size()) != x)
    return emitOpError() << "the shape " << shapeStr(x)
                         << " of 'x' must be a trailing suffix of the result "
                            "shape "
                         << shapeStr(result);
  if (getLike())
    return checkShape(*this, getLike(), "like", result, "the result shape");
  if (result.size() > x.size() && ShapedType::isDynamic(result[0]))
    return emitOpError() << "a dynamic dimension 0 that 'x' does not have "
                            "needs operand 'like' to give its size";
  return success();
}

LogicalResult ExpandAxisOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t axis = getAxisAttr().getInt(), size = getSizeAttr().getInt();
  auto rank = static_cast<int64_t>(x.size());
  if (axis < 0 || axis > rank)
    return emitOpError() << "axis " << axis << " is out of range [0, " << rank
                         << "] for operand 'x' of rank " << rank;
  if (size <= 0)
    return emitOpError() << "size must be positive, got " << size;
  if (axis == 0 && rank > 0 && ShapedType::isDynamic(x[0]))
    return emitOpError() << "axis 0 would move the dynamic batch dimension "
                            "of 'x' out of dimension 0";
  SmallVector<int64_t> expected(x.begin(), x.end());
  expected.insert(expected.begin() + axis, size);
  std::string what = "the shape of 'x' with " + std::to_string(size) +
                     " inserted at axis " + std::to_string(axis);
  return checkResult(*this, 0, "result", expected, what);
}

LogicalResult ScaleOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank)))
    return failure();
  return checkSameAsInput(*this, getX());
}

LogicalResult DropoutOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank, 1)))
    return failure();
  if (!ShapedType::isDynamic(shapeOf(getX())[0]))
    return emitOpError() << "'x' must have the batch dimension first (the "
                            "mask is drawn per sample), found "
                         << shapeStr(shapeOf(getX()));
  const double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0)) // NaN fails too
    return emitOpError() << "p must be in [0, 1), found " << numStr(p);
  if (getStream() < 0 || getStream() > INT32_MAX)
    return emitOpError() << "stream must be in [0, 2^31), found "
                         << getStream();
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

LogicalResult MeanGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getX(), "x", kAnyRank)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  if (!getAxisAttr()) {
    if (failed(checkDy(op, getDy(), {}, "a scalar: the mean of every element")))
      return failure();
  } else {
    int64_t axis = getAxisAttr().getInt();
    if (failed(checkMeanAxis(op, axis, x.size())) ||
        failed(
            checkDy(op, getDy(), dropDim(x, axis),
                    "the shape of 'x' without axis " + std::to_string(axis))))
      return failure();
  }
  return checkResult(op, 0, "dx", x, "the shape of 'x'");
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

LogicalResult PatchEmbedGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getImage(), "image", 4)) ||
      failed(checkActivation(op, getDy(), "dy", 3)))
    return failure();
  int64_t p = getPatchAttr().getInt();
  if (failed(checkPatch(op, getImage(), p)))
    return failure();
  ArrayRef<int64_t> img = shapeOf(getImage()), dy = shapeOf(getDy());
  int64_t c = img[1], h = img[2], wd = img[3];
  if (failed(checkDy(op, getDy(), {img[0], (h / p) * (wd / p), dy[2]},
                     "[B, (H/p)*(W/p), D]")) ||
      failed(checkResult(op, 0, "dw", {c * p * p, dy[2]}, "[C*p*p, D]")) ||
      failed(checkResult(op, 1, "db", {dy[2]}, "[D]")))
    return failure();
  return success();
}

LogicalResult TokenEmbedOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getIds(), "ids", 2)) ||
      failed(checkStatic(op, getTable(), "table", 2)))
    return failure();
  ArrayRef<int64_t> ids = shapeOf(getIds());
  return checkResultShape(op, {ids[0], ids[1], shapeOf(getTable())[1]});
}

LogicalResult TokenEmbedGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getIds(), "ids", 2)) ||
      failed(checkActivation(op, getDy(), "dy", 3)))
    return failure();
  ArrayRef<int64_t> ids = shapeOf(getIds()), dy = shapeOf(getDy());
  if (failed(checkDy(op, getDy(), {ids[0], ids[1], dy[2]},
                     "[B, T, D], B and T those of 'ids'")) ||
      failed(checkResultRank(op, 0, "dtable", 2, /*staticAll=*/true,
                             "a static [V, D] table")))
    return failure();
  int64_t vocab = getDtable().getType().getDimSize(0);
  return checkResult(op, 0, "dtable", {vocab, dy[2]}, "[V, D]");
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

LogicalResult ClassTokenGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getDy(), "dy", 3)))
    return failure();
  ArrayRef<int64_t> dy = shapeOf(getDy());
  if (dy[1] < 1)
    return emitOpError() << "operand 'dy' must have at least one token (the "
                            "class token), got "
                         << getDy().getType();
  if (failed(
          checkResult(op, 0, "dx", {dy[0], dy[1] - 1, dy[2]}, "[B, N, D]")) ||
      failed(checkResult(op, 1, "dcls", {dy[2]}, "[D]")))
    return failure();
  return success();
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

LogicalResult SelectTokenGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkActivation(op, getDy(), "dy", 2)) ||
      failed(checkResultRank(op, 0, "dx", 3, /*staticAll=*/false,
                             "[B, T, D] with static T and D")))
    return failure();
  ArrayRef<int64_t> dy = shapeOf(getDy());
  int64_t tokens = getDx().getType().getDimSize(1);
  if (failed(checkTokenIndex(op, getIndexAttr().getInt(), tokens)))
    return failure();
  return checkResult(op, 0, "dx", {dy[0], tokens, dy[1]}, "[B, T, D]");
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(checkAttention(op, getQ(), getK(), getV(), getRel(),
                            getHeadsAttr().getInt(),
                            getScaleAttr().getValueAsDouble(),
                            getMask() == MaskKind::Skip, getSkipBaseAttr())))
    return failure();
  if (getLse() &&
      failed(checkResult(op, 1, "lse",
                         attentionLseShape(getQ(), getHeadsAttr().getInt()),
                         "[B, heads, T]")))
    return failure();
  return checkSameAsInput(op, getQ());
}

LogicalResult AttentionGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkAttention(op, getQ(), getK(), getV(), getRel(),
                            getHeadsAttr().getInt(),
                            getScaleAttr().getValueAsDouble(),
                            getMask() == MaskKind::Skip, getSkipBaseAttr())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQ());
  if (failed(checkAttentionSaved(op, getQ(), getY(), getLse(),
                                 getHeadsAttr().getInt())) ||
      failed(checkDy(op, getDy(), q, "the shape of 'q'")))
    return failure();
  if (getRel() && !getDrel())
    return emitOpError() << "operand 'rel' needs a fourth result 'drel'";
  if (!getRel() && getDrel())
    return emitOpError() << "result 'drel' needs operand 'rel'";
  if (failed(checkResult(op, 0, "dq", q, "the shape of 'q'")) ||
      failed(checkResult(op, 1, "dk", q, "the shape of 'k'")) ||
      failed(checkResult(op, 2, "dv", q, "the shape of 'v'")))
    return failure();
  if (getDrel())
    return checkResult(op, 3, "drel", shapeOf(getRel()), "the shape of 'rel'");
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  return checkCrossEntropy(*this, getLogits(), getLabels(),
                           getSmoothing().convertToDouble());
}

LogicalResult CrossEntropyGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkCrossEntropy(op, getLogits(), getLabels(),
                               getSmoothing().convertToDouble())))
    return failure();
  return checkResult(op, 0, "dlogits", shapeOf(getLogits()),
                     "the shape of 'logits'");
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products (DifferentiableOpInterface)
//
// In the forms of docs/autodiff.md: forward ops where they suffice (scale,
// mul, sum_to), the backward ops above otherwise. Each pushes one gradient
// per operand, null for integer ids and labels and for the image.
//===----------------------------------------------------------------------===//

/// The gradient of an operand of type `target` that was broadcast to the
/// shape of `grad`: `grad` itself, or its sum over the leading dimensions.
static Value sumTo(OpBuilder &builder, Location loc, Value grad, Type target) {
  if (grad.getType() == target)
    return grad;
  return builder.create<SumToOp>(loc, target, grad);
}

static Value negate(OpBuilder &builder, Location loc, Value x) {
  return builder.create<ScaleOp>(loc, x.getType(), x, APFloat(-1.0),
                                 APFloat(0.0));
}

LogicalResult LinearOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(
      builder.create<LinearGradInputOp>(loc, getX().getType(), dy, getW()));
  operandGrads.push_back(
      builder.create<LinearGradWeightOp>(loc, getW().getType(), getX(), dy));
  if (getB())
    operandGrads.push_back(sumTo(builder, loc, dy, getB().getType()));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<LayerNormGradOp>(
      getLoc(), getX().getType(), getGamma().getType(), getBeta().getType(),
      getX(), getGamma(), resultGrads[0], getEpsilonAttr());
  operandGrads.append({grad.getDx(), grad.getDgamma(), grad.getDbeta()});
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<GeluGradOp>(getLoc(), getX().getType(),
                                                    getX(), resultGrads[0],
                                                    getApproximateAttr()));
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<ReluGradOp>(getLoc(), getX().getType(),
                                                    getX(), resultGrads[0]));
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads.push_back(sumTo(builder, getLoc(), dy, getLhs().getType()));
  operandGrads.push_back(sumTo(builder, getLoc(), dy, getRhs().getType()));
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(sumTo(builder, loc, dy, getLhs().getType()));
  // Negate after reducing: the smaller tensor.
  operandGrads.push_back(
      negate(builder, loc, sumTo(builder, loc, dy, getRhs().getType())));
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  // Each operand's shape is a suffix of dy's, so the products have dy's type.
  Value dyRhs = builder.create<MulOp>(loc, dy.getType(), dy, getRhs());
  Value dyLhs = builder.create<MulOp>(loc, dy.getType(), dy, getLhs());
  operandGrads.push_back(sumTo(builder, loc, dyRhs, getLhs().getType()));
  operandGrads.push_back(sumTo(builder, loc, dyLhs, getRhs().getType()));
  return success();
}

LogicalResult ScaleOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<ScaleOp>(
      getLoc(), getX().getType(), resultGrads[0], getFactor(), APFloat(0.0)));
  return success();
}

/// Linear in x for a fixed mask: dx = dy * keep / (1 - p), the same op on
/// dy, whose mask (same stream, step and samples) is the forward's.
LogicalResult DropoutOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<DropoutOp>(
      getLoc(), getX().getType(), resultGrads[0], getPAttr(), getStreamAttr(),
      getPerSampleAttr()));
  return success();
}

/// dx = dy repeated over the averaged elements, divided by their count.
/// pe.mean_grad reads the count from the shape of x at run time, so one form
/// serves every mean, the dynamic batch dimension included.
LogicalResult MeanOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<MeanGradOp>(
      getLoc(), getX().getType(), getX(), resultGrads[0], getAxisAttr()));
  return success();
}

LogicalResult PatchEmbedOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<PatchEmbedGradOp>(getLoc(), getW().getType(),
                                               getB().getType(), getImage(),
                                               resultGrads[0], getPatchAttr());
  operandGrads.append({Value(), grad.getDw(), grad.getDb()});
  return success();
}

LogicalResult TokenEmbedOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value());
  operandGrads.push_back(builder.create<TokenEmbedGradOp>(
      getLoc(), getTable().getType(), getIds(), resultGrads[0]));
  return success();
}

LogicalResult ClassTokenOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<ClassTokenGradOp>(
      getLoc(), getX().getType(), getCls().getType(), resultGrads[0]);
  operandGrads.append({grad.getDx(), grad.getDcls()});
  return success();
}

LogicalResult SelectTokenOp::buildVJP(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SelectTokenGradOp>(
      getLoc(), getX().getType(), resultGrads[0], getIndexAttr()));
  return success();
}

/// The log-sum-exp result type of an attention op on `q`: f32 [B, heads, T].
static Type lseType(Value q, int64_t heads) {
  return RankedTensorType::get(verify::attentionLseShape(q, heads),
                               Float32Type::get(q.getContext()));
}

/// The copy of an attention op (same operands and attributes) with its
/// log-sum-exp as a second result; null when it has it already.
template <typename Op>
static Operation *withLse(Op op, OpBuilder &builder) {
  if (op.getLse())
    return nullptr;
  OperationState state(op.getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.addAttributes(op->getAttrs());
  state.addTypes({op.getResult().getType(),
                  lseType(op.getQ(), op.getHeadsAttr().getInt())});
  return builder.create(state);
}

Operation *AttentionOp::withSavedResults(OpBuilder &builder) {
  return withLse(*this, builder);
}

/// The backward reads the forward's result and log-sum-exp (pe-autodiff
/// asked for it through withSavedResults before building this product).
LogicalResult AttentionOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (!getLse())
    return emitOpError() << "cannot differentiate without its 'lse' result "
                            "(pe-autodiff adds it)";
  Type type = getQ().getType();
  Type relType = getRel() ? getRel().getType() : Type();
  auto grad = builder.create<AttentionGradOp>(
      getLoc(), type, type, type, relType, getQ(), getK(), getV(), getResult(),
      getLse(), resultGrads[0], getRel(), getHeadsAttr(), getScaleAttr(),
      getMaskAttr(), getSkipBaseAttr());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv()});
  if (getRel())
    operandGrads.push_back(grad.getDrel());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<CrossEntropyGradOp>(
      getLoc(), getLogits().getType(), getLogits(), getLabels(),
      resultGrads[0], getSmoothingAttr()));
  operandGrads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// FLOPs (CostOpInterface, docs/dialect.md)
//===----------------------------------------------------------------------===//

/// Softmax attention: QK^T, the softmax, PV, per head; `relative` adds the
/// q_i^T R_ij products of relative-position attention.
static double attentionForward(Operation *op, int64_t heads, bool relative, int64_t batch) {
  Value q = op->getOperand(0);
  double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
  double headDim = d / double(heads);
  double pairs = b * double(heads) * t * t;
  double forward = 2 * pairs * headDim * 2 + 5 * pairs;
  if (relative)
    forward += 2 * pairs * headDim * headDim;
  return forward;
}

double LinearOp::estimateFlops(int64_t batch) {
  double out = resultElements(*this, batch);
  return 2 * out * dimFromEnd((*this)->getOperand(1), 1, batch) + ((*this)->getNumOperands() > 2 ? out : 0);
}

double LinearGradInputOp::estimateFlops(int64_t batch) { // dy W^T: inner O
  return 2 * resultElements(*this, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}

double LinearGradWeightOp::estimateFlops(int64_t batch) { // x^T dy: inner rows
  return 2 * operandElements(*this, 0, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}

double LayerNormOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 10); }
double LayerNormGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 10); }
double GeluOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 20); }
double GeluGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 20); }
double ReluOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ReluGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double AddOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SubOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double MulOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SumToOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double BroadcastToOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ExpandAxisOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ScaleOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double DropoutOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 2); }
double MeanOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double MeanGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }

double PatchEmbedOp::estimateFlops(int64_t batch) {
  double out = resultElements(*this, batch);
  return 2 * out * dimFromEnd((*this)->getOperand(1), 1, batch) + ((*this)->getNumOperands() > 2 ? out : 0);
}

double PatchEmbedGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double TokenEmbedOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double TokenEmbedGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ClassTokenOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ClassTokenGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SelectTokenOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SelectTokenGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }

double AttentionOp::estimateFlops(int64_t batch) {
  return attentionForward(*this, getHeads(), (*this)->getNumOperands() > 3, batch);
}

double AttentionGradOp::estimateFlops(int64_t batch) {
  return 2.5 * attentionForward(*this, getHeads(), (*this)->getNumOperands() > 4, batch);
}

double CrossEntropyOp::estimateFlops(int64_t batch) {
  return 5 * operandElements(*this, 0, batch);
}

double CrossEntropyGradOp::estimateFlops(int64_t batch) {
  return 5 * operandElements(*this, 0, batch);
}
