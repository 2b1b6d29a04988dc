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

namespace stringc {
struct ModelGraph;

/// Builds the `pe` module for `graph`, verifies it, and prints it to `out`.
/// On failure writes the diagnostics to `err` and returns non-zero.
int printModelAsMLIR(const ModelGraph &graph, std::ostream &out, std::ostream &err);

} // namespace stringc

#endif // STRINGC_MLIRGEN_MLIRGEN_H
