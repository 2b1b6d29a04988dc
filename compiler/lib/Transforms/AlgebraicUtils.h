//===- AlgebraicUtils.h - helpers shared by the algebraic rewrites -*- C++ -*-===//
//
// Private to compiler/lib/Transforms: the use checks and clean-up that
// pe-spd-gate-square, pe-cancel-orthogonal, pe-fold-transform and
// pe-reflection-to-rotation have in common.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_LIB_ALGEBRAICUTILS_H
#define STRINGC_TRANSFORMS_LIB_ALGEBRAICUTILS_H

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace stringc::algebraic {

/// True when every use of `value` is the `q` or `k` operand of `attention`
/// (operands 0 and 1), so rewriting those two operands leaves `value` dead.
inline bool onlyFeedsQueryKey(mlir::Value value, mlir::pe::AttentionOp attention) {
  for (mlir::OpOperand &use : value.getUses())
    if (use.getOwner() != attention.getOperation() || use.getOperandNumber() > 1)
      return false;
  return true;
}

/// Erases `op` if it has no uses and no side effects, then does the same for
/// the ops that defined its operands (a rewrite that leaves a chain such as
/// get_param -> skew dead removes the whole chain).
inline void eraseDeadChain(mlir::Operation *op) {
  llvm::SetVector<mlir::Operation *> worklist;
  if (op)
    worklist.insert(op);
  while (!worklist.empty()) {
    mlir::Operation *current = worklist.pop_back_val();
    if (!current->use_empty() || !mlir::isPure(current))
      continue;
    for (mlir::Value operand : current->getOperands())
      if (mlir::Operation *def = operand.getDefiningOp())
        worklist.insert(def);
    current->erase();
  }
}

} // namespace stringc::algebraic

#endif // STRINGC_TRANSFORMS_LIB_ALGEBRAICUTILS_H
