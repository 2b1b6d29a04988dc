//===- Sema.h - checks a .pe AST and builds its ModelGraph ------*- C++ -*-===//
//
// Semantic analysis runs the top-level statements in order, like an
// interpreter of the compile-time language: constants are folded, `for` loops
// unrolled, blocks instantiated at each call (their parameters get one copy
// per use), and every tensor expression becomes a graph op whose shape is
// inferred and checked. Errors are reported with the offending argument's
// location and analysis continues; a name whose definition failed is bound to
// a poison value that silences follow-on errors.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_SEMA_H
#define STRINGC_FRONTEND_SEMA_H

#include "stringc/Frontend/AST.h"
#include "stringc/Frontend/ConstantOverrides.h"
#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Graph.h"

#include <optional>
#include <string>
#include <vector>

namespace stringc {

struct AnalyzerOptions {
  /// Relative paths in `load(...)` and `data ...` are resolved against this
  /// directory (the .pe file's); empty means the current directory.
  std::string baseDir;
  /// Top-level constants whose values replace the file's (stringc -D).
  std::vector<ConstantOverride> overrides;
};

/// Checks `module` and returns its graph, or nullopt if any error was reported.
std::optional<ModelGraph> analyzeModule(const ast::Module &module, const SourceManager &sources,
                                        DiagnosticEngine &diags, const AnalyzerOptions &options);

} // namespace stringc

#endif // STRINGC_FRONTEND_SEMA_H
