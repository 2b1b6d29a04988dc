//===- GemmGroups.h - runs of GEMMs one cuBLAS call computes ---*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. After a program's ops are lowered,
// planKernels marks the runs of same-shaped independent GEMMs that the
// runtime computes as one cublasGemmBatchedEx (stringrt::CudaGemm::
// groupSize; docs/cuda.md, "Grouped GEMMs").
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_GEMMGROUPS_H
#define STRINGC_CUDAGEN_GEMMGROUPS_H

#include "stringc/CudaGen/StepProgram.h"
#include "stringc/Package/ArenaPlanner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace stringc::cudagen {

/// Marks in `steps` (the steps of `ops`, the covered ops of `func`'s block
/// in order) each maximal run of consecutive ops (only free ops between
/// them) whose steps are one GEMM alone: count 1, no epilogue, no addend, A
/// and B operands and C a result, the same m, n, k, transposes, alpha, beta
/// and storage types of A, B and C (`bf16` by package value id, `ids`), and
/// no member reading or writing a value an earlier member writes. The run's
/// first GEMM gets groupSize = the run's length (>= 2). The package's arena
/// plan must then keep each group's values apart (gemmGroupRanges).
/// Returns the number of groups marked.
int64_t groupGemms(mlir::func::FuncOp func, const std::vector<mlir::Operation *> &ops,
                   std::vector<OpSteps> &steps, const llvm::DenseMap<mlir::Value, int64_t> &ids,
                   const std::vector<bool> &bf16);

/// The op ranges (first and last op index) of the groups marked in a
/// program's steps: what the package's arena plan keeps apart
/// (stringc::packageArena), so that no member's C shares memory with
/// another member's matrices.
ConcurrentOps gemmGroupRanges(const std::vector<OpSteps> &steps);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_GEMMGROUPS_H
