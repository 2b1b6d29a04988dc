//===- PackageWriter.h - write a pe module as a model package ---*- C++ -*-===//
//
// A package (docs/package.md) is a safetensors container whose metadata holds
// the format, version, target and a JSON manifest: the model's inputs,
// parameters, optimizer, dataset and the straight-line programs `forward` and
// `gradients` (so the module must have been through pe-autodiff).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_TARGET_PACKAGEWRITER_H
#define STRINGC_TARGET_PACKAGEWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

#include <string>

namespace stringc {

/// The package format version the writer produces (2: ops may name
/// compiled kernels, target "cpu" carries a shared object).
constexpr int kPackageVersion = 2;
/// The target name of packages run on the runtime's kernel library alone.
constexpr const char *kReferenceTarget = "cpu-reference";
/// The target name of packages that carry compiler-generated CPU kernels.
constexpr const char *kCpuTarget = "cpu";

/// One call of a compiled kernel for an op (docs/package.md, "kernels").
struct PackageKernelCall {
  std::string symbol; // the exported function in the shared object
  int64_t range = 1;  // iterations of its parallel loop; -1: the batch size
  int64_t grain = 1;  // fewest iterations worth handing to a thread
};

/// What a "cpu" package adds to the manifest and the container: for each op
/// that runs on generated kernels, its calls; the shared object; the target
/// it was compiled for.
struct PackageKernels {
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<PackageKernelCall, 2>> calls;
  std::string sharedObject; // ELF shared object bytes
  std::string triple, cpu, features;
};

/// The manifest of `module` as JSON. Anything the package format cannot
/// express (an op with a region, an op outside the pe dialect other than
/// arith.constant, a non-splat constant, an unknown attribute kind, a
/// non-finite float) is reported with emitError on the offending op.
/// With `kernels`, ops that run on compiled kernels get a "kernels" entry.
mlir::FailureOr<std::string> buildPackageManifest(mlir::ModuleOp module,
                                                  const PackageKernels *kernels = nullptr);

/// Builds the manifest and writes the package to `path` (atomically: a
/// failure leaves a previous file intact), for `target`. `kernels` is
/// required for kCpuTarget (the shared object goes into the container) and
/// not allowed for kReferenceTarget.
mlir::LogicalResult writePackage(mlir::ModuleOp module, const std::string &path,
                                 const std::string &target = kReferenceTarget,
                                 const PackageKernels *kernels = nullptr);

} // namespace stringc

#endif // STRINGC_TARGET_PACKAGEWRITER_H
