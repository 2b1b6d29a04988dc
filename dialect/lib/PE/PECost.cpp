//===- PECost.cpp - the arithmetic of each compute op ---------------------===//
//
// CostOpInterface for every compute op: a first-order model of the op's math
// (docs/dialect.md), a multiply-add counting 2. Good enough to rank rewrites
// (`stringc --explain`) and to split an op's work over its GPU launches (the
// launch report); not a roofline by itself. Bytes are the caller's: every
// operand and result once.
//
//===----------------------------------------------------------------------===//
#include "stringc/Dialect/PE/PECost.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::pe {

double elementsAtBatch(Type type, int64_t batch) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return 0;
  double count = 1;
  for (int64_t dim : ranked.getShape())
    count *= double(ShapedType::isDynamic(dim) ? batch : dim);
  return count;
}

namespace {

/// Elements of `value`'s tensor type with the batch dimension set to `batch`.
double elements(Value value, int64_t batch) { return elementsAtBatch(value.getType(), batch); }

/// Dimension `fromEnd` of `value`, counted from the last (0), at `batch`.
double dimFromEnd(Value value, int fromEnd, int64_t batch) {
  auto ranked = dyn_cast<RankedTensorType>(value.getType());
  if (!ranked || fromEnd >= int(ranked.getRank()))
    return 1;
  int64_t dim = ranked.getShape()[size_t(ranked.getRank() - 1 - fromEnd)];
  return double(ShapedType::isDynamic(dim) ? batch : dim);
}

double resultElements(Operation *op, int64_t batch) {
  return op->getNumResults() ? elements(op->getResult(0), batch) : 0;
}

double operandElements(Operation *op, unsigned i, int64_t batch) {
  return i < op->getNumOperands() ? elements(op->getOperand(i), batch) : 0;
}

/// `factor` FLOPs per element of the first result.
double perElement(Operation *op, int64_t batch, double factor) {
  return factor * resultElements(op, batch);
}

/// Softmax attention: QK^T, the softmax, PV, per head; `relative` adds the
/// q_i^T R_ij products of relative-position attention.
double attentionForward(Operation *op, int64_t heads, bool relative, int64_t batch) {
  Value q = op->getOperand(0);
  double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
  double headDim = d / double(heads);
  double pairs = b * double(heads) * t * t;
  double forward = 2 * pairs * headDim * 2 + 5 * pairs;
  if (relative)
    forward += 2 * pairs * headDim * headDim;
  return forward;
}

/// RoPE fused into attention: the attention and the rotation of q and k.
double ropeAttentionForward(Operation *op, int64_t heads, int64_t batch) {
  Value q = op->getOperand(0);
  double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
  double pairs = b * double(heads) * t * t;
  return 2 * pairs * (d / double(heads)) * 2 + 5 * pairs + 2 * 6 * b * t * d;
}

/// One Cayley transform: the LU of I + S and the per-row solves with I - S.
double cayleyForward(Operation *op, int64_t batch) {
  double d = dimFromEnd(op->getOperand(0), 0, batch);
  double rows = operandElements(op, 0, batch) / d;
  return 2.0 / 3.0 * d * d * d + 4 * rows * d * d;
}

/// A matrix exponential per position (scaling and squaring: about ten
/// d x d products) from k generators.
double generatorExpPerMatrix(Operation *op, int64_t batch) {
  double d = dimFromEnd(op->getOperand(1), 0, batch);
  double k = dimFromEnd(op->getOperand(1), 2, batch);
  return 20 * d * d * d + 2 * k * d * d;
}

double generatorMatrices(Operation *op, int64_t batch) {
  return operandElements(op, 0, batch) / dimFromEnd(op->getOperand(1), 2, batch);
}

/// The inverse of (I + S) for the Cayley weight: LU, then d solves.
double cayleyWeightInverse(Operation *op, int64_t batch) {
  double d = dimFromEnd(op->getOperand(0), 0, batch);
  return 2.0 / 3.0 * d * d * d + 2 * d * d * d;
}

double cube(double d) { return d * d * d; }

} // namespace

// Layers.
double LinearOp::estimateFlops(int64_t batch) {
  double out = resultElements(*this, batch);
  return 2 * out * dimFromEnd((*this)->getOperand(1), 1, batch) + ((*this)->getNumOperands() > 2 ? out : 0);
}
double PatchEmbedOp::estimateFlops(int64_t batch) {
  double out = resultElements(*this, batch);
  return 2 * out * dimFromEnd((*this)->getOperand(1), 1, batch) + ((*this)->getNumOperands() > 2 ? out : 0);
}
double LayerNormOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 10); }
double GeluOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 20); }
double ReluOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double AddOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SubOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double MulOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ScaleOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double MeanOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double TokenEmbedOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ClassTokenOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SelectTokenOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double AttentionOp::estimateFlops(int64_t batch) {
  return attentionForward(*this, getHeads(), (*this)->getNumOperands() > 3, batch);
}
double CrossEntropyOp::estimateFlops(int64_t batch) {
  return 5 * operandElements(*this, 0, batch);
}

// Positional encodings.
double SeqPositionsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double GridPositionsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double RopeFreqsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SinusoidalOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double RelativePositionsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double RopeOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 8); } // table, 2x2
double HouseholderOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 8); }
double SkewOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SparseSkewOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double CayleyOp::estimateFlops(int64_t batch) { return cayleyForward(*this, batch); }
double GeneratorExpOp::estimateFlops(int64_t batch) {
  return generatorMatrices(*this, batch) * generatorExpPerMatrix(*this, batch);
}
double ApplyRotationOp::estimateFlops(int64_t batch) {
  return 2 * operandElements(*this, 0, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}
double CommutatorNormOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch), k = dimFromEnd((*this)->getOperand(0), 2, batch);
  return k * (k - 1) / 2 * 4 * cube(d);
}
double SpdGateOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 3); }

// Backward ops (pe-autodiff).
double SumToOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double BroadcastToOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ExpandAxisOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double MeanGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double LinearGradInputOp::estimateFlops(int64_t batch) { // dy W^T: inner O
  return 2 * resultElements(*this, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}
double LinearGradWeightOp::estimateFlops(int64_t batch) { // x^T dy: inner rows
  return 2 * operandElements(*this, 0, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}
double LayerNormGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 10); }
double GeluGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 20); }
double ReluGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double PatchEmbedGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double TokenEmbedGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double ClassTokenGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SelectTokenGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double AttentionGradOp::estimateFlops(int64_t batch) {
  return 2.5 * attentionForward(*this, getHeads(), (*this)->getNumOperands() > 4, batch);
}
double CrossEntropyGradOp::estimateFlops(int64_t batch) {
  return 5 * operandElements(*this, 0, batch);
}
double RopeGradFreqsOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 12); }
double HouseholderGradFreqsOp::estimateFlops(int64_t batch) {
  return perElement(*this, batch, 12);
}
double SkewGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SparseSkewGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double CayleyGradOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch);
  return 2 * cayleyForward(*this, batch) + 2 * cube(d);
}
double GeneratorExpGradOp::estimateFlops(int64_t batch) { // the 2d x 2d block matrix
  return generatorMatrices(*this, batch) * 8 * generatorExpPerMatrix(*this, batch);
}
double ApplyRotationGradOp::estimateFlops(int64_t batch) {
  return 2 * 2 * operandElements(*this, 0, batch) * dimFromEnd((*this)->getOperand(1), 0, batch);
}
double CommutatorNormGradOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch), k = dimFromEnd((*this)->getOperand(0), 2, batch);
  return k * (k - 1) / 2 * 4 * cube(d);
}
double SpdGateGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 3); }

// Hoisted tables and fused kernels (pe-hoist, pe-fuse-*): the ops they replace.
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
double RopeTableGradOp::estimateFlops(int64_t batch) {
  return 24 * operandElements(*this, 2, batch);
}
double RopeApplyGradTableOp::estimateFlops(int64_t batch) {
  return 6 * operandElements(*this, 0, batch);
}
double CayleyWeightGradOp::estimateFlops(int64_t batch) {
  double d = dimFromEnd((*this)->getOperand(0), 0, batch);
  return cayleyWeightInverse(*this, batch) + 6 * cube(d);
}
double RopeAttentionGradOp::estimateFlops(int64_t batch) {
  Value q = (*this)->getOperand(0);
  double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
  return 2.5 * ropeAttentionForward(*this, getHeads(), batch) + 2 * 6 * b * t * d;
}

// Gather rewrites (pe-skip-gather, pe-distinct-offsets).
double SkipGatherOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SkipGatherGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double OffsetTableOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double PairGatherOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double PairGatherGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }

} // namespace mlir::pe
