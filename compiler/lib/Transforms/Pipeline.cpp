//===- Pipeline.cpp - the order of stringc's passes -----------------------===//

#include "stringc/Transforms/Pipeline.h"

#include "stringc/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>
#include <vector>

using namespace mlir;

namespace stringc {

ArrayRef<StringRef> optimizationPassNames() {
  // Algebraic rewrites first (they remove or simplify transforms), then the
  // rewrites that change how attention is computed, then hoisting and fusion
  // of what is left. docs/passes.md explains each.
  static const std::vector<StringRef> names = {
      // Algebraic rewrites (AlgebraicPasses.td): cancel before fold, so a
      // transform that cancels is removed rather than folded into W.
      "pe-spd-gate-square",
      "pe-cancel-orthogonal",
      "pe-fold-transform",
      "pe-reflection-to-rotation",
      // Attention rewrites (GatherPasses.td); pe-factor-generators before
      // pe-distinct-offsets, which would hide the relative positions from it.
      "pe-skip-gather",
      "pe-factor-generators",
      "pe-distinct-offsets",
      // Hoisting and fusion (FusionPasses.td): pe-hoist creates the
      // rope_apply / table pairs that pe-fuse-attention fuses; the epilogues
      // last, on the dense layers that remain.
      "pe-hoist",
      "pe-fuse-attention",
  };
  return names;
}

ArrayRef<StringRef> optInPassNames() {
  // pe-fuse-epilogue measured 6-16% slower training steps on the CPU than
  // the unfused graph (tests/bench/passes.py): the generated, vectorised
  // gelu/add kernels of --target=cpu beat the fused ops, whose epilogue runs
  // on the runtime's scalar kernels. Opt-in until the code generator emits
  // GEMM epilogues. Opt-in passes run after the default ones.
  static const std::vector<StringRef> names = {
      "pe-fuse-epilogue",
  };
  return names;
}

ArrayRef<StringRef> targetPassNames() {
  // After pe-autodiff. pe-fuse-residual: the CPU's linear_residual and
  // linear_grad_input_acc add the residual or the prior sum as the row-tile
  // GEMM stores its tiles, the bits of the unfused graph, one pass over the
  // activation fewer (docs/passes.md); on the GPU each is one GEMM with
  // the residual or prior as its addend (cuBLASLt's C apart from D), and
  // layer_norm_grad_acc adds the prior in its row kernel: one launch and
  // one pass over the activation fewer for each add.
  static const std::vector<StringRef> names = {
      "pe-fuse-residual",
  };
  return names;
}

ArrayRef<StringRef> cudaPassNames() {
  // After the target passes, --target=cuda only. pe-cluster-gemms: the
  // backward's Q, K and V weight gradients (and vit_cayley's products with
  // U) next to each other, so that the step program runs each run as one
  // cuBLAS call (docs/cuda.md, "Grouped GEMMs"); pe-cluster-cayley before
  // it: the layers' Cayley weights next to each other, one launch of the
  // factor kernel (docs/cuda.md, "Kernel groups"). Both pure reordering.
  static const std::vector<StringRef> names = {
      "pe-cluster-cayley",
      "pe-cluster-gemms",
  };
  return names;
}

bool runsTargetPasses(StringRef target) { return target == "cpu" || target == "cuda"; }

std::vector<StringRef> defaultPassNames(StringRef target) {
  std::vector<StringRef> names(optimizationPassNames().begin(), optimizationPassNames().end());
  if (runsTargetPasses(target))
    names.insert(names.end(), targetPassNames().begin(), targetPassNames().end());
  if (target == "cuda")
    names.insert(names.end(), cudaPassNames().begin(), cudaPassNames().end());
  return names;
}

/// "pe-x{explain=true}" for the passes that take options; the rewrite
/// passes all have `explain`, and pe-factor-generators `approximate`.
static std::string passWithOptions(StringRef name, const PipelineOptions &options) {
  SmallVector<std::string> settings;
  if (options.explain)
    settings.push_back("explain=true");
  if (options.approximate && name == "pe-factor-generators")
    settings.push_back("approximate=true");
  std::string text = name.str();
  if (!settings.empty()) {
    text += "{";
    for (size_t i = 0; i < settings.size(); ++i)
      text += (i ? " " : "") + settings[i];
    text += "}";
  }
  return text;
}

LogicalResult buildPipeline(OpPassManager &pm, const PipelineOptions &options,
                            std::string &error) {
  llvm::raw_string_ostream errors(error);
  auto listPasses = [&] {
    errors << " (the passes are:";
    for (StringRef known : optimizationPassNames())
      errors << " " << known;
    errors << "; --target=cpu and cuda also:";
    for (StringRef known : targetPassNames())
      errors << " " << known;
    errors << "; --target=cuda also:";
    for (StringRef known : cudaPassNames())
      errors << " " << known;
    errors << "; opt-in:";
    for (StringRef known : optInPassNames())
      errors << " " << known;
    errors << ")";
  };
  for (const std::string &name : options.disabled) {
    if (name == "pe-autodiff") {
      errors << "pe-autodiff cannot be disabled: the package needs @gradients";
      return failure();
    }
    if (!llvm::is_contained(optimizationPassNames(), StringRef(name)) &&
        !llvm::is_contained(targetPassNames(), StringRef(name)) &&
        !llvm::is_contained(cudaPassNames(), StringRef(name)) &&
        !llvm::is_contained(optInPassNames(), StringRef(name))) {
      errors << "unknown pass '" << name << "' in --disable-pass";
      listPasses();
      return failure();
    }
  }
  for (const std::string &name : options.enabled) {
    if (!llvm::is_contained(optInPassNames(), StringRef(name))) {
      errors << "'" << name << "' is not an opt-in pass in --enable-pass";
      listPasses();
      return failure();
    }
  }

  // The textual pipeline names passes through the global registry.
  static std::once_flag registered;
  std::call_once(registered, registerPasses);

  std::string pipeline;
  if (options.pipeline) {
    pipeline = *options.pipeline;
  } else {
    std::vector<StringRef> names(optimizationPassNames().begin(), optimizationPassNames().end());
    for (StringRef name : optInPassNames())
      if (options.enabled.count(name.str()))
        names.push_back(name);
    for (StringRef name : names) {
      if (options.disabled.count(name.str()))
        continue;
      if (!pipeline.empty())
        pipeline += ",";
      pipeline += passWithOptions(name, options);
    }
  }
  if (!pipeline.empty() && failed(parsePassPipeline(pipeline, pm, errors)))
    return failure();
  if (options.skipAutodiff)
    return success();
  pm.addPass(createAutodiff());
  // The target's own passes, on the training program (a --pass-pipeline
  // replaces them too).
  std::string targetPipeline;
  if (!options.pipeline && runsTargetPasses(options.target))
    for (StringRef name : targetPassNames())
      if (!options.disabled.count(name.str()))
        targetPipeline += (targetPipeline.empty() ? "" : ",") + passWithOptions(name, options);
  if (!options.pipeline && options.target == "cuda")
    for (StringRef name : cudaPassNames())
      if (!options.disabled.count(name.str()))
        targetPipeline += (targetPipeline.empty() ? "" : ",") + passWithOptions(name, options);
  if (!targetPipeline.empty() && failed(parsePassPipeline(targetPipeline, pm, errors)))
    return failure();
  return success();
}

} // namespace stringc
