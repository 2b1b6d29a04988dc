//===- CudaTarget.h - the pe training module compiled for CUDA --*- C++ -*-===//
//
// The CUDA target (docs/cuda.md): from the pe training module (@forward and
// @gradients after the passes, in the driver's context) it plans and
// generates the GPU kernels, lowers them to NVVM, translates them to PTX,
// assembles cubins, and writes them with the manifest into a package of
// target "cuda" (docs/package.md); or prints the NVVM, the PTX or the launch
// report (LaunchReport.h).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_CUDATARGET_H
#define STRINGC_CUDAGEN_CUDATARGET_H

#include "stringc/CudaGen/CudaOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <ostream>
#include <string>

namespace stringc {

/// Whether this stringc has the CUDA target: false where it was configured
/// with -DSTRINGC_WITH_CUDA=OFF (scripts/main.sh on a fresh build directory),
/// whose Driver/CudaTargetMissing.cpp stands in for compiler/lib/CudaGen.
bool cudaTargetBuilt();

/// The dialects the CUDA target adds to the driver's context (the kernel
/// module's gpu, nvvm, llvm, ... and their translations).
void registerCudaTargetDialects(mlir::DialectRegistry &registry);

/// Compiles `train` (its context must hold registerCudaTargetDialects') for
/// CUDA. NVVM, PTX and the launch report are written to `out`; a package is
/// written atomically to `path`. Diagnostics go to the context's handler and
/// to `err`; returns non-zero on failure.
int compileForCuda(mlir::ModuleOp train, const CudaOptions &options, CudaEmit emit,
                   std::ostream &out, const std::string &path, std::ostream &err);

} // namespace stringc

#endif // STRINGC_CUDAGEN_CUDATARGET_H
