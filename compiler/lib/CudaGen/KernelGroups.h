//===- KernelGroups.h - runs of ops one kernel launch computes --*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. After a program's ops are lowered,
// planKernels marks the runs of independent pe.cayley_weight ops of one
// shape that one launch of `pe_cayley_weights` computes, a block a member
// reading its operand and result from a pointer table the runtime writes
// when a batch's buffers are placed (stringrt::CudaLaunch::groupSize;
// docs/cuda.md, "Kernel groups"). The serial Gauss-Jordan chains of the
// layers then run side by side on different SMs instead of one after
// another.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_KERNELGROUPS_H
#define STRINGC_CUDAGEN_KERNELGROUPS_H

#include "stringc/CudaGen/StepProgram.h"
#include "stringc/Package/ArenaPlanner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <vector>

namespace stringc::cudagen {

/// The launch of a group of `members` pe.cayley_weight ops led by `leader`
/// (CayleyKernels.cpp): `pe_cayley_weights` over a grid of `members`
/// blocks, its table of (s, W) pointers per member; nullopt where the
/// kernel cannot hold the matrix in shared memory (d > 64).
std::optional<Launch> cayleyWeightsGroupLaunch(mlir::Operation &leader, int64_t members);

/// Marks in `steps` (the steps of `ops`, the covered ops of `func`'s block
/// in order) each maximal run of consecutive pe.cayley_weight ops (only
/// free ops between them) of one operand type whose steps are their own
/// lowering's and none of which reads an earlier member's result: the
/// run's first op's steps become the group's launch (no scratch), the
/// others keep theirs (the runtime skips them). The package's arena plan
/// must then keep each group's values apart (kernelGroupRanges). Returns
/// the number of groups marked.
int64_t groupKernels(mlir::func::FuncOp func, const std::vector<mlir::Operation *> &ops,
                     std::vector<OpSteps> &steps);

/// The op ranges (first and last op index) of the kernel groups marked in
/// a program's steps: what the package's arena plan keeps apart.
ConcurrentOps kernelGroupRanges(const std::vector<OpSteps> &steps);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_KERNELGROUPS_H
