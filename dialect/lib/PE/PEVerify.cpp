//===- PEVerify.cpp - shape-checking helpers for pe verifiers -------------===//

#include "PEVerify.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::pe::verify {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << '[';
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << '?';
    else
      os << d;
  });
  os << ']';
  return s;
}

std::string numStr(double value) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", value);
  return s;
}

static LogicalResult checkRank(Operation *op, Value v, StringRef name,
                               int64_t rank, int64_t minRank) {
  int64_t actual = shapeOf(v).size();
  if (rank != kAnyRank && actual != rank)
    return op->emitOpError() << "operand '" << name << "' must have rank "
                             << rank << ", got " << v.getType();
  if (rank == kAnyRank && actual < minRank)
    return op->emitOpError() << "operand '" << name
                             << "' must have rank at least " << minRank
                             << ", got " << v.getType();
  return success();
}

LogicalResult checkActivation(Operation *op, Value v, StringRef name,
                              int64_t rank, int64_t minRank) {
  if (failed(checkRank(op, v, name, rank, minRank)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(v);
  for (size_t i = 1; i < shape.size(); ++i)
    if (ShapedType::isDynamic(shape[i]))
      return op->emitOpError()
             << "operand '" << name
             << "' may be dynamic only in dimension 0 (the batch), got "
             << v.getType();
  return success();
}

LogicalResult checkStatic(Operation *op, Value v, StringRef name, int64_t rank,
                          int64_t minRank) {
  if (failed(checkRank(op, v, name, rank, minRank)))
    return failure();
  if (!cast<RankedTensorType>(v.getType()).hasStaticShape())
    return op->emitOpError() << "operand '" << name
                             << "' must be fully static, got " << v.getType();
  return success();
}

LogicalResult checkShape(Operation *op, Value v, StringRef name,
                         ArrayRef<int64_t> shape, StringRef what) {
  if (shapeOf(v) == shape)
    return success();
  return op->emitOpError() << "operand '" << name << "' must have shape "
                           << shapeStr(shape) << " (" << what << "), got "
                           << v.getType();
}

LogicalResult checkResultShape(Operation *op, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (type.getShape() == shape)
    return success();
  return op->emitOpError() << "result type must be "
                           << type.clone(shape) << ", got " << type;
}

SmallVector<int64_t> dropDim(ArrayRef<int64_t> shape, size_t dim) {
  SmallVector<int64_t> out(shape.begin(), shape.end());
  out.erase(out.begin() + dim);
  return out;
}

SmallVector<int64_t> replaceLast(ArrayRef<int64_t> shape,
                                 ArrayRef<int64_t> tail) {
  SmallVector<int64_t> out(shape.drop_back());
  out.append(tail.begin(), tail.end());
  return out;
}

int64_t pairCount(int64_t dim) { return dim * (dim - 1) / 2; }

LogicalResult checkPositive(Operation *op, StringRef name, double value) {
  if (value > 0)
    return success();
  return op->emitOpError() << name << " must be positive, got "
                           << numStr(value);
}

//===----------------------------------------------------------------------===//
// Rules shared by a forward op and its backward op
//===----------------------------------------------------------------------===//

LogicalResult checkHeads(Operation *op, int64_t heads, int64_t d) {
  if (heads > 0 && d % heads == 0)
    return success();
  return op->emitOpError() << "heads (" << heads
                           << ") must be positive and divide the model width "
                           << d;
}

LogicalResult checkLinearWeight(Operation *op, Value act, StringRef name,
                                Value w, unsigned wDim) {
  if (failed(checkActivation(op, act, name, kAnyRank, 1)) ||
      failed(checkStatic(op, w, "w", 2)))
    return failure();
  int64_t last = shapeOf(act).back();
  if (shapeOf(w)[wDim] == last)
    return success();
  return op->emitOpError() << "operand 'w' must have " << last
                           << (wDim == 0 ? " rows" : " columns")
                           << " (the last dimension of '" << name << "'), got "
                           << w.getType();
}

LogicalResult checkMeanAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis >= 0 && axis < rank)
    return success();
  return op->emitOpError() << "axis " << axis << " is out of range for operand "
                           << "'x' of rank " << rank;
}

LogicalResult checkLayerNorm(Operation *op, Value x,
                             ArrayRef<std::pair<Value, StringRef>> params,
                             double epsilon) {
  if (failed(checkActivation(op, x, "x", kAnyRank, 1)))
    return failure();
  int64_t d = shapeOf(x).back();
  for (auto [param, name] : params)
    if (failed(checkStatic(op, param, name, 1)))
      return failure();
  for (auto [param, name] : params)
    if (failed(checkShape(op, param, name, {d}, "[D]")))
      return failure();
  return checkPositive(op, "epsilon", epsilon);
}

LogicalResult checkLayerNormGrad(Operation *op, Value x, Value gamma, Value dy,
                                 double epsilon) {
  if (failed(checkLayerNorm(op, x, {{gamma, "gamma"}}, epsilon)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t d = shape.back();
  if (failed(checkDy(op, dy, shape, "the shape of 'x'")) ||
      failed(checkResult(op, 0, "dx", shape, "the shape of 'x'")) ||
      failed(checkResult(op, 1, "dgamma", {d}, "[D]")) ||
      failed(checkResult(op, 2, "dbeta", {d}, "[D]")))
    return failure();
  return success();
}

LogicalResult checkPatch(Operation *op, Value image, int64_t patch) {
  if (patch <= 0)
    return op->emitOpError() << "patch must be positive, got " << patch;
  ArrayRef<int64_t> img = shapeOf(image);
  int64_t h = img[2], wd = img[3];
  if (h % patch != 0 || wd % patch != 0)
    return op->emitOpError()
           << "patch " << patch << " must divide the image height " << h
           << " and width " << wd;
  return success();
}

LogicalResult checkTokenIndex(Operation *op, int64_t index, int64_t tokens) {
  if (index >= 0 && index < tokens)
    return success();
  return op->emitOpError() << "index " << index << " is out of range for "
                           << tokens << " tokens";
}

LogicalResult checkAttention(Operation *op, Value q, Value k, Value v,
                             Value rel, int64_t heads, double scale, bool skip,
                             IntegerAttr skipBase) {
  if (failed(checkActivation(op, q, "q", 3)))
    return failure();
  if (k.getType() != q.getType() || v.getType() != q.getType())
    return op->emitOpError()
           << "operands 'q', 'k' and 'v' must have the same "
              "type, got "
           << q.getType() << ", " << k.getType() << ", " << v.getType();
  ArrayRef<int64_t> qs = shapeOf(q);
  if (failed(checkHeads(op, heads, qs[2])))
    return failure();
  int64_t dh = qs[2] / heads;
  if (rel && (failed(checkStatic(op, rel, "rel", 4)) ||
              failed(checkShape(op, rel, "rel", {qs[1], qs[1], dh, dh},
                                "[T, T, Dh, Dh]"))))
    return failure();
  if (failed(checkPositive(op, "scale", scale)))
    return failure();
  if (skip && !skipBase)
    return op->emitOpError() << "mask 'skip' requires skip_base";
  if (!skip && skipBase)
    return op->emitOpError() << "skip_base applies only to mask 'skip'";
  if (skip && skipBase.getInt() < 0)
    return op->emitOpError()
           << "skip_base must be non-negative, got " << skipBase.getInt();
  return success();
}

SmallVector<int64_t> attentionLseShape(Value q, int64_t heads) {
  ArrayRef<int64_t> qs = shapeOf(q);
  return {qs[0], heads, qs[1]};
}

LogicalResult checkAttentionSaved(Operation *op, Value q, Value y, Value lse,
                                  int64_t heads) {
  if (failed(checkShape(op, y, "y", shapeOf(q), "the shape of 'q'")))
    return failure();
  return checkShape(op, lse, "lse", attentionLseShape(q, heads),
                    "[B, heads, T]");
}

LogicalResult checkCrossEntropy(Operation *op, Value logits, Value labels,
                                double smoothing) {
  // Written as !(in range) so that NaN is refused too.
  if (!(smoothing >= 0.0 && smoothing < 1.0))
    return op->emitOpError()
           << "smoothing must be in [0, 1), got " << smoothing;
  if (failed(checkActivation(op, logits, "logits", kAnyRank, 1)) ||
      failed(checkActivation(op, labels, "labels", kAnyRank)))
    return failure();
  ArrayRef<int64_t> ls = shapeOf(logits);
  // Rank-1 logits have no batch dimension, so their one dimension is C.
  if (ShapedType::isDynamic(ls.back()))
    return op->emitOpError()
           << "the class dimension of 'logits' must be static, got "
           << logits.getType();
  if (shapeOf(labels) != ls.drop_back())
    return op->emitOpError()
           << "operand 'labels' must have shape " << shapeStr(ls.drop_back())
           << " (the shape of 'logits' without its last "
              "dimension), got "
           << labels.getType();
  return success();
}

LogicalResult checkPairRotation(Operation *op, Value x, Value pos,
                                ArrayRef<std::pair<Value, StringRef>> tables) {
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
    return op->emitOpError()
           << "operand 'pos' must have " << xs[1]
           << " rows (the tokens of 'x'), got " << pos.getType();
  if (ps[1] != 1 && ps[1] != 2)
    return op->emitOpError()
           << "operand 'pos' must have 1 or 2 axes, got " << ps[1];
  for (auto [table, name] : tables)
    if (failed(checkStatic(op, table, name, 2)) ||
        failed(checkShape(op, table, name, {xs[2] / 2, ps[1]}, "[D/2, A]")))
      return failure();
  return success();
}

LogicalResult checkSkewDim(Operation *op, int64_t dim) {
  if (dim >= 2)
    return success();
  return op->emitOpError() << "dim must be at least 2, got " << dim;
}

LogicalResult checkSupport(Operation *op, ArrayRef<int64_t> support,
                           int64_t dim) {
  if (support.empty())
    return op->emitOpError() << "support must not be empty";
  for (size_t m = 0; m < support.size(); ++m) {
    if (support[m] < 0 || support[m] >= pairCount(dim))
      return op->emitOpError()
             << "support index " << support[m] << " is out of range [0, "
             << pairCount(dim) << ")";
    if (m > 0 && support[m] <= support[m - 1])
      return op->emitOpError() << "support must be strictly increasing, got "
                               << support[m - 1] << " before " << support[m];
  }
  return success();
}

LogicalResult checkCayley(Operation *op, Value x, Value s) {
  if (failed(checkActivation(op, x, "x", kAnyRank, 1)) ||
      failed(checkStatic(op, s, "s", 2)))
    return failure();
  int64_t d = shapeOf(x).back();
  return checkShape(op, s, "s", {d, d}, "[D, D]");
}

LogicalResult checkGenerators(Operation *op, Value generators) {
  if (failed(checkStatic(op, generators, "generators", 3)))
    return failure();
  ArrayRef<int64_t> g = shapeOf(generators);
  if (g[1] != g[2])
    return op->emitOpError() << "operand 'generators' must hold square "
                                "matrices [K, d, d], got "
                             << generators.getType();
  return success();
}

LogicalResult checkGeneratorExp(Operation *op, Value r, Value generators) {
  if (failed(checkStatic(op, r, "r", kAnyRank, 1)) ||
      failed(checkGenerators(op, generators)))
    return failure();
  ArrayRef<int64_t> rs = shapeOf(r), g = shapeOf(generators);
  if (rs.back() != g[0])
    return op->emitOpError()
           << "the last dimension of 'r' (" << rs.back()
           << ") must equal the number of generators (" << g[0] << ")";
  return success();
}

LogicalResult checkApplyRotation(Operation *op, Value x, Value rotations,
                                 int64_t heads) {
  if (failed(checkActivation(op, x, "x", 3)) ||
      failed(checkStatic(op, rotations, "rotations", 3)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x);
  if (failed(checkHeads(op, heads, xs[2])))
    return failure();
  int64_t dh = xs[2] / heads;
  return checkShape(op, rotations, "rotations", {xs[1], dh, dh}, "[T, Dh, Dh]");
}

LogicalResult checkCommutatorNorm(Operation *op, Value generators) {
  if (failed(checkGenerators(op, generators)))
    return failure();
  if (int64_t k = shapeOf(generators)[0]; k < 2)
    return op->emitOpError() << "needs at least 2 generators, got " << k;
  return success();
}

LogicalResult checkSpdGate(Operation *op, Value x, Value gamma) {
  if (failed(checkActivation(op, x, "x", 3)) ||
      failed(checkStatic(op, gamma, "gamma", kAnyRank, 1)))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), g = shapeOf(gamma);
  if (g != xs.take_back(1) && g != xs.take_back(2))
    return op->emitOpError()
           << "operand 'gamma' must have shape " << shapeStr(xs.take_back(1))
           << " or " << shapeStr(xs.take_back(2)) << " ([D] or [T, D]), got "
           << gamma.getType();
  return success();
}

/// Result `index`, called `name`, has `shape`; `what` says where the shape
/// comes from, e.g. "the shape of 'x'".
LogicalResult checkResult(Operation *op, unsigned index, StringRef name,
                                 ArrayRef<int64_t> shape, StringRef what) {
  auto type = cast<RankedTensorType>(op->getResult(index).getType());
  if (type.getShape() == shape)
    return success();
  return op->emitOpError() << "result '" << name << "' must have shape "
                           << shapeStr(shape) << " (" << what << "), got "
                           << type;
}

/// Operand `dy` has `shape`, the shape of the forward result.
LogicalResult checkDy(Operation *op, Value dy, ArrayRef<int64_t> shape,
                             StringRef what) {
  return checkShape(op, dy, "dy", shape, what);
}

/// Result `index`, called `name`, has rank `rank` and only dimension 0 may
/// be dynamic (`staticAll`: none may).
LogicalResult checkResultRank(Operation *op, unsigned index,
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

} // namespace mlir::pe::verify
