//===- Compilation.h - one compilation of a model graph ---------*- C++ -*-===//
//
// Private to compiler/lib/Driver. A Compilation owns an MLIR context whose
// diagnostics point into the .pe file (the op locations are its line:col,
// printed as file:line:col: error: ... like the frontend's), builds the pe
// module of a ModelGraph, verifies it and runs the passes up to a stage;
// each phase is timed for --time-phases.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_DRIVER_COMPILATION_H
#define STRINGC_DRIVER_COMPILATION_H

#include "stringc/Driver/Driver.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_os_ostream.h"

#include <chrono>
#include <optional>
#include <string>

namespace stringc {

class Compilation {
public:
  /// `withCuda`: the context also holds the CUDA target's dialects, so that
  /// the kernel module is built next to the pe module.
  Compilation(const ModelGraph &graph, std::ostream &diagOut, const CompileOptions &options,
              bool withCuda = false);

  /// Prints "stringc: time: NAME: 12.3 ms" when it goes out of scope and
  /// --time-phases is on.
  class Phase {
  public:
    Phase(Compilation &compilation, const char *name);
    ~Phase();

  private:
    llvm::raw_ostream *out;
    const char *name;
    std::chrono::steady_clock::time_point start;
  };

  /// Builds and verifies the module and runs the passes up to `stage`
  /// (Forward: none; Optimized: the optimisation passes; Train and later:
  /// pe-autodiff too). `explain` makes the passes report each rewrite;
  /// `disableAlso` switches one more pass off.
  mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
  build(EmitStage stage, bool explain = false, std::optional<std::string> disableAlso = {});

  /// Where diagnostics and timings go (flush before reading the stream).
  llvm::raw_ostream &diagnosticStream() { return diagStream; }

private:
  mlir::MLIRContext context;
  const ModelGraph &graph;
  const CompileOptions &options;
  llvm::raw_os_ostream diagStream;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics;
};

} // namespace stringc

#endif // STRINGC_DRIVER_COMPILATION_H
