//===- PEVerify.h - shape-checking helpers for pe verifiers -----*- C++ -*-===//
//
// Private to the dialect library. Every helper emits an op error naming the
// operand (e.g. "'pe.rope' op operand 'pos' must be fully static, got
// tensor<?x2xf32>") and returns failure, so verifiers read as a list of rules.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_LIB_PEVERIFY_H
#define STRINGC_DIALECT_PE_LIB_PEVERIFY_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

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

} // namespace mlir::pe::verify

#endif // STRINGC_DIALECT_PE_LIB_PEVERIFY_H
