//===- LaunchReport.h - a training step's launches against a roofline -*- C++ -*-===//
//
// `stringc MODEL.pe --target=cuda --launch-report [--batch=N]` (docs/cuda.md,
// "Launch report"): every launch of one training step on the device (the
// @gradients step program, then the runtime's gradient norm and optimizer
// launches) with its grid, the bytes it moves, its FLOPs and a roofline time
// on a model of an H100, so that GPU speed problems show without a GPU.
//
// The model, per launch:
//   bound     = max(bytes / bandwidth, FLOPs / peak)   (the whole GPU)
//   predicted = max(minimum, bound / min(1, blocks / SMs))
//               (a launch of fewer blocks than SMs gets that fraction of
//               the machine; no kernel takes less than `minimum`, 3 us: the
//               shortest kernels of the 2026-11-25 H100 profiles, a few MB
//               each, took 4-5 us inside CUDA graphs)
// bytes: every buffer the launch names (operands, results, scratch,
// constants), each counted once at its full size; a GEMM reads A and B and
// writes C (reads it too when beta != 0). FLOPs: a GEMM's 2 m n k; an op's
// other FLOPs (stringc's cost model, Explain.h) split over its kernel
// launches in proportion to their bytes. peak: f32 FMA for the generated
// kernels, bf16 for the tensor-core ones; GEMMs at fp32 (fp32 packages) or
// TF32 (bf16 packages: cuBLAS on f32 buffers with bf16 compute picks TF32
// tensor-op kernels). cuBLAS picks its own grid: GEMMs count as filling the
// GPU. The bound is the sum of the launches' bounds: the step's roofline.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_GPU_LAUNCHREPORT_H
#define STRINGC_GPU_LAUNCHREPORT_H

#include "stringc/GPU/GPUKernels.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stringc::cudagen {

/// The GPU the report predicts for. Defaults: NVIDIA H100 SXM (dense peaks).
struct GpuMachineModel {
  std::string name = "H100 SXM";
  int64_t sms = 132;
  double bytesPerSecond = 3.35e12;
  double f32FlopsPerSecond = 67e12;
  double tf32FlopsPerSecond = 495e12;
  double bf16FlopsPerSecond = 989e12;
  double minLaunchSeconds = 3e-6;
};

/// The arithmetic a launch's FLOPs run at.
enum class LaunchArithmetic { F32, TF32, BF16 };
const char *launchArithmeticName(LaunchArithmetic arithmetic); // "f32", "tf32", "bf16"

struct LaunchEstimate {
  std::string program;  // "gradients", "optimizer" or "data"
  int64_t op = -1;      // op index in the program; -1 for the optimizer's launches
  std::string opName;   // "pe.layer_norm_grad", or "optimizer"
  std::string kernel;   // kernel name, or "cublas gemm"
  int64_t blocks = -1;  // -1: chosen by cuBLAS (counted as filling the GPU)
  int64_t threadsPerBlock = 0;
  double bytes = 0, flops = 0;
  LaunchArithmetic arithmetic = LaunchArithmetic::F32;
  double boundSeconds = 0;     // the roofline time on the whole GPU
  double predictedSeconds = 0; // with the fraction of the SMs its grid fills
  bool growsWithBatch = false; // the bytes it moves depend on the batch
  /// Whether it grows with the batch yet runs on fewer blocks than SMs, and
  /// that costs time: at its fraction of the GPU it takes longer than the
  /// shortest kernel (a copy of a few KB on 128 blocks does not count).
  bool underfilled(const GpuMachineModel &machine) const {
    return growsWithBatch && blocks >= 0 && blocks < machine.sms &&
           predictedSeconds > machine.minLaunchSeconds;
  }
};

struct StepEstimate {
  int64_t batch = 0;
  std::vector<LaunchEstimate> launches;
  double boundSeconds = 0, predictedSeconds = 0;
  /// pe_augment_images, when the plan has it (program "data"): the runtime
  /// launches it as each batch enters its step, only in runs that augment,
  /// so it is not in `launches` or the step's times.
  std::optional<LaunchEstimate> augmentation;
};

/// The launches of one training step at `batch` (the module must be the one
/// `plan` was made from). Fails with a diagnostic on the module for an op
/// the plan does not cover.
mlir::FailureOr<StepEstimate> estimateTrainingStep(mlir::ModuleOp train, const KernelPlan &plan,
                                                   GpuPrecision precision, int64_t batch,
                                                   const GpuMachineModel &machine = {});

/// The report: one line per launch, the share of each op kind, the step's
/// predicted time and roofline bound, and the under-filled launches.
void printLaunchReport(const StepEstimate &step, const GpuMachineModel &machine,
                       llvm::raw_ostream &os);

} // namespace stringc::cudagen

#endif // STRINGC_GPU_LAUNCHREPORT_H
