//===- CudaTarget.h - stringc --target=cuda ---------------------*- C++ -*-===//
//
// The driver's entry point for the CUDA target (docs/cuda.md): it takes the
// pe training module as the driver prints it for --emit=pe-train (so every
// pass option of the driver applies), plans and generates its GPU kernels,
// lowers them to NVVM, translates them to PTX, assembles cubins, and writes
// them with the manifest into a package of target "cuda" (docs/package.md).
//
// Like MLIRGen.h this header keeps MLIR types out of its signatures.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_GPU_CUDATARGET_H
#define STRINGC_GPU_CUDATARGET_H

#include <cstdint>
#include <ostream>
#include <string>

namespace stringc {

/// What --target=cuda produces.
enum class CudaEmit {
  /// The kernels after convert-gpu-to-nvvm (the NVVM and LLVM dialects).
  NVVM,
  /// The PTX of every kernel, each after a `// kernel: NAME` line.
  PTX,
  /// The package: manifest, kernel table, PTX and cubin per kernel.
  Package,
  /// The launch report of one training step (LaunchReport.h), as text.
  LaunchReport,
};

struct CudaOptions {
  /// The GPU architecture the cubins are built for (ptxas -arch).
  std::string arch = "sm_90";
  /// Also generate the kernels no op of the model uses (with no uses in the
  /// kernel table): every kernel the generator has, for testing it.
  bool allKernels = false;
  /// The attention kernels' arithmetic: "fp32" (FMA) or "bf16" (tensor-core
  /// mma.sync, bf16 operands and f32 accumulation; sm_80 and newer).
  /// Recorded in the package's cuda section as "precision".
  std::string precision = "fp32";
  /// The batch size of CudaEmit::LaunchReport.
  int64_t reportBatch = 128;
};

/// Compiles the pe training module `peTrain` (textual, with @forward and
/// @gradients) for CUDA. NVVM, PTX and the launch report are written to `out`; a package is
/// written atomically to `path`. Diagnostics go to `err`; returns non-zero
/// on failure.
int compileForCuda(const std::string &peTrain, const CudaOptions &options, CudaEmit emit,
                   std::ostream &out, const std::string &path, std::ostream &err);

/// Checks a --gpu-arch value; on failure `message` says what is accepted.
bool isValidGpuArch(const std::string &arch, std::string &message);

} // namespace stringc

#endif // STRINGC_GPU_CUDATARGET_H
