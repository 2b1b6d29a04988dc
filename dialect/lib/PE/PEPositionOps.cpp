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

/// The number of strictly upper-triangular entries of a `dim x dim` matrix.
static int64_t pairCount(int64_t dim) { return dim * (dim - 1) / 2; }

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
  if (double base = getBaseAttr().getValueAsDouble(); !(base > 0))
    return emitOpError() << "base must be positive, got " << numStr(base);
  return checkResultShape(*this, {dim / 2, axial ? 2 : 1});
}

/// Shared by rope and householder: `x` `[B, T, D]` with `D` even, `pos`
/// `[T, A]` with `A` in {1, 2}, and each of `tables` `[D/2, A]`.
static LogicalResult verifyPairRotation(Operation *op, Value x, Value pos,
                                        ArrayRef<std::pair<Value, StringRef>>
                                            tables) {
  if (failed(checkActivation(op, x, "x", 3)) ||
      failed(checkStatic(op, pos, "pos", 2)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), ps = shapeOf(pos);
  if (xs[2] % 2 != 0)
    return op->emitOpError()
           << "the last dimension of 'x' must be even (interleaved pairs), "
              "got "
           << xs[2];
  if (ps[0] != xs[1])
    return op->emitOpError() << "operand 'pos' must have " << xs[1]
                             << " rows (the tokens of 'x'), got "
                             << pos.getType();
  if (ps[1] != 1 && ps[1] != 2)
    return op->emitOpError() << "operand 'pos' must have 1 or 2 axes, got "
                             << ps[1];
  for (auto [table, name] : tables)
    if (failed(checkStatic(op, table, name, 2)) ||
        failed(checkShape(op, table, name, {xs[2] / 2, ps[1]}, "[D/2, A]")))
      return failure();
  return checkResultShape(op, xs);
}

LogicalResult RopeOp::verify() {
  if (failed(verifyPairRotation(*this, getX(), getPos(),
                                {{getFreqs(), "freqs"}})))
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
  return verifyPairRotation(*this, getX(), getPos(),
                            {{getF1(), "f1"}, {getF2(), "f2"}});
}

LogicalResult SkewOp::verify() {
  if (failed(checkStatic(*this, getParams(), "params", kAnyRank, 1)))
    return failure();
  int64_t dim = getDimAttr().getInt();
  if (dim < 2)
    return emitOpError() << "dim must be at least 2, got " << dim;
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
  if (dim < 2)
    return emitOpError() << "dim must be at least 2, got " << dim;
  if (double f = getFractionAttr().getValueAsDouble(); !(f > 0 && f <= 1))
    return emitOpError() << "fraction must be in (0, 1], got " << numStr(f);
  ArrayRef<int64_t> support = getSupport();
  if (support.empty())
    return emitOpError() << "support must not be empty";
  for (size_t m = 0; m < support.size(); ++m) {
    if (support[m] < 0 || support[m] >= pairCount(dim))
      return emitOpError() << "support index " << support[m]
                           << " is out of range [0, " << pairCount(dim)
                           << ")";
    if (m > 0 && support[m] <= support[m - 1])
      return emitOpError() << "support must be strictly increasing, got "
                           << support[m - 1] << " before " << support[m];
  }
  int64_t k = shapeOf(getParams())[0];
  if (k != static_cast<int64_t>(support.size()))
    return emitOpError() << "operand 'params' must have one entry per "
                         << "support index (" << support.size() << "), got "
                         << getParams().getType();
  return checkResultShape(*this, {dim, dim});
}

LogicalResult CayleyOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", kAnyRank, 1)) ||
      failed(checkStatic(*this, getS(), "s", 2)))
    return failure();
  int64_t d = shapeOf(getX()).back();
  if (failed(checkShape(*this, getS(), "s", {d, d}, "[D, D]")))
    return failure();
  return checkResultShape(*this, shapeOf(getX()));
}

LogicalResult RelativePositionsOp::verify() {
  if (failed(checkStatic(*this, getPos(), "pos", 2)))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getPos());
  return checkResultShape(*this, {p[0], p[0], p[1]});
}

/// `generators` is `[K, d, d]`: K square blocks.
static LogicalResult checkGenerators(Operation *op, Value generators) {
  if (failed(checkStatic(op, generators, "generators", 3)))
    return failure();
  ArrayRef<int64_t> g = shapeOf(generators);
  if (g[1] != g[2])
    return op->emitOpError() << "operand 'generators' must hold square "
                                "matrices [K, d, d], got "
                             << generators.getType();
  return success();
}

LogicalResult GeneratorExpOp::verify() {
  if (failed(checkStatic(*this, getR(), "r", kAnyRank, 1)) ||
      failed(checkGenerators(*this, getGenerators())))
    return failure();
  ArrayRef<int64_t> r = shapeOf(getR()), g = shapeOf(getGenerators());
  if (r.back() != g[0])
    return emitOpError() << "the last dimension of 'r' (" << r.back()
                         << ") must equal the number of generators (" << g[0]
                         << ")";
  return checkResultShape(*this, replaceLast(r, {g[1], g[2]}));
}

LogicalResult ApplyRotationOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", 3)) ||
      failed(checkStatic(*this, getRotations(), "rotations", 3)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t heads = getHeadsAttr().getInt();
  if (heads <= 0 || x[2] % heads != 0)
    return emitOpError() << "heads (" << heads
                         << ") must be positive and divide the model width "
                         << x[2];
  int64_t dh = x[2] / heads;
  if (failed(checkShape(*this, getRotations(), "rotations", {x[1], dh, dh},
                        "[T, Dh, Dh]")))
    return failure();
  return checkResultShape(*this, x);
}

LogicalResult CommutatorNormOp::verify() {
  if (failed(checkGenerators(*this, getGenerators())))
    return failure();
  if (int64_t k = shapeOf(getGenerators())[0]; k < 2)
    return emitOpError() << "needs at least 2 generators, got " << k;
  return success();
}

LogicalResult SpdGateOp::verify() {
  if (failed(checkActivation(*this, getX(), "x", 3)) ||
      failed(checkStatic(*this, getGamma(), "gamma", kAnyRank, 1)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getX()), g = shapeOf(getGamma());
  if (g != x.take_back(1) && g != x.take_back(2))
    return emitOpError() << "operand 'gamma' must have shape "
                         << shapeStr(x.take_back(1)) << " or "
                         << shapeStr(x.take_back(2)) << " ([D] or [T, D]), "
                         << "got " << getGamma().getType();
  return checkResultShape(*this, x);
}

LogicalResult SinusoidalOp::verify() {
  int64_t length = getLengthAttr().getInt(), dim = getDimAttr().getInt();
  if (length <= 0)
    return emitOpError() << "length must be positive, got " << length;
  if (dim <= 0 || dim % 2 != 0)
    return emitOpError() << "dim must be positive and even, got " << dim;
  if (double base = getBaseAttr().getValueAsDouble(); !(base > 0))
    return emitOpError() << "base must be positive, got " << numStr(base);
  return checkResultShape(*this, {length, dim});
}
