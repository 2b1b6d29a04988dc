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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace stringc::cudagen {

/// Marks in `steps` (the steps of `ops`, the covered ops of `func`'s block
/// in order) each maximal run of consecutive ops (only free ops between
/// them) whose steps are one GEMM alone: count 1, no epilogue, no addend, A
/// and B operands and C a result, the same m, n, k, transposes, alpha, beta
/// and storage types of A, B and C (`bf16` by package value id, `ids`), no
/// member reading a value an earlier member writes, and no member's C in
/// the arena slot (the package's plan, planArena) of another member's A, B
/// or C. The run's first GEMM gets groupSize = the run's length (>= 2).
/// Returns the number of groups marked.
int64_t groupGemms(mlir::func::FuncOp func, const std::vector<mlir::Operation *> &ops,
                   std::vector<OpSteps> &steps, const llvm::DenseMap<mlir::Value, int64_t> &ids,
                   const std::vector<bool> &bf16);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_GEMMGROUPS_H
