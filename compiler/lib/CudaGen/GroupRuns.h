//===- GroupRuns.h - runs of ops one call computes --------------*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. The planning loop the GEMM groups
// (GemmGroups.h) and the kernel groups (KernelGroups.h) share: the maximal
// runs of consecutive covered ops of a program (only free ops, pe.get_param
// and arith.constant, between them) that one call computes, each group's
// own rule deciding who leads, who joins and how a run is marked; and the
// op ranges of the groups marked, which the package's arena plan keeps
// apart.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_GROUPRUNS_H
#define STRINGC_CUDAGEN_GROUPRUNS_H

#include "stringc/CudaGen/StepProgram.h"
#include "stringc/Package/ArenaPlanner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <vector>

namespace stringc::cudagen {

/// A group's rule over the indices of a program's covered ops: `leads(first)`
/// whether op `first` may start a run (starting the rule's record of one);
/// `joins(o)` whether op `o`, adjacent to the run so far, extends it
/// (recording it); `mark(first, end)` marks the run [first, end) of at least
/// two ops, returning whether it did.
struct RunRule {
  llvm::function_ref<bool(size_t first)> leads;
  llvm::function_ref<bool(size_t o)> joins;
  llvm::function_ref<bool(size_t first, size_t end)> mark;
};

/// Applies `rule` to `ops` (the covered ops of `func`'s block, in order):
/// from the first op on, a leading op's run takes each next op while it is
/// adjacent (only free ops between) and joins; the search goes on after
/// the run (one op on when nothing leads). Returns the number of runs
/// marked.
int64_t markRuns(mlir::func::FuncOp func, const std::vector<mlir::Operation *> &ops,
                 const RunRule &rule);

/// The op ranges (first and last op index) of the groups marked in a
/// program's steps, `size(s)` the size of the group that steps `s` lead (1:
/// none): what the package's arena plan keeps apart.
ConcurrentOps groupRanges(const std::vector<OpSteps> &steps,
                          llvm::function_ref<int64_t(const OpSteps &)> size);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_GROUPRUNS_H
