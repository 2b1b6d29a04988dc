//===- Pipeline.h - the order of stringc's passes ----------------*- C++ -*-===//
//
// stringc compiles a model through the optimisation passes (in
// optimizationPassNames() order, minus the ones switched off), then
// pe-autodiff, then for --target=cpu and --target=cuda targetPassNames(),
// then for --target=cuda cudaPassNames().
// `--disable-pass=NAME` removes one, `--enable-pass=NAME` adds an opt-in one;
// `--pass-pipeline=` replaces the optimisation part with a textual MLIR
// pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_PIPELINE_H
#define STRINGC_TRANSFORMS_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stringc {

struct PipelineOptions {
  /// Pass flags (e.g. "pe-hoist") left out of the default pipeline.
  std::set<std::string> disabled;
  /// Opt-in passes (optInPassNames()) to run after the default ones.
  std::set<std::string> enabled;
  /// Replaces the default optimisation pipeline, e.g.
  /// "pe-hoist,pe-fuse-attention" (the passes run on the module, in order).
  std::optional<std::string> pipeline;
  /// Set the `explain` option of every rewrite pass (remarks, Explain.h).
  bool explain = false;
  /// Opt-in approximate rewrites (pe-factor-generators{approximate=true}).
  bool approximate = false;
  /// Stop after the optimisation passes (no pe-autodiff).
  bool skipAutodiff = false;
  /// The target compiled for ("cpu", "cpu-reference", "cuda"; empty for
  /// none): "cpu" and "cuda" add targetPassNames() after pe-autodiff,
  /// "cuda" cudaPassNames() after those.
  std::string target;
};

/// The default optimisation passes, in the order they run.
llvm::ArrayRef<llvm::StringRef> optimizationPassNames();
/// Passes that run only when asked for (--enable-pass=NAME), after the
/// default ones: exact, but measured not to pay on the CPU target yet.
llvm::ArrayRef<llvm::StringRef> optInPassNames();
/// Default passes of the compiled targets (--target=cpu and --target=cuda),
/// run after pe-autodiff on the training program: fusions that pay with the
/// targets' kernels (on the GPU, GEMM epilogues), not with the reference
/// kernels of --target=cpu-reference.
llvm::ArrayRef<llvm::StringRef> targetPassNames();
/// Default passes of --target=cuda alone, after targetPassNames(): orders
/// the training program for the CUDA step program (pe-cluster-gemms).
llvm::ArrayRef<llvm::StringRef> cudaPassNames();
/// Whether `target` runs targetPassNames().
bool runsTargetPasses(llvm::StringRef target);
/// The default passes for `target` ("" for none), in the order they run.
std::vector<llvm::StringRef> defaultPassNames(llvm::StringRef target);

/// Adds the optimisation passes and then pe-autodiff to `pm`. Fails with a
/// message in `error` for an unknown pass name or a malformed pipeline.
mlir::LogicalResult buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                                  std::string &error);

} // namespace stringc

#endif // STRINGC_TRANSFORMS_PIPELINE_H
