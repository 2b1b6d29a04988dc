//===- AlgebraicUtils.h - helpers shared by the algebraic rewrites -*- C++ -*-===//
//
// Private to compiler/lib/Transforms: the use checks that
// pe-spd-gate-square, pe-cancel-orthogonal, pe-fold-transform and
// pe-reflection-to-rotation have in common.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_LIB_ALGEBRAICUTILS_H
#define STRINGC_TRANSFORMS_LIB_ALGEBRAICUTILS_H

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace stringc::algebraic {

/// True when every use of `value` is the `q` or `k` operand of `attention`
/// (operands 0 and 1), so rewriting those two operands leaves `value` dead.
inline bool onlyFeedsQueryKey(mlir::Value value, mlir::pe::AttentionOp attention) {
  for (mlir::OpOperand &use : value.getUses())
    if (use.getOwner() != attention.getOperation() || use.getOperandNumber() > 1)
      return false;
  return true;
}

} // namespace stringc::algebraic

#endif // STRINGC_TRANSFORMS_LIB_ALGEBRAICUTILS_H
