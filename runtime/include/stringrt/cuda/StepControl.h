// The step control block: the doubles through which a training step's
// optimizer runs on the device without the host (docs/cuda.md, "The
// training step"). The host sets the run's constants and the step counter;
// each step, `pe_optimizer_scalars` (compiler/lib/CudaGen/OptimizerKernels.cpp,
// which includes this header for the slots) reads the loss and the gradient norm's partials
// and writes the step's scalars, which `pe_adamw` / `pe_sgd` (and `pe_ema`)
// read and the host copies back.
#pragma once

#include "stringrt/Manifest.h"
#include "stringrt/Optimizer.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace stringrt::cuda {

enum StepControlSlot : int {
  // Set by the host (with nothing in flight).
  kControlStepsTaken = 0, // optimizer steps applied; the device adds one per applied step
  kControlTotalSteps = 1, // the run's length (the schedule's horizon)
  kControlHalted = 2,     // 1 after a step whose loss was not finite: no later step applies
  kControlBaseLr = 3,
  kControlMinLr = 4,
  kControlWarmupSteps = 5,
  kControlSchedule = 6, // 0 constant, 1 warmup-cosine
  kControlBeta1 = 7,
  kControlBeta2 = 8,
  kControlClipNorm = 9,
  kControlEmaDecay = 18, // d of the EMA of the weights (pe_ema); 0: none
  // Written by pe_optimizer_scalars for the step just run.
  kControlStep = 10, // t
  kControlLoss = 11,
  kControlGradNorm = 12,
  kControlClipScale = 13,
  kControlLr = 14,
  kControlBiasCorrection1 = 15, // 1 - beta1^t
  kControlBiasCorrection2 = 16, // 1 - beta2^t
  kControlApplied = 17,         // 1: the update ran; 0: the loss was not finite, or halted
  kControlSlots = 19,
};

using StepControlBlock = std::array<double, kControlSlots>;

// Training steps the device executor lets the host queue ahead of reading
// their results (DeviceModel::queueStep / collectStep).
inline constexpr size_t kStepsInFlight = 2;

// A block for a run of `totalSteps` (>= 1) of optimizer `config` that has
// taken `stepsTaken` steps, not halted, with the per-step slots zero.
StepControlBlock makeStepControl(const ManifestOptimizer &config, int64_t stepsTaken,
                                 int64_t totalSteps);

// What one step did, as the device wrote it.
struct StepOutcome {
  float loss = 0;
  bool applied = false; // false: the loss was not finite (or an earlier step's was)
  int64_t stepsTaken = 0; // after this step
  OptimizerStepInfo info;
};
StepOutcome stepOutcome(const StepControlBlock &block);

} // namespace stringrt::cuda
