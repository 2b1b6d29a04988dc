//===- PEPositionOps.cpp - the positional-encoding ops --------------------===//
//
// What the ops of PEPositionOps.td need beyond their ODS, each forward op
// beside its backward op: the shape rules (positions, frequency tables, skew
// matrices, generators and rotations are fully static; only the activations
// they transform have a dynamic batch dimension), the vector-Jacobian
// products and the costs.
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

LogicalResult SeqPositionsOp::verify() {
  int64_t length = getLengthAttr().getInt();
  auto special = static_cast<int64_t>(getSpecial());
  if (length <= 0)
    return emitOpError() << "length must be positive, got " << length;
  if (special < 0)
    return emitOpError() << "special must be non-negative, got " << special;
  return checkResultShape(*this, {special + length, 1});
}

LogicalResult GridPositionsOp::verify() {
  int64_t rows = getRowsAttr().getInt(), cols = getColsAttr().getInt();
  auto special = static_cast<int64_t>(getSpecial());
  if (rows <= 0 || cols <= 0)
    return emitOpError() << "rows and cols must be positive, got " << rows
                         << " x " << cols;
  if (special < 0)
    return emitOpError() << "special must be non-negative, got " << special;
  return checkResultShape(*this, {special + rows * cols, 2});
}

LogicalResult RopeFreqsOp::verify() {
  int64_t dim = getDimAttr().getInt(), heads = getHeadsAttr().getInt();
  if (dim <= 0)
    return emitOpError() << "dim must be positive, got " << dim;
  if (heads <= 0 || dim % heads != 0)
    return emitOpError() << "heads (" << heads
                         << ") must be positive and divide dim " << dim;
  int64_t dh = dim / heads;
  bool axial = getKind() == FreqsKind::Axial;
  // Axial splits each head's Dh/2 pairs evenly between the two axes.
  if (int64_t multiple = axial ? 4 : 2; dh % multiple != 0)
    return emitOpError() << "head dimension must be a multiple of "
                         << multiple << " for kind '"
                         << stringifyFreqsKind(getKind()) << "', got " << dh;
  if (failed(checkPositive(*this, "base", getBaseAttr().getValueAsDouble())))
    return failure();
  return checkResultShape(*this, {dim / 2, axial ? 2 : 1});
}

LogicalResult RopeOp::verify() {
  if (failed(checkPairRotation(*this, getX(), getPos(),
                               {{getFreqs(), "freqs"}})) ||
      failed(checkResultShape(*this, shapeOf(getX()))))
    return failure();
  int64_t axes = shapeOf(getPos())[1];
  int64_t expected = getMode() == RopeMode::Seq ? 1 : 2;
  if (axes != expected)
    return emitOpError() << "mode '" << stringifyRopeMode(getMode())
                         << "' needs " << expected << " position axes, got "
                         << axes;
  return success();
}

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

LogicalResult HouseholderOp::verify() {
  if (failed(checkPairRotation(*this, getX(), getPos(),
                               {{getF1(), "f1"}, {getF2(), "f2"}})))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
}

LogicalResult HouseholderGradFreqsOp::verify() {
  return verifyPairRotationGrad(*this, getX(), getPos(),
                                {{getF1(), "f1"}, {getF2(), "f2"}}, getDy());
}

LogicalResult SkewOp::verify() {
  if (failed(checkStatic(*this, getParams(), "params", kAnyRank, 1)))
    return failure();
  int64_t dim = getDimAttr().getInt();
  if (failed(checkSkewDim(*this, dim)))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getParams());
  if (p.back() != pairCount(dim))
    return emitOpError() << "operand 'params' must have dim*(dim-1)/2 = "
                         << pairCount(dim) << " entries in its last "
                         << "dimension, got " << getParams().getType();
  return checkResultShape(*this, replaceLast(p, {dim, dim}));
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

LogicalResult SparseSkewOp::verify() {
  if (failed(checkStatic(*this, getParams(), "params", 1)))
    return failure();
  int64_t dim = getDimAttr().getInt();
  if (failed(checkSkewDim(*this, dim)))
    return failure();
  if (double f = getFractionAttr().getValueAsDouble(); !(f > 0 && f <= 1))
    return emitOpError() << "fraction must be in (0, 1], got " << numStr(f);
  ArrayRef<int64_t> support = getSupport();
  if (failed(checkSupport(*this, support, dim)))
    return failure();
  int64_t k = shapeOf(getParams())[0];
  if (k != static_cast<int64_t>(support.size()))
    return emitOpError() << "operand 'params' must have one entry per "
                         << "support index (" << support.size() << "), got "
                         << getParams().getType();
  return checkResultShape(*this, {dim, dim});
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

LogicalResult CayleyOp::verify() {
  if (failed(checkCayley(*this, getX(), getS())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
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

LogicalResult RelativePositionsOp::verify() {
  if (failed(checkStatic(*this, getPos(), "pos", 2)))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getPos());
  return checkResultShape(*this, {p[0], p[0], p[1]});
}

LogicalResult GeneratorExpOp::verify() {
  if (failed(checkGeneratorExp(*this, getR(), getGenerators())))
    return failure();
  ArrayRef<int64_t> r = shapeOf(getR()), g = shapeOf(getGenerators());
  return checkResultShape(*this, replaceLast(r, {g[1], g[2]}));
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

LogicalResult ApplyRotationOp::verify() {
  if (failed(checkApplyRotation(*this, getX(), getRotations(),
                                getHeadsAttr().getInt())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
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

LogicalResult CommutatorNormOp::verify() {
  return checkCommutatorNorm(*this, getGenerators());
}

LogicalResult CommutatorNormGradOp::verify() {
  if (failed(checkCommutatorNorm(*this, getGenerators())))
    return failure();
  ArrayRef<int64_t> g = shapeOf(getGenerators());
  return checkResult(*this, 0, "dgenerators", g, "the shape of 'generators'");
}

LogicalResult SpdGateOp::verify() {
  if (failed(checkSpdGate(*this, getX(), getGamma())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
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

LogicalResult SinusoidalOp::verify() {
  int64_t length = getLengthAttr().getInt(), dim = getDimAttr().getInt();
  if (length <= 0)
    return emitOpError() << "length must be positive, got " << length;
  if (dim <= 0 || dim % 2 != 0)
    return emitOpError() << "dim must be positive and even, got " << dim;
  if (failed(checkPositive(*this, "base", getBaseAttr().getValueAsDouble())))
    return failure();
  return checkResultShape(*this, {length, dim});
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products (DifferentiableOpInterface)
//
// docs/autodiff.md. Positions and relative positions are constants: their
// operands get a null gradient. The operand-less ops (seq_positions,
// grid_positions, rope_freqs, sinusoidal) and relative_positions do not
// implement the interface.
//===----------------------------------------------------------------------===//

/// The rotation by -theta is the transpose of the rotation by theta, so
/// dx = rope(dy, pos, -freqs).
LogicalResult RopeOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value negFreqs = builder.create<ScaleOp>(
      loc, getFreqs().getType(), getFreqs(), APFloat(-1.0), APFloat(0.0));
  Value dx = builder.create<RopeOp>(loc, getX().getType(), dy, getPos(),
                                    negFreqs, getModeAttr());
  Value dfreqs = builder.create<RopeGradFreqsOp>(
      loc, getFreqs().getType(), getX(), getPos(), getFreqs(), dy);
  operandGrads.append({dx, Value(), dfreqs});
  return success();
}

/// Reflections are symmetric, so the transpose of H(a2) H(a1) is
/// H(a1) H(a2): dx = householder(dy, pos, f2, f1), the swapped angles.
LogicalResult HouseholderOp::buildVJP(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value dx = builder.create<HouseholderOp>(loc, getX().getType(), dy, getPos(),
                                           getF2(), getF1());
  auto dfreqs = builder.create<HouseholderGradFreqsOp>(
      loc, getF1().getType(), getF2().getType(), getX(), getPos(), getF1(),
      getF2(), dy);
  operandGrads.append({dx, Value(), dfreqs.getDf1(), dfreqs.getDf2()});
  return success();
}

LogicalResult SkewOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SkewGradOp>(
      getLoc(), getParams().getType(), resultGrads[0], getDimAttr()));
  return success();
}

LogicalResult SparseSkewOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SparseSkewGradOp>(
      getLoc(), getParams().getType(), resultGrads[0], getDimAttr(),
      getSupportAttr()));
  return success();
}

LogicalResult CayleyOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  auto grad =
      builder.create<CayleyGradOp>(getLoc(), getX().getType(), getS().getType(),
                                   getX(), getS(), resultGrads[0]);
  operandGrads.append({grad.getDx(), grad.getDs()});
  return success();
}

/// Only the generators get a gradient: `r` holds relative positions.
LogicalResult GeneratorExpOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value());
  operandGrads.push_back(builder.create<GeneratorExpGradOp>(
      getLoc(), getGenerators().getType(), getR(), getGenerators(),
      resultGrads[0]));
  return success();
}

LogicalResult ApplyRotationOp::buildVJP(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<ApplyRotationGradOp>(
      getLoc(), getX().getType(), getRotations().getType(), getX(),
      getRotations(), resultGrads[0], getHeadsAttr());
  operandGrads.append({grad.getDx(), grad.getDrotations()});
  return success();
}

LogicalResult CommutatorNormOp::buildVJP(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<CommutatorNormGradOp>(
      getLoc(), getGenerators().getType(), getGenerators(), resultGrads[0]));
  return success();
}

LogicalResult SpdGateOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<SpdGateGradOp>(getLoc(), getX().getType(),
                                            getGamma().getType(), getX(),
                                            getGamma(), resultGrads[0]);
  operandGrads.append({grad.getDx(), grad.getDgamma()});
  return success();
}

//===----------------------------------------------------------------------===//
// FLOPs (CostOpInterface, docs/dialect.md)
//===----------------------------------------------------------------------===//

/// One Cayley transform: the LU of I + S and the per-row solves with I - S.
static double cayleyForward(Operation *op, int64_t batch) {
  double d = dimFromEnd(op->getOperand(0), 0, batch);
  double rows = operandElements(op, 0, batch) / d;
  return 2.0 / 3.0 * d * d * d + 4 * rows * d * d;
}

/// A matrix exponential per position (scaling and squaring: about ten
/// d x d products) from k generators.
static double generatorExpPerMatrix(Operation *op, int64_t batch) {
  double d = dimFromEnd(op->getOperand(1), 0, batch);
  double k = dimFromEnd(op->getOperand(1), 2, batch);
  return 20 * d * d * d + 2 * k * d * d;
}

static double generatorMatrices(Operation *op, int64_t batch) {
  return operandElements(op, 0, batch) / dimFromEnd(op->getOperand(1), 2, batch);
}

double SeqPositionsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double GridPositionsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double RopeFreqsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double RopeOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 8); } // table, 2x2
double RopeGradFreqsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 12); }
double HouseholderOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 8); }

double HouseholderGradFreqsOp::estimateFlops(int64_t batch) {
  return perElement(*this, batch, 12);
}

double SkewOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SkewGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SparseSkewOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SparseSkewGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double CayleyOp::estimateFlops(int64_t batch) { return cayleyForward(*this, batch); }

double CayleyGradOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch);
  return 2 * cayleyForward(*this, batch) + 2 * cube(d);
}

double RelativePositionsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }

double GeneratorExpOp::estimateFlops(int64_t batch) {
  return generatorMatrices(*this, batch) * generatorExpPerMatrix(*this, batch);
}

double GeneratorExpGradOp::estimateFlops(int64_t batch) { // the 2d x 2d block matrix
  return generatorMatrices(*this, batch) * 8 * generatorExpPerMatrix(*this, batch);
}

double ApplyRotationOp::estimateFlops(int64_t batch) {
  return 2 * operandElements(*this, 0, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}

double ApplyRotationGradOp::estimateFlops(int64_t batch) {
  return 2 * 2 * operandElements(*this, 0, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}

double CommutatorNormOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch), k = dimFromEnd((*this)->getOperand(0), 2, batch);
  return k * (k - 1) / 2 * 4 * cube(d);
}

double CommutatorNormGradOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch), k = dimFromEnd((*this)->getOperand(0), 2, batch);
  return k * (k - 1) / 2 * 4 * cube(d);
}

double SpdGateOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 3); }
double SpdGateGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 3); }
double SinusoidalOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
