//===- GatherUtils.h - helpers shared by the gather rewrites ----*- C++ -*-===//
//
// Private to compiler/lib/Transforms: the cost helper that
// pe-skip-gather, pe-factor-generators and pe-distinct-offsets share.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_LIB_GATHERUTILS_H
#define STRINGC_TRANSFORMS_LIB_GATHERUTILS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

namespace stringc::gather {

/// `consumer` and the pure ops that only it needs, transitively through
/// `roots` (some of its operands): what the rewrite of `consumer` that drops
/// those operands makes dead. For the "before" cost of a rewrite.
inline llvm::SmallVector<mlir::Operation *> deadAfterDropping(mlir::Operation *consumer,
                                                              llvm::ArrayRef<mlir::Value> roots) {
  llvm::SetVector<mlir::Operation *> dead;
  dead.insert(consumer);
  llvm::SmallVector<mlir::Operation *> worklist;
  for (mlir::Value root : roots)
    if (mlir::Operation *def = root.getDefiningOp())
      worklist.push_back(def);
  while (!worklist.empty()) {
    mlir::Operation *op = worklist.pop_back_val();
    if (dead.contains(op) || !mlir::isPure(op))
      continue;
    if (!llvm::all_of(op->getUsers(), [&](mlir::Operation *user) { return dead.contains(user); }))
      continue;
    dead.insert(op);
    for (mlir::Value operand : op->getOperands())
      if (mlir::Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  }
  return llvm::SmallVector<mlir::Operation *>(dead.begin(), dead.end());
}

} // namespace stringc::gather

#endif // STRINGC_TRANSFORMS_LIB_GATHERUTILS_H
