//===- PackageBuilder.h - a pe module as a model package --------*- C++ -*-===//
//
// A package (docs/package.md) is a safetensors container whose metadata holds
// the format, version, target and a JSON manifest: the model's inputs,
// parameters, optimizer, dataset and the straight-line programs `forward` and
// `gradients` (so the module must have been through pe-autodiff).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_PACKAGE_PACKAGEBUILDER_H
#define STRINGC_PACKAGE_PACKAGEBUILDER_H

#include "stringrt/Package.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

#include <string>

namespace stringc {

/// The targets (stringrt/Package.h owns the format: its constants, its
/// writer and its reader).
using stringrt::kCpuTarget;
using stringrt::kReferenceTarget;

/// What a "cpu" package adds to the manifest and the container: for each op
/// that runs on generated kernels, its calls; the shared object; the target
/// it was compiled for.
struct PackageKernels {
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<stringrt::ProgramKernel, 2>> calls;
  std::string sharedObject; // ELF shared object bytes
  std::string triple, cpu, features;
};

/// The manifest of `module`, for the runtime's package writer
/// (stringrt::writePackage). Anything the package format cannot express (an
/// op with a region, an op outside the pe dialect other than arith.constant,
/// a non-splat constant, an unknown attribute kind, a non-finite float, a
/// string that is not UTF-8) is reported with emitError on the offending op.
/// With `kernels`, ops that run on compiled kernels get their calls.
mlir::FailureOr<stringrt::Manifest> buildPackageManifest(mlir::ModuleOp module,
                                                         const PackageKernels *kernels = nullptr);

/// Builds the manifest and writes the package to `path` (atomically: a
/// failure leaves a previous file intact), for `target`. `kernels` is
/// required for kCpuTarget (the shared object goes into the container) and
/// not allowed for kReferenceTarget.
mlir::LogicalResult writeModulePackage(mlir::ModuleOp module, const std::string &path,
                                 const std::string &target = kReferenceTarget,
                                 const PackageKernels *kernels = nullptr);

} // namespace stringc

#endif // STRINGC_PACKAGE_PACKAGEBUILDER_H
