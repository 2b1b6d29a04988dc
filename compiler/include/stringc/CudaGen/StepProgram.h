//===- StepProgram.h - what each op of a program does on the GPU -*- C++ -*-===//
//
// The device step program (docs/cuda.md, "The step program"): for every op of
// @forward and @gradients that does work, the ordered launches (generated
// kernels or cuBLAS GEMMs) that compute it, with every argument bound to
// something the runtime has: one of the op's operands or results (a device
// pointer: an input, a parameter slice, an arena slot), a scratch buffer of
// the op, an integer that may depend on the batch, or a float. The runtime's
// device executor walks these lists and knows nothing about pe ops.
//
// Each kernel family file registers, next to its KernelDefs, the OpLowerings
// of the ops it serves (KernelBuilder.h: appendXxxLowerings).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_STEPPROGRAM_H
#define STRINGC_CUDAGEN_STEPPROGRAM_H

#include "stringrt/CudaSection.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/TypeID.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stringc::cudagen {

// The step program's pieces are the package format's own types
// (stringrt/CudaSection.h): what a lowering builds is what the package holds.

/// An integer that may depend on the batch size: perBatch * batch + constant.
using BatchAffine = stringrt::CudaAffine;

/// A read-only array an op's kernels index with (an attribute's index table:
/// sparse_skew's support, pair_gather's index, offset_table's offsets): i32
/// or f32 values, written into the package and uploaded to the device once,
/// when the runtime's device model is created.
using ConstantArray = stringrt::CudaConstant;

/// One argument of a launch: a device pointer of the op's operand or result
/// `index`, of its scratch buffer `index` (OpSteps::scratchBytes), of
/// constant array `index`, an i64 `integer` evaluated at the batch size, or
/// an f32 `real`. Constant: in a lowering's OpSteps, an index into
/// OpSteps::constants; planKernels moves the arrays into the package's table
/// (KernelPlan::constants, equal arrays once) and renumbers the argument to
/// index that table.
using LaunchArg = stringrt::CudaArg;
using LaunchArgKind = stringrt::CudaArgKind;

/// A row-major strided-batched GEMM on cuBLAS, for i in [0, count):
///   C_i = alpha * op(A_i) * op(B_i) + beta * C_i,  op(A_i): m x k, op(B_i): k x n,
/// A_i = a + i * strideA (elements; 0 broadcasts one matrix), likewise B, C.
/// Matrices are contiguous row-major: A is m x k (k x m when transA), B is
/// k x n (n x k when transB), C is m x n. a, b, c are Operand/Result/Scratch
/// arguments. beta = 0 overwrites C (no read of its old contents).
///
/// GemmEpilogue::Bias adds `bias` (n floats, an Operand/Result/Scratch/Constant
/// argument) to every row of C: C = alpha op(A) op(B) + bias, for count 1
/// and beta 0 only. The runtime runs it as one cuBLASLt matmul
/// (CUBLASLT_EPILOGUE_BIAS) where it can, else as the GEMM followed by the
/// `pe_add_bias` kernel, which planKernels therefore puts in the package.
///
/// GemmEpilogue::BiasGrad is not a lowering's: planKernels gives it to a
/// pe.linear_grad_weight GEMM whose dY (B) the next op, a pe.sum_to, sums
/// to the bias shape (BiasGradients.h). Its `bias` is that sum_to's result
/// 0 (an argument of the next entry's op); the runtime runs the pair as one
/// cuBLASLt matmul (CUBLASLT_EPILOGUE_BGRADA), else the GEMM and then the
/// sum_to's own steps.
using GemmCall = stringrt::CudaGemm;
using GemmEpilogue = stringrt::CudaGemmEpilogue;
/// The kernel a bias epilogue falls back to: y[i] += b[i % d] (y, b, n, d).
inline constexpr const char *kBiasEpilogueFallbackKernel = "pe_add_bias";

/// The launch grid of a kernel whose family does not use one of the kernel
/// spec's grid rules (GridRule::Explicit): blocks along x, y, z.
struct ExplicitGrid {
  BatchAffine x = BatchAffine::fixed(1), y = BatchAffine::fixed(1), z = BatchAffine::fixed(1);
};

/// One launch: a generated kernel (by name) with its arguments in the order
/// of the kernel's params, or a GEMM.
struct Launch {
  std::string kernel; // empty for a GEMM
  std::vector<LaunchArg> args;
  std::optional<GemmCall> gemm;
  std::optional<ExplicitGrid> grid; // only for kernels of GridRule::Explicit
  /// A kernel group (stringrt::CudaLaunch::groupSize; KernelGroups.h): the
  /// launch (its op's first) does that of its op and the next groupSize - 1
  /// ops, reading each member's groupArgs from the table its GroupTable
  /// argument points to. 1: no group.
  int64_t groupSize = 1;
  std::vector<LaunchArg> groupArgs;

  static Launch kernelCall(std::string name, std::vector<LaunchArg> args) {
    Launch l;
    l.kernel = std::move(name);
    l.args = std::move(args);
    return l;
  }
  static Launch gemmCall(GemmCall g) {
    Launch l;
    l.gemm = std::move(g);
    return l;
  }
};

/// Everything one op does on the device, in order. Scratch buffers live for
/// the op's launches only (the runtime may reuse them for the next op); they
/// are not zeroed.
struct OpSteps {
  int64_t op = -1; // index in the program's op list (the package numbering)
  std::vector<BatchAffine> scratchBytes;
  std::vector<Launch> launches;
  /// The constant arrays the launches read (LaunchArg::constant); emptied by
  /// planKernels, which moves them into the package's table.
  std::vector<ConstantArray> constants;
};

/// The arithmetic of the attention kernels (stringc --gpu-precision):
/// F32 FMA everywhere, or BF16 tensor-core MMA (bf16 operands, f32
/// accumulation) for the attention ops that have MMA kernels.
enum class GpuPrecision { F32, BF16 };
const char *gpuPrecisionName(GpuPrecision precision); // "fp32", "bf16"

/// How one pe op class becomes launches. `lower` may decline an op it cannot
/// serve (an attribute or shape the kernels do not support) by returning
/// std::nullopt; the op is then served by the next lowering of its class or
/// listed as uncovered. Shapes: dimension 0 of a value with a dynamic
/// dimension is the batch (perBatch of BatchAffine). Make one with
/// loweringOf<pe::XOp>(...), so that the op is named by its C++ class.
struct OpLowering {
  mlir::TypeID op;         // the op class it serves
  llvm::StringRef opName;  // its name, for messages ("pe.layer_norm")
  std::function<std::optional<OpSteps>(mlir::Operation &op)> lower;
  /// A lowering for one precision only (the tensor-core kernels); none: any.
  std::optional<GpuPrecision> onlyFor;
  /// Among the lowerings of a class that apply, the highest benefit is
  /// tried first (the tensor-core attention before the f32 one); the
  /// registration order does not matter.
  int benefit = 0;
};

template <typename OpT>
OpLowering loweringOf(std::function<std::optional<OpSteps>(mlir::Operation &op)> lower,
                      std::optional<GpuPrecision> onlyFor = std::nullopt, int benefit = 0) {
  return {mlir::TypeID::get<OpT>(), OpT::getOperationName(), std::move(lower), onlyFor, benefit};
}

/// The number of elements of a ranked tensor type as perBatch * batch +
/// constant (a dynamic dimension stands for the batch; at most one).
BatchAffine elementCount(mlir::Type tensorType);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_STEPPROGRAM_H
