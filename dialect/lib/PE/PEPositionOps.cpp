//===- PEPositionOps.cpp - verifiers of the positional-encoding ops -------===//
//
// Shape rules of the ops in PEPositionOps.td. Positions, frequency tables,
// skew matrices, generators and rotations are fully static; only the
// activations they transform have a dynamic batch dimension.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PEVerify.h"

using namespace mlir;
using namespace mlir::pe;
using namespace mlir::pe::verify;

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

LogicalResult HouseholderOp::verify() {
  if (failed(checkPairRotation(*this, getX(), getPos(),
                               {{getF1(), "f1"}, {getF2(), "f2"}})))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
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

LogicalResult CayleyOp::verify() {
  if (failed(checkCayley(*this, getX(), getS())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
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

LogicalResult ApplyRotationOp::verify() {
  if (failed(checkApplyRotation(*this, getX(), getRotations(),
                                getHeadsAttr().getInt())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
}

LogicalResult CommutatorNormOp::verify() {
  return checkCommutatorNorm(*this, getGenerators());
}

LogicalResult SpdGateOp::verify() {
  if (failed(checkSpdGate(*this, getX(), getGamma())))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
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
