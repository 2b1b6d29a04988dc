// Which CPU kernels a Model's programs run on (Model.h).
#pragma once

#include <optional>
#include <string_view>

namespace stringrt {

enum class KernelSet {
  // The fast multi-threaded float32 kernels (stringrt/cpu/FastKernels.h) for
  // the ops that have one (dense layers, layer norm, gelu, attention, rope,
  // cross entropy, patch and token embeddings, and their gradients); the
  // reference kernels for every other op. Results agree with Reference to
  // ~1e-5 relative, and do not depend on the thread count.
  Fast,
  // The plain single-threaded reference kernels (stringrt/reference/), the
  // oracle, for every op.
  Reference,
  // The compiler-generated kernels of a "cpu" package (KernelLibrary.h) for
  // the ops that name one (elementwise ops, layer norm and their
  // gradients), threaded over their outer dimension with the fast kernels'
  // pool; Fast for every other op. The default for packages that have them.
  Compiled,
};

// "fast" / "reference" / "compiled".
constexpr const char *kernelSetName(KernelSet kernels) {
  return kernels == KernelSet::Fast        ? "fast"
         : kernels == KernelSet::Reference ? "reference"
                                           : "compiled";
}

// The KernelSet named "fast", "reference" or "compiled"; nullopt for
// anything else.
inline std::optional<KernelSet> parseKernelSet(std::string_view name) {
  if (name == "fast")
    return KernelSet::Fast;
  if (name == "reference")
    return KernelSet::Reference;
  if (name == "compiled")
    return KernelSet::Compiled;
  return std::nullopt;
}

} // namespace stringrt
