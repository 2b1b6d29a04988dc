//===- Driver.h - compile a checked model for a target ----------*- C++ -*-===//
//
// The compile driver (docs/architecture.md): from the frontend's ModelGraph
// it builds the `pe` module (MLIRGen), verifies it, runs the passes and
// pe-autodiff (Transforms/Pipeline.h), timing each phase, and hands the one
// in-memory module to a target: printed as MLIR, the CPU package
// (Package/PackageBuilder.h and the CPU kernels of CpuGen), the CUDA package
// or its kernels (CudaGen/CudaTarget.h), or --explain's report. Its signatures
// keep MLIR types out, so that stringc and the frontend tests need not
// include MLIR headers.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_DRIVER_DRIVER_H
#define STRINGC_DRIVER_DRIVER_H

#include "stringc/CudaGen/CudaOptions.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <set>
#include <string>

namespace stringc {
struct ModelGraph;

/// How far printModelAsMLIR takes the module before printing it.
enum class EmitStage {
  /// The model as built: parameters, optimizer, dataset and @forward.
  Forward,
  /// After the optimisation passes (docs/passes.md), before pe-autodiff.
  Optimized,
  /// After the pe-autodiff pass: @forward plus @gradients, the loss and the
  /// gradient of every trainable parameter (docs/autodiff.md).
  Train,
  /// The CPU kernels of the Train module, on memrefs (docs/codegen.md).
  Kernels,
  /// The CPU kernels' LLVM IR, optimised for the host (docs/codegen.md).
  LLVMIR,
};

/// How to run the passes (stringc's flags; Transforms/Pipeline.h).
struct CompileOptions {
  std::set<std::string> disabledPasses;    // --disable-pass=NAME
  std::set<std::string> enabledPasses;     // --enable-pass=NAME (opt-in passes)
  std::optional<std::string> passPipeline; // --pass-pipeline=... ("" = none)
  bool approximate = false;     // --approximate: opt-in approximate rewrites
  bool printIRAfterAll = false; // --print-ir-after-all (to the error stream)
  bool passStatistics = false;  // --pass-statistics (to stderr)
  bool timePhases = false;      // --time-phases: each phase and pass timed
  // The target the module is for ("cpu" adds its own default passes,
  // Pipeline.h); writeModelPackage sets it from its `target`.
  std::string target;
};

/// Checks the pass switches of `options` (pass names, opt-in passes, the
/// textual pipeline) without compiling anything, so that a misspelt pass is
/// an error whatever is emitted. Returns false with the message in `error`.
bool checkPassOptions(const CompileOptions &options, std::string &error);

/// Builds the `pe` module for `graph`, verifies it, runs the passes of
/// `stage`, and prints it to `out`. Diagnostics (errors, and warnings such as
/// a parameter that does not affect the loss) go to `err`; returns non-zero
/// on failure.
int printModelAsMLIR(const ModelGraph &graph, std::ostream &out, std::ostream &err,
                     EmitStage stage = EmitStage::Forward,
                     const CompileOptions &options = {});

/// Builds the `pe` module for `graph`, verifies it, runs the optimisation passes
/// and pe-autodiff and writes the model package (docs/package.md) for `target` to `path`
/// (atomically; nothing is written on failure). Diagnostics go to `err`;
/// returns non-zero on failure.
int writeModelPackage(const ModelGraph &graph, const std::string &path,
                      const std::string &target, std::ostream &err,
                      const CompileOptions &options = {});

/// `stringc --explain`: every rewrite that fires (where in the source, what
/// it did, the forward cost per example before and after), the warnings, and
/// the training step's FLOPs and bytes at `batch` with all passes, with none,
/// and with each one switched off. Printed to `out`.
int explainModel(const ModelGraph &graph, std::ostream &out, std::ostream &err,
                 const CompileOptions &options, int64_t batch);

/// `stringc --target=cuda`: the module after the passes and pe-autodiff, as
/// for the CPU package, compiled for NVIDIA GPUs (docs/cuda.md): NVVM, PTX
/// or the launch report to `out`, or the package (atomically) at `path`.
int compileModelForCuda(const ModelGraph &graph, const CompileOptions &options,
                        const CudaOptions &cuda, CudaEmit emit, std::ostream &out,
                        const std::string &path, std::ostream &err);

} // namespace stringc

#endif // STRINGC_DRIVER_DRIVER_H
