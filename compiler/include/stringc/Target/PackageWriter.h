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

#include <string>

namespace stringc {

/// The package format version the writer produces.
constexpr int kPackageVersion = 1;
/// The target name of packages run on the runtime's reference kernels.
constexpr const char *kReferenceTarget = "cpu-reference";

/// The manifest of `module` as JSON. Anything the package format cannot
/// express (an op with a region, an op outside the pe dialect other than
/// arith.constant, a non-splat constant, an unknown attribute kind, a
/// non-finite float) is reported with emitError on the offending op.
mlir::FailureOr<std::string> buildPackageManifest(mlir::ModuleOp module);

/// Builds the manifest and writes the package to `path` (atomically: a
/// failure leaves a previous file intact), for `target`.
mlir::LogicalResult writePackage(mlir::ModuleOp module, const std::string &path,
                                 const std::string &target = kReferenceTarget);

} // namespace stringc

#endif // STRINGC_TARGET_PACKAGEWRITER_H
