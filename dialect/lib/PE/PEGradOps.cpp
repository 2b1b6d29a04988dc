//===- PEGradOps.cpp - verifiers of the backward ops ----------------------===//
//
// Shape rules of the ops in PEGradOps.td: the rules of the forward op on the
// operands it shares with it, `dy` of the forward result's shape, and each
// result `d<name>` of the shape of the forward operand `<name>`.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PEVerify.h"

using namespace mlir;
using namespace mlir::pe;
using namespace mlir::pe::verify;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Result `index`, called `name`, has `shape`; `what` says where the shape
/// comes from, e.g. "the shape of 'x'".
static LogicalResult checkResult(Operation *op, unsigned index, StringRef name,
                                 ArrayRef<int64_t> shape, StringRef what) {
  auto type = cast<RankedTensorType>(op->getResult(index).getType());
  if (type.getShape() == shape)
    return success();
  return op->emitOpError() << "result '" << name << "' must have shape "
                           << shapeStr(shape) << " (" << what << "), got "
                           << type;
}

/// Operand `dy` has `shape`, the shape of the forward result.
static LogicalResult checkDy(Operation *op, Value dy, ArrayRef<int64_t> shape,
                             StringRef what) {
  return checkShape(op, dy, "dy", shape, what);
}

/// Result `index`, called `name`, has rank `rank` and only dimension 0 may
/// be dynamic (`staticAll`: none may).
static LogicalResult checkResultRank(Operation *op, unsigned index,
                                     StringRef name, int64_t rank,
                                     bool staticAll, StringRef what) {
  auto type = cast<RankedTensorType>(op->getResult(index).getType());
  ArrayRef<int64_t> shape = type.getShape();
  bool ok = static_cast<int64_t>(shape.size()) == rank;
  for (size_t i = staticAll ? 0 : 1; ok && i < shape.size(); ++i)
    ok = !ShapedType::isDynamic(shape[i]);
  if (ok)
    return success();
  return op->emitOpError() << "result '" << name << "' must be " << what
                           << ", got " << type;
}

//===----------------------------------------------------------------------===//
// Broadcasting and reductions
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Network layers
//===----------------------------------------------------------------------===//

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

LogicalResult LayerNormGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkLayerNorm(op, getX(), {{getGamma(), "gamma"}},
                            getEpsilon().convertToDouble())))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t d = x.back();
  if (failed(checkDy(op, getDy(), x, "the shape of 'x'")) ||
      failed(checkResult(op, 0, "dx", x, "the shape of 'x'")) ||
      failed(checkResult(op, 1, "dgamma", {d}, "[D]")) ||
      failed(checkResult(op, 2, "dbeta", {d}, "[D]")))
    return failure();
  return success();
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

LogicalResult ReluGradOp::verify() {
  return verifyElementwiseGrad(*this, getX(), getDy());
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

LogicalResult AttentionGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkAttention(op, getQ(), getK(), getV(), getRel(),
                            getHeadsAttr().getInt(),
                            getScaleAttr().getValueAsDouble(),
                            getMask() == MaskKind::Skip, getSkipBaseAttr())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQ());
  if (failed(checkDy(op, getDy(), q, "the shape of 'q'")))
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

LogicalResult CrossEntropyGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkCrossEntropy(op, getLogits(), getLabels(),
                               getSmoothing().convertToDouble())))
    return failure();
  return checkResult(op, 0, "dlogits", shapeOf(getLogits()),
                     "the shape of 'logits'");
}

//===----------------------------------------------------------------------===//
// Positional encodings
//===----------------------------------------------------------------------===//

/// Shared by rope_grad_freqs and householder_grad_freqs: the rules of
/// pe.rope / pe.householder (checkPairRotation), `dy` of the shape of `x`,
/// and result `i` (`d<table>`) of the shape of table `i`.
static LogicalResult
verifyPairRotationGrad(Operation *op, Value x, Value pos,
                       ArrayRef<std::pair<Value, StringRef>> tables, Value dy) {
  if (failed(checkPairRotation(op, x, pos, tables)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x);
  SmallVector<int64_t, 2> tableShape = {xs[2] / 2, shapeOf(pos)[1]};
  if (failed(checkDy(op, dy, xs, "the shape of 'x'")))
    return failure();
  for (auto [index, table] : llvm::enumerate(tables)) {
    std::string name = ("d" + table.second).str();
    std::string what = ("the shape of '" + table.second + "'").str();
    if (failed(checkResult(op, index, name, tableShape, what)))
      return failure();
  }
  return success();
}

LogicalResult RopeGradFreqsOp::verify() {
  return verifyPairRotationGrad(*this, getX(), getPos(),
                                {{getFreqs(), "freqs"}}, getDy());
}

LogicalResult HouseholderGradFreqsOp::verify() {
  return verifyPairRotationGrad(*this, getX(), getPos(),
                                {{getF1(), "f1"}, {getF2(), "f2"}}, getDy());
}

LogicalResult SkewGradOp::verify() {
  if (failed(checkStatic(*this, getDy(), "dy", kAnyRank, 2)))
    return failure();
  int64_t dim = getDimAttr().getInt();
  if (failed(checkSkewDim(*this, dim)))
    return failure();
  ArrayRef<int64_t> dy = shapeOf(getDy());
  ArrayRef<int64_t> lead = dy.drop_back(2);
  SmallVector<int64_t> matrices(lead.begin(), lead.end());
  SmallVector<int64_t> params(lead.begin(), lead.end());
  matrices.append({dim, dim});
  params.push_back(pairCount(dim));
  if (failed(checkDy(*this, getDy(), matrices, "[..., dim, dim]")))
    return failure();
  return checkResult(*this, 0, "dparams", params, "[..., dim*(dim-1)/2]");
}

LogicalResult SparseSkewGradOp::verify() {
  if (failed(checkStatic(*this, getDy(), "dy", 2)))
    return failure();
  int64_t dim = getDimAttr().getInt();
  ArrayRef<int64_t> support = getSupport();
  if (failed(checkSkewDim(*this, dim)) ||
      failed(checkSupport(*this, support, dim)) ||
      failed(checkDy(*this, getDy(), {dim, dim}, "[dim, dim]")))
    return failure();
  auto k = static_cast<int64_t>(support.size());
  return checkResult(*this, 0, "dparams", {k}, "[K], one per support index");
}

LogicalResult CayleyGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkCayley(op, getX(), getS())))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t d = x.back();
  if (failed(checkDy(op, getDy(), x, "the shape of 'x'")) ||
      failed(checkResult(op, 0, "dx", x, "the shape of 'x'")) ||
      failed(checkResult(op, 1, "ds", {d, d}, "the shape of 's'")))
    return failure();
  return success();
}

LogicalResult GeneratorExpGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkGeneratorExp(op, getR(), getGenerators())))
    return failure();
  ArrayRef<int64_t> r = shapeOf(getR()), g = shapeOf(getGenerators());
  if (failed(checkDy(op, getDy(), replaceLast(r, {g[1], g[2]}),
                     "[..., d, d], the shape of the forward result")))
    return failure();
  return checkResult(op, 0, "dgenerators", g, "the shape of 'generators'");
}

LogicalResult ApplyRotationGradOp::verify() {
  Operation *op = getOperation();
  int64_t heads = getHeadsAttr().getInt();
  if (failed(checkApplyRotation(op, getX(), getRotations(), heads)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t dh = x[2] / heads;
  SmallVector<int64_t, 3> rotations = {x[1], dh, dh};
  if (failed(checkDy(op, getDy(), x, "the shape of 'x'")) ||
      failed(checkResult(op, 0, "dx", x, "the shape of 'x'")) ||
      failed(checkResult(op, 1, "drotations", rotations,
                         "the shape of 'rotations'")))
    return failure();
  return success();
}

LogicalResult CommutatorNormGradOp::verify() {
  if (failed(checkCommutatorNorm(*this, getGenerators())))
    return failure();
  ArrayRef<int64_t> g = shapeOf(getGenerators());
  return checkResult(*this, 0, "dgenerators", g, "the shape of 'generators'");
}

LogicalResult SpdGateGradOp::verify() {
  Operation *op = getOperation();
  if (failed(checkSpdGate(op, getX(), getGamma())))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX()), g = shapeOf(getGamma());
  if (failed(checkDy(op, getDy(), x, "the shape of 'x'")) ||
      failed(checkResult(op, 0, "dx", x, "the shape of 'x'")) ||
      failed(checkResult(op, 1, "dgamma", g, "the shape of 'gamma'")))
    return failure();
  return success();
}
