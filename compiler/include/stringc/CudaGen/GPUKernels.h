//===- GPUKernels.h - pe ops -> gpu.func kernels for NVIDIA GPUs -*- C++ -*-===//
//
// The CUDA code generator (docs/cuda.md). From the `pe` training module
// (@forward and @gradients after pe-autodiff) it plans which GPU kernels the
// programs need, builds each as a `gpu.func` in its own `gpu.module` carrying
// an `#nvvm.target`, and (GPUPipeline.h) lowers them to NVVM, PTX and cubins.
//
// Kernels take plain device pointers (`!llvm.ptr`), `i64` sizes and `f32`
// scalars, so the runtime launches them with a flat argument array (the
// kernel's `params` signature in the package). Which op a kernel serves is
// recorded so the runtime and docs can tell what runs on the GPU.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_GPUKERNELS_H
#define STRINGC_CUDAGEN_GPUKERNELS_H

#include "stringc/CudaGen/StepProgram.h"

#include "stringrt/CudaSection.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringc::cudagen {

/// A kernel parameter's kind, as the runtime passes it (the package
/// format's own enum, stringrt/CudaSection.h): Ptr, I64, F32.
using ParamKind = stringrt::CudaParamKind;

/// How the runtime sizes the grid of a launch (the format's enum, named by
/// stringrt::cudaGridRuleName and computed by stringrt::cudaRuleGridX):
/// Elements: grid-stride loop over `n` elements (the first i64 parameter);
/// Rows: one warp per row, blockDim = (32, rowsPerBlock), rows = first i64;
/// Columns: one thread per column, columns = the second i64 parameter;
/// Partials: one warp per block, grid = min(ceil(n / 32), 1024) with n the
/// first i64 parameter, the first pointer receives gridDim.x partial results;
/// Explicit: the launch names its grid (Launch::grid, StepProgram.h), for
/// families whose grid is not a function of one size parameter (2-D grids,
/// chunked sums).
using GridRule = stringrt::CudaGridRule;

/// One use of a kernel by an op of a package program.
struct KernelUse {
  std::string program; // "forward" or "gradients"; "optimizer" for the
                       // optimizer's, "data" for the images' augmentation
  int64_t op = -1;     // index in the program's op list; -1 for the runtime's
};

/// One kernel: its name (also the gpu.module's and gpu.func's), the pe op it
/// implements, its parameter signature and launch shape.
struct GpuKernelSpec {
  std::string name;
  std::string peOp;
  std::vector<std::pair<std::string, ParamKind>> params; // (name, kind)
  GridRule grid = GridRule::Elements;
  int64_t blockX = 256, blockY = 1;
  /// Bytes of dynamic shared memory a block is launched with (0: static
  /// shared memory only). A kernel whose shared arrays exceed the 48 KiB of
  /// static shared memory keeps them all in one extern array of this size
  /// (KernelBuilder::dynamicSharedOffset); stringrt::CudaKernel::dynamicShared.
  int64_t dynamicSharedBytes = 0;
  std::vector<KernelUse> uses;
};

/// The kernels of a module and the ops no kernel covers yet.
struct KernelPlan {
  std::vector<GpuKernelSpec> kernels;
  /// Per program, the pe op names that have no GPU steps (each name once,
  /// in program order): no lowering accepts them.
  std::vector<std::pair<std::string, std::vector<std::string>>> uncovered;
  int64_t coveredOps = 0, totalOps = 0;
  /// Per program ("forward", "gradients"), the steps of every covered op in
  /// program order (StepProgram.h); free ops (pe.get_param, arith.constant)
  /// and uncovered ops have none.
  std::vector<std::pair<std::string, std::vector<OpSteps>>> steps;
  /// The constant arrays of both programs' launches (LaunchArg::Constant
  /// indexes this table; equal arrays are stored once).
  std::vector<ConstantArray> constants;
  /// Per program, the values stored in bf16 on the device (package value
  /// ids, increasing; precision BF16 only): assignStorage in KernelPlan.cpp.
  std::vector<std::pair<std::string, std::vector<std::pair<int64_t, stringrt::DType>>>>
      valueDTypes;
};

/// Plans the step program of `module` (which must have @forward and
/// @gradients: each op's steps from the op lowerings) and the kernels it
/// launches. An op whose lowering breaks a kernel's signature is an error.
/// The AdamW kernel is planned when the module's pe.optimizer is adamw.
/// With `allKernels`, every kernel the generator has is planned, those that
/// no op uses last and without uses (the tensor-core kernels only with
/// BF16). `precision` picks the attention kernels (StepProgram.h).
/// `extraKernels` names more kernels to plan without uses (stringc
/// --gpu-kernel=NAME): a kernel or a bf16-storage variant (NAME__ and a
/// `b` or `f` per storage parameter); an unknown name is an error.
mlir::FailureOr<KernelPlan> planKernels(mlir::ModuleOp module, bool allKernels = false,
                                        GpuPrecision precision = GpuPrecision::F32,
                                        llvm::ArrayRef<std::string> extraKernels = {});

/// Builds a module (`gpu.container_module`) with one gpu.module per planned
/// kernel, each targeted at `#nvvm.target<chip = arch>`, holding the kernel
/// as a `gpu.func` on `!llvm.ptr` / `i64` / `f32` arguments. Kernels use
/// arith, math, scf, gpu and llvm (pointer) ops only.
mlir::OwningOpRef<mlir::ModuleOp> buildKernelModule(mlir::MLIRContext &context,
                                                     const KernelPlan &plan,
                                                     const std::string &arch);

/// Registers the dialects and interfaces the kernel module and its lowering
/// need (gpu, nvvm, llvm, arith, math, scf, cf, the NVVM target and the
/// LLVM IR translations).
void registerGPUCodegenDialects(mlir::DialectRegistry &registry);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_GPUKERNELS_H
