//===- BiasGradients.h - bias gradients as the weight GEMM's epilogue -*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. After a program's ops are lowered and
// grouped, planKernels folds each pe.sum_to that sums exactly the dY of the
// pe.linear_grad_weight just before it (only free ops between) into that
// GEMM's bias-gradient epilogue (stringrt::CudaGemmEpilogue::BiasGrad;
// docs/cuda.md, "Bias-gradient epilogue"): one cuBLASLt matmul writes dW
// and db. The sum_to keeps its steps, the runtime's fallback.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_BIASGRADIENTS_H
#define STRINGC_CUDAGEN_BIASGRADIENTS_H

#include "stringc/CudaGen/StepProgram.h"
#include "stringc/Package/ArenaPlanner.h"

#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace stringc::cudagen {

/// Gives the GEMM of each pe.linear_grad_weight entry of `steps` (the
/// steps of `ops`, in program order) the bias-gradient epilogue where the
/// next entry is a pe.sum_to of the op's dY (operand 1) to [O] (O = dY's
/// last dimension, the GEMM's n), only free ops between, with its result
/// stored as the GEMM's C is (`bf16` by package value id, `ids`), neither
/// entry in a GEMM or kernel group, and the GEMM one launch alone (count 1,
/// beta 0, no epilogue, no addend). The epilogue's bias is the sum_to's
/// result 0. Returns the number of GEMMs given one.
int64_t fuseBiasGradients(const std::vector<mlir::Operation *> &ops, std::vector<OpSteps> &steps,
                          const llvm::DenseMap<mlir::Value, int64_t> &ids,
                          const std::vector<bool> &bf16);

/// The op ranges (the GEMM's op, the sum_to's op) of the fused pairs: the
/// GEMM writes the sum_to's result, so the package's arena plan keeps the
/// values of both ops apart (stringc::packageArena).
ConcurrentOps biasGradientRanges(const std::vector<OpSteps> &steps);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_BIASGRADIENTS_H
