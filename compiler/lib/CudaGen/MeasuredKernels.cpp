//===- MeasuredKernels.cpp - cuBLAS and attention from measured times -----===//
//
// Two kernel families whose time the roofline does not give and whose
// structure is not ours to count (docs/cuda.md, "Launch report"):
//
// - cuBLAS GEMMs: per arithmetic, t = t0 + max(FLOPs / R, bytes / B),
//   t0 the cost of a call (its launch, split-K reduction, small tiles) and
//   R, B its sustained rates. t0 and R were fitted by least squares to the
//   GEMM time of every 2026-11-25 H100 profile (tests/perf/records/
//   2026-11-25-h100.json: the ncu rows of cuBLAS's kernels per step against
//   the report's GEMM launches of the same step; tests/perf/fit_gemm_table.py
//   prints the fit). BF16 GEMMs (bf16 operands) were never measured: they
//   take TF32's t0 and the TF32 fit's share of the bf16 peak.
// - The attention kernels: the time per call ncu measured for each kernel
//   (2026-11-25, H100) at its work W = B H T^2 Dh, interpolated linearly in W
//   between two measured sizes (extrapolated along that line), or, with one
//   size, proportionally to W. A kernel never measured takes the measured
//   kernel of the same kind (forward, statistics, dQ, dK/dV) and arithmetic
//   (FMA or tensor cores) nearest in W, proportionally: the report says so.
//   The relative attention is not here: its 2026-11-25 kernels read R in a
//   layout since replaced (SerialChains.cpp models it).
//
//===----------------------------------------------------------------------===//
#include "LaunchModel.h"

#include "stringc/Dialect/PE/PECost.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace stringc::cudagen {
namespace {

struct GemmFit {
  double callSeconds, flopsPerSecond, bytesPerSecond;
};

// tests/perf/fit_gemm_table.py on the 2026-11-25 H100 records.
constexpr GemmFit kF32Gemm = {9.5e-6, 24.0e12, 3.0e12};
constexpr GemmFit kTf32Gemm = {9.5e-6, 79.4e12, 3.0e12};

struct AttentionPoint {
  const char *kernel;
  double work;    // B H T^2 Dh
  double seconds; // per call
};

// ncu, H100, 2026-11-25 (tests/perf/records/2026-11-25-h100.json): vit_rope
// at batch 128 and 1024 (B H T^2 Dh = B x 4 x 50^2 x 16), vit_cayley at
// 1024, the ViT-S-sized model in bf16 at batch 128 (128 x 6 x 197^2 x 64).
constexpr double kVitRope128 = 128.0 * 4 * 50 * 50 * 16, kVitRope1024 = 8 * kVitRope128;
constexpr double kVitS128 = 128.0 * 6 * 197 * 197 * 64;
constexpr AttentionPoint kAttention[] = {
    {"pe_rope_attention_d16", kVitRope128, 30.1e-6},
    {"pe_rope_attention_d16", kVitRope1024, 126.8e-6},
    {"pe_rope_attention_grad_stats_d16", kVitRope128, 26.3e-6},
    {"pe_rope_attention_grad_stats_d16", kVitRope1024, 113.3e-6},
    {"pe_rope_attention_grad_dq_d16", kVitRope128, 30.4e-6},
    {"pe_rope_attention_grad_dq_d16", kVitRope1024, 160.8e-6},
    {"pe_rope_attention_grad_dkdv_d16", kVitRope128, 39.1e-6},
    {"pe_rope_attention_grad_dkdv_d16", kVitRope1024, 203.9e-6},
    {"pe_attention_d16", kVitRope1024, 111.7e-6},
    {"pe_attention_grad_stats_d16", kVitRope1024, 94.2e-6},
    {"pe_attention_grad_dq_d16", kVitRope1024, 128.9e-6},
    {"pe_attention_grad_dkdv_d16", kVitRope1024, 179.3e-6},
    {"pe_rope_attention_mma_d64", kVitS128, 426.8e-6},
    {"pe_rope_attention_mma_grad_stats_d64", kVitS128, 408.4e-6},
    {"pe_rope_attention_mma_grad_dq_d64", kVitS128, 450.2e-6},
    {"pe_rope_attention_mma_grad_dkdv_d64", kVitS128, 592.0e-6},
};

/// "fwd", "stats", "dq" or "dkdv" of an attention kernel's name.
llvm::StringRef kindOf(llvm::StringRef kernel) {
  for (const char *kind : {"grad_stats", "grad_dq", "grad_dkdv"})
    if (kernel.contains(kind))
      return kind;
  return "fwd";
}

} // namespace

ExtraTerm gemmTime(LaunchArithmetic arithmetic, double flops, double bytes,
                   const GpuMachineModel &machine) {
  GemmFit fit = arithmetic == LaunchArithmetic::F32 ? kF32Gemm : kTf32Gemm;
  if (arithmetic == LaunchArithmetic::BF16)
    fit.flopsPerSecond = kTf32Gemm.flopsPerSecond / 495e12 * machine.bf16FlopsPerSecond;
  // The table is the H100's; another card's bandwidth scales the byte term.
  double bytesPerSecond = fit.bytesPerSecond * machine.bytesPerSecond / 3.35e12;
  char text[96];
  std::snprintf(text, sizeof text, "measured gemm: %.1f us + max(%.0f TFLOP/s, %.1f TB/s)",
                fit.callSeconds * 1e6, fit.flopsPerSecond / 1e12, bytesPerSecond / 1e12);
  return {fit.callSeconds + std::max(flops / fit.flopsPerSecond, bytes / bytesPerSecond), text};
}

std::optional<ExtraTerm> attentionTime(Operation &op, const LaunchEstimate &e, int64_t batch,
                                       const GpuMachineModel &) {
  llvm::StringRef kernel = e.kernel;
  // The delta kernels (delta_i = dy_i . y_i) are a row-wise dot product:
  // bytes, as the memory term charges them, not an attention kernel's time.
  if (!kernel.contains("attention") || kernel.starts_with("pe_rel_attention") ||
      kernel.contains("skip") || kernel.contains("grad_delta"))
    return std::nullopt;
  // W = B H T^2 Dh = (B T D) T of the first [B, T, D] operand.
  double work = 0;
  for (Value operand : op.getOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (type && type.getRank() == 3 && !type.isDynamicDim(1) && !type.isDynamicDim(2)) {
      work = double(pe::elementsAtBatch(type, batch)) * double(type.getDimSize(1));
      break;
    }
  }
  if (work == 0)
    return std::nullopt;
  std::vector<const AttentionPoint *> same;
  for (const AttentionPoint &p : kAttention)
    if (kernel == p.kernel)
      same.push_back(&p);
  char text[160];
  if (same.size() >= 2) {
    const AttentionPoint &a = *same[0], &b = *same[1];
    double slope = (b.seconds - a.seconds) / (b.work - a.work);
    double seconds = a.seconds + slope * (work - a.work);
    std::snprintf(text, sizeof text, "measured attention: W %.3g between %.3g and %.3g", work,
                  a.work, b.work);
    // below the smaller size, no less than proportional to W (the line's
    // intercept is the launch's fixed cost, which a smaller grid keeps)
    if (work < a.work)
      seconds = std::max(seconds, a.seconds * work / a.work);
    return ExtraTerm{seconds, text};
  }
  const AttentionPoint *nearest = same.empty() ? nullptr : same[0];
  if (!nearest) {
    bool mma = kernel.contains("_mma");
    llvm::StringRef kind = kindOf(kernel);
    for (const AttentionPoint &p : kAttention) {
      llvm::StringRef name = p.kernel;
      if (name.contains("_mma") != mma || kindOf(name) != kind)
        continue;
      if (!nearest || std::abs(std::log(p.work / work)) < std::abs(std::log(nearest->work / work)))
        nearest = &p;
    }
  }
  if (!nearest)
    return std::nullopt;
  std::snprintf(text, sizeof text, "measured attention: %s at W %.3g, x %.3g",
                nearest->kernel, nearest->work, work / nearest->work);
  return ExtraTerm{nearest->seconds * work / nearest->work, text};
}

} // namespace stringc::cudagen
