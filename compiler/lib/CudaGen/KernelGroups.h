//===- KernelGroups.h - runs of ops one kernel launch computes --*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. After a program's ops are lowered,
// planKernels marks the runs of independent ops of one kind and shape that
// one launch computes, a block (or a row of blocks) a member reading its
// operand and result from a pointer table the runtime writes when a batch's
// buffers are placed (stringrt::CudaLaunch::groupSize; docs/cuda.md,
// "Kernel groups"): the layers' pe.cayley_weight ops (`pe_cayley_weights`:
// the serial Gauss-Jordan chains run side by side on different SMs instead
// of one after another) and their skew builders and skew gradients
// (pe.skew, pe.skew_grad, pe.sparse_skew, pe.sparse_skew_grad: one launch
// instead of one a layer); and the first launches of runs of ops with more
// launches (a group of first launches: pe.cayley_weight_grad's
// `pe_cayley_inverse_of_weight`, M from W into scratch, as
// `pe_cayley_inverses_of_weight`), each member's other launches then run
// at its own place, reading what the group's launch wrote in its scratch,
// but for the later launches that are, in every member, one GEMM of the same
// form: those the first member runs as grouped GEMMs (GemmCall::groupSize:
// one cublasGemmBatchedEx over the members' launch; the Cayley weight
// gradients' T = dw^T M^T and ds = -2 M^T T).
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

/// The launch of a group of `members` ops like `leader`, whose own launch
/// (its lowering's only one) is `own` (CayleyKernels.cpp): for
/// pe.cayley_weight, `pe_cayley_weights` over a grid of `members` blocks,
/// its table of (s, W) pointers per member, nullopt where the kernel cannot
/// hold the matrix in shared memory (d > 64); for pe.skew, pe.skew_grad,
/// pe.sparse_skew and pe.sparse_skew_grad, `pe_skews`, `pe_skew_grads`,
/// `pe_sparse_skews`, `pe_sparse_skew_grads`: the own kernel's grid along x,
/// a member along y, its table of (result, operand) pointers per member,
/// the sparse support (a constant) the leader's; for pe.cayley_weight_grad's
/// first launch `pe_cayley_inverse_of_weight`,
/// `pe_cayley_inverses_of_weight` likewise, its table of (scratch 0: M,
/// operand 2: W) pointers per member. nullopt for any other op or launch.
std::optional<Launch> cayleyGroupLaunch(mlir::Operation &leader, const Launch &own,
                                        int64_t members);

/// Marks in `steps` (the steps of `ops`, the covered ops of `func`'s block
/// in order) each maximal run of consecutive ops (only free ops between
/// them) of one name, operand and result types and attributes, whose steps
/// are as many launches, the first of one kernel with the same constants,
/// which cayleyGroupLaunch can group, none of which reads an earlier
/// member's result. When that launch is the op's only one, the run's first
/// op's steps become the group's launch (no scratch), the others keep
/// theirs (the runtime skips them). Otherwise (a group of first launches;
/// every member's scratch of a size independent of the batch) the first
/// op's first launch becomes the group's, the others keep theirs (the
/// runtime skips their first), and each member's scratch gets a buffer 0 in
/// front, as large as the members' before it take in the runtime's layout,
/// so that the members' buffers lie apart (the group's launch writes them
/// all first; the runtime checks: stringrt::cuda::checkGroupScratch), and
/// each later launch that is, in every member, one plain GEMM (count 1, no
/// epilogue or addend) of the first member's form gets groupSize = the
/// run's length on the first member (the runtime runs the members' launch
/// as one grouped call there and skips it in the others). The
/// package's arena plan must then keep each group's values apart
/// (kernelGroupRanges). Returns the number of groups marked.
int64_t groupKernels(mlir::func::FuncOp func, const std::vector<mlir::Operation *> &ops,
                     std::vector<OpSteps> &steps);

/// The op ranges (first and last op index) of the kernel groups marked in
/// a program's steps: what the package's arena plan keeps apart.
ConcurrentOps kernelGroupRanges(const std::vector<OpSteps> &steps);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_KERNELGROUPS_H
