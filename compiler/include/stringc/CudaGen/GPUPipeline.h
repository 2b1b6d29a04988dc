//===- GPUPipeline.h - kernel module -> NVVM -> PTX -> cubin ----*- C++ -*-===//
//
// Lowers the kernel module of GPUKernels.h with upstream passes
// (convert-scf-to-cf, convert-gpu-to-nvvm, reconcile-unrealized-casts), then
// translates each gpu.module to LLVM IR and to PTX with LLVM's NVPTX backend
// in-process (gpu-module-to-binary, format=isa, libdevice linked from the
// CUDA toolkit for erf/tanh/sqrt), then assembles each PTX to a cubin with
// `ptxas -arch=<arch>`.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_GPUPIPELINE_H
#define STRINGC_CUDAGEN_GPUPIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <map>
#include <string>

namespace stringc::cudagen {

/// The CUDA toolkit directory: $CUDA_HOME, else $CUDA_PATH, else
/// /usr/local/cuda (its nvvm/libdevice and bin/ptxas are used).
std::string cudaToolkitPath();

/// Checks that `arch` is `sm_<digits>` with a known NVPTX chip (sm_50 ..
/// sm_90a); the message says what is accepted.
mlir::LogicalResult checkGpuArch(const std::string &arch, std::string &message);

/// The PTX ISA version (`+ptxNN` feature) used for `arch`.
std::string ptxFeatureFor(const std::string &arch);

/// Lowers every gpu.module of `module` to the NVVM/LLVM dialects in place.
mlir::LogicalResult lowerKernelsToNVVM(mlir::ModuleOp module);

/// Serializes every (lowered) gpu.module to PTX; `ptx` maps the module's
/// name to its PTX text. Replaces the gpu.modules by gpu.binary ops.
mlir::LogicalResult serializeKernelsToPTX(mlir::ModuleOp module,
                                          std::map<std::string, std::string> &ptx);

/// The ptxas of the CUDA toolkit (cudaToolkitPath()), else the one on PATH;
/// "" when there is none.
std::string ptxasPath();

/// Runs `ptxas [-v] -arch=ARCH -O3` on `ptx` (one home for both callers:
/// assembleCubin and the launch report's ptxas -v). On success `cubin` holds
/// the assembled cubin and `log` what ptxas printed; on failure `message`
/// says why (ptxas missing or failing, with its output). `kernel` names the
/// kernel in messages and temporary files.
mlir::LogicalResult runPtxas(const std::string &kernel, const std::string &ptx,
                             const std::string &arch, bool verbose, std::string &cubin,
                             std::string &log, std::string &message);

/// Assembles `ptx` for `arch` with ptxas into `cubin`. `kernel` names the
/// kernel in error messages (ptxas missing, ptxas failing with its output).
mlir::LogicalResult assembleCubin(const std::string &kernel, const std::string &ptx,
                                  const std::string &arch, std::string &cubin,
                                  std::string &message);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_GPUPIPELINE_H
