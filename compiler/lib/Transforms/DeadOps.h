//===- DeadOps.h - erase what a rewrite left dead ---------------*- C++ -*-===//
//
// Private to compiler/lib/Transforms. A rewrite that stops reading a value
// (a transform that cancels, a score that a gather no longer needs) leaves
// its producer chain dead, e.g. get_param -> skew -> cayley.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_LIB_DEADOPS_H
#define STRINGC_TRANSFORMS_LIB_DEADOPS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SetVector.h"

namespace stringc {

/// Erases each of `roots` that has no uses and no side effects, then,
/// transitively, the producers of their operands that become so. One
/// worklist for all roots, so roots that are the same op or share producers
/// (q and k of one attention) are each erased once. Null roots are skipped.
inline void eraseDeadOps(llvm::ArrayRef<mlir::Operation *> roots) {
  llvm::SetVector<mlir::Operation *> worklist;
  for (mlir::Operation *root : roots)
    if (root)
      worklist.insert(root);
  while (!worklist.empty()) {
    mlir::Operation *op = worklist.pop_back_val();
    if (!op->use_empty() || !mlir::isPure(op))
      continue;
    for (mlir::Value operand : op->getOperands())
      if (mlir::Operation *def = operand.getDefiningOp())
        worklist.insert(def);
    op->erase();
  }
}

/// eraseDeadOps from the ops that define `values` (block arguments have none).
inline void eraseDeadProducers(llvm::ArrayRef<mlir::Value> values) {
  llvm::SmallVector<mlir::Operation *> roots;
  for (mlir::Value value : values)
    roots.push_back(value.getDefiningOp());
  eraseDeadOps(roots);
}

} // namespace stringc

#endif // STRINGC_TRANSFORMS_LIB_DEADOPS_H
