//===- MLIRGen.h - lower a checked model graph to the pe dialect -*- C++ -*-===//
//
// The frontend (Lexer -> Parser -> Sema) produces a ModelGraph: plain C++, no
// MLIR. This file turns it into a module of the `pe` dialect. The entry point
// keeps MLIR types out of its signature so that the driver and the frontend
// tests need not include MLIR headers.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_MLIRGEN_MLIRGEN_H
#define STRINGC_MLIRGEN_MLIRGEN_H

#include <ostream>
#include <string>

namespace stringc {
struct ModelGraph;

/// How far printModelAsMLIR takes the module before printing it.
enum class EmitStage {
  /// The model as built: parameters, optimizer, dataset and @forward.
  Forward,
  /// After the pe-autodiff pass: @forward plus @gradients, the loss and the
  /// gradient of every trainable parameter (docs/autodiff.md).
  Train,
};

/// Builds the `pe` module for `graph`, verifies it, runs the passes of
/// `stage`, and prints it to `out`. Diagnostics (errors, and warnings such as
/// a parameter that does not affect the loss) go to `err`; returns non-zero
/// on failure.
int printModelAsMLIR(const ModelGraph &graph, std::ostream &out, std::ostream &err,
                     EmitStage stage = EmitStage::Forward);

/// Builds the `pe` module for `graph`, verifies it, runs pe-autodiff and
/// writes the model package (docs/package.md) for `target` to `path`
/// (atomically; nothing is written on failure). Diagnostics go to `err`;
/// returns non-zero on failure.
int writeModelPackage(const ModelGraph &graph, const std::string &path,
                      const std::string &target, std::ostream &err);

} // namespace stringc

#endif // STRINGC_MLIRGEN_MLIRGEN_H
