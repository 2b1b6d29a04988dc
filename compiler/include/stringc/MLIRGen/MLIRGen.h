//===- MLIRGen.h - lower a checked model graph to the pe dialect -*- C++ -*-===//
//
// The frontend (Lexer -> Parser -> Sema) produces a ModelGraph: plain C++, no
// MLIR. buildModule turns it into a module of the `pe` dialect: parameters,
// optimizer, dataset and @forward, every op at its .pe source location. The
// compile driver (Driver/Driver.h) verifies it and runs the passes.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_MLIRGEN_MLIRGEN_H
#define STRINGC_MLIRGEN_MLIRGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

namespace stringc {
struct ModelGraph;

/// The module of `graph` in `context` (which must have the pe, func and
/// arith dialects loaded); fails with a diagnostic at the op's location.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> buildModule(mlir::MLIRContext &context,
                                                               const ModelGraph &graph);

} // namespace stringc

#endif // STRINGC_MLIRGEN_MLIRGEN_H
