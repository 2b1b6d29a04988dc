//===- PECostModel.h - counting rules shared by the ops' costs --*- C++ -*-===//
//
// What every CostOpInterface::estimateFlops (in its family's
// PE<Family>Ops.cpp) counts with: tensor sizes at a batch size. A first-order
// model of the op's math (docs/dialect.md), a multiply-add counting 2. Good
// enough to rank rewrites (`stringc --explain`) and to split an op's work
// over its GPU launches (the launch report); not a roofline by itself. Bytes
// are the caller's: every operand and result once. Private to the dialect.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_DIALECT_PE_PECOSTMODEL_H
#define STRINGC_DIALECT_PE_PECOSTMODEL_H

#include "mlir/IR/Operation.h"

#include <cstdint>

namespace mlir::pe::cost {

/// Elements of `value`'s tensor type with the batch dimension set to `batch`.
double elements(Value value, int64_t batch);

/// Dimension `fromEnd` of `value`, counted from the last (0), at `batch`.
double dimFromEnd(Value value, int fromEnd, int64_t batch);

/// Elements of the first result (0 without one).
double resultElements(Operation *op, int64_t batch);

/// Elements of operand `i` (0 without one).
double operandElements(Operation *op, unsigned i, int64_t batch);

/// `factor` FLOPs per element of the first result.
double perElement(Operation *op, int64_t batch, double factor);

inline double cube(double d) { return d * d * d; }

} // namespace mlir::pe::cost

#endif // STRINGC_DIALECT_PE_PECOSTMODEL_H
