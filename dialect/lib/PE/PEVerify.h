//===- PEVerify.h - shape-checking helpers for pe verifiers -----*- C++ -*-===//
//
// Private to the dialect library. Every helper emits an op error naming the
// operand (e.g. "'pe.rope' op operand 'pos' must be fully static, got
// tensor<?x2xf32>") and returns failure, so verifiers read as a list of rules.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_LIB_PEVERIFY_H
#define STRINGC_DIALECT_PE_LIB_PEVERIFY_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <utility>

namespace mlir::pe::verify {

/// Marks "any rank" for the rank arguments below.
constexpr int64_t kAnyRank = -1;

/// The shape of a ranked tensor value (ODS guarantees every pe operand is one).
ArrayRef<int64_t> shapeOf(Value v);

/// `[?, 50, 64]`.
std::string shapeStr(ArrayRef<int64_t> shape);

/// `1e-05`, `0.5`: short, for messages.
std::string numStr(double value);

/// An activation: rank `rank` (or at least `minRank` when `rank` is
/// kAnyRank), and only dimension 0 (the batch) may be dynamic.
LogicalResult checkActivation(Operation *op, Value v, StringRef name,
                              int64_t rank, int64_t minRank = 0);

/// A table, parameter, position or rotation: rank `rank` (or at least
/// `minRank` when `rank` is kAnyRank) and every dimension static.
LogicalResult checkStatic(Operation *op, Value v, StringRef name, int64_t rank,
                          int64_t minRank = 0);

/// Operand `name` has exactly `shape`; `what` says where the shape comes
/// from, e.g. "[D/2, A]".
LogicalResult checkShape(Operation *op, Value v, StringRef name,
                         ArrayRef<int64_t> shape, StringRef what);

/// The op's single result has `shape` (its element type is checked by ODS).
LogicalResult checkResultShape(Operation *op, ArrayRef<int64_t> shape);

/// `shape` without dimension `dim`.
SmallVector<int64_t> dropDim(ArrayRef<int64_t> shape, size_t dim);

/// `shape` with its last dimension replaced by `tail`.
SmallVector<int64_t> replaceLast(ArrayRef<int64_t> shape,
                                 ArrayRef<int64_t> tail);

/// The number of strictly upper-triangular entries of a `dim x dim` matrix.
int64_t pairCount(int64_t dim);

/// Attribute `name` has a positive `value` (NaN is not positive).
LogicalResult checkPositive(Operation *op, StringRef name, double value);

//===----------------------------------------------------------------------===//
// Rules shared by a forward op and its backward op
//
// Each checks the operands and attributes the two ops have in common, with
// the forward op's messages; the callers then check their own results (the
// forward result, or `dy` and the `d<name>` results).
//===----------------------------------------------------------------------===//

/// `heads` is positive and divides the model width `d`.
LogicalResult checkHeads(Operation *op, int64_t heads, int64_t d);

/// pe.linear / pe.linear_grad_input: `act` (`name`) an activation of rank
/// at least 1 and `w` a static `[I, O]` whose dimension `wDim` (0 for I,
/// 1 for O) equals the last dimension of `act`.
LogicalResult checkLinearWeight(Operation *op, Value act, StringRef name,
                                Value w, unsigned wDim);

/// pe.mean / pe.mean_grad: `axis` is a dimension of operand 'x' of `rank`.
LogicalResult checkMeanAxis(Operation *op, int64_t axis, int64_t rank);

/// pe.layer_norm / pe.layer_norm_grad: `x` an activation of rank at least 1,
/// each of `params` (gamma, beta) static `[D]`, and a positive `epsilon`.
LogicalResult checkLayerNorm(Operation *op, Value x,
                             ArrayRef<std::pair<Value, StringRef>> params,
                             double epsilon);

/// pe.layer_norm_grad / pe.layer_norm_grad_acc: checkLayerNorm of `x` and
/// `gamma`, `dy` and result 0 (`dx`) the shape of `x`, results 1 and 2
/// (`dgamma`, `dbeta`) `[D]`.
LogicalResult checkLayerNormGrad(Operation *op, Value x, Value gamma, Value dy,
                                 double epsilon);

/// pe.patch_embed / pe.patch_embed_grad: `patch` is positive and divides the
/// height and width of the `[B, C, H, W]` operand 'image' (already checked).
LogicalResult checkPatch(Operation *op, Value image, int64_t patch);

/// pe.select_token / pe.select_token_grad: `index` names one of `tokens`.
LogicalResult checkTokenIndex(Operation *op, int64_t index, int64_t tokens);

/// pe.attention / pe.attention_grad: `q`, `k`, `v` `[B, T, D]` of one type,
/// `heads` dividing D, the optional `rel` `[T, T, Dh, Dh]`, a positive
/// `scale`, and `skipBase` given, and non-negative, exactly when `skip`.
LogicalResult checkAttention(Operation *op, Value q, Value k, Value v,
                             Value rel, int64_t heads, double scale, bool skip,
                             IntegerAttr skipBase);

/// pe.cross_entropy / pe.cross_entropy_grad: `logits` `[..., C]` with static
/// C, and `labels` of the shape of `logits` without its last dimension.
LogicalResult checkCrossEntropy(Operation *op, Value logits, Value labels,
                                double smoothing);

/// pe.rope / pe.householder and their grads: `x` `[B, T, D]` with `D` even,
/// `pos` `[T, A]` with `A` in {1, 2}, and each of `tables` `[D/2, A]`.
LogicalResult checkPairRotation(Operation *op, Value x, Value pos,
                                ArrayRef<std::pair<Value, StringRef>> tables);

/// pe.skew / pe.sparse_skew and their grads: `dim` is at least 2.
LogicalResult checkSkewDim(Operation *op, int64_t dim);

/// pe.sparse_skew / pe.sparse_skew_grad: `support` is a non-empty, strictly
/// increasing list of indices into the `pairCount(dim)` upper-triangular
/// entries.
LogicalResult checkSupport(Operation *op, ArrayRef<int64_t> support,
                           int64_t dim);

/// pe.cayley / pe.cayley_grad: `x` `[..., D]` and `s` static `[D, D]`.
LogicalResult checkCayley(Operation *op, Value x, Value s);

/// `generators` is `[K, d, d]`: K square blocks.
LogicalResult checkGenerators(Operation *op, Value generators);

/// pe.generator_exp / pe.generator_exp_grad: static `r` `[..., K]` and
/// `generators` `[K, d, d]`.
LogicalResult checkGeneratorExp(Operation *op, Value r, Value generators);

/// The log-sum-exp of an attention op on `q` `[B, T, D]`: `[B, heads, T]`.
SmallVector<int64_t> attentionLseShape(Value q, int64_t heads);

/// The saved forward values an attention gradient op reads: `y` of the
/// shape of `q` and `lse` `[B, heads, T]`.
LogicalResult checkAttentionSaved(Operation *op, Value q, Value y, Value lse,
                                  int64_t heads);

/// pe.apply_rotation / pe.apply_rotation_grad: `x` `[B, T, D]`, `heads`
/// dividing D, and `rotations` static `[T, Dh, Dh]`.
LogicalResult checkApplyRotation(Operation *op, Value x, Value rotations,
                                 int64_t heads);

/// pe.commutator_norm / pe.commutator_norm_grad: at least 2 generators.
LogicalResult checkCommutatorNorm(Operation *op, Value generators);

/// pe.spd_gate / pe.spd_gate_grad: `x` `[B, T, D]` and `gamma` static `[D]`
/// or `[T, D]`.
LogicalResult checkSpdGate(Operation *op, Value x, Value gamma);

/// Result `index`, called `name`, has `shape`; `what` says where the shape
/// comes from, e.g. "the shape of 'x'".
LogicalResult checkResult(Operation *op, unsigned index, StringRef name,
                          ArrayRef<int64_t> shape, StringRef what);

/// Operand `dy` has `shape`, the shape of the forward result.
LogicalResult checkDy(Operation *op, Value dy, ArrayRef<int64_t> shape,
                      StringRef what);

/// Result `index`, called `name`, has rank `rank` and only dimension 0 may
/// be dynamic (`staticAll`: none may).
LogicalResult checkResultRank(Operation *op, unsigned index, StringRef name,
                              int64_t rank, bool staticAll, StringRef what);

} // namespace mlir::pe::verify

#endif // STRINGC_DIALECT_PE_LIB_PEVERIFY_H
