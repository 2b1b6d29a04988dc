// The step control block (DeviceStepControl.h; the layout: stringrt/cuda/StepControl.h).
#include "DeviceStepControl.h"

#include "stringrt/Error.h"

#include <fmt/format.h>


namespace stringrt::cuda {

StepControlBlock makeStepControl(const ManifestOptimizer &config, int64_t stepsTaken,
                                 int64_t totalSteps) {
  if (totalSteps < 1)
    throw Error(fmt::format("learningRate: totalSteps must be >= 1, got {}", totalSteps));
  if (stepsTaken < 0)
    throw Error(fmt::format("the step count must be >= 0, got {}", stepsTaken));
  StepControlBlock block{};
  block[kControlStepsTaken] = double(stepsTaken);
  block[kControlTotalSteps] = double(totalSteps);
  block[kControlBaseLr] = config.lr;
  block[kControlMinLr] = config.minLr;
  block[kControlWarmupSteps] = double(config.warmupSteps);
  block[kControlSchedule] = config.schedule == LrSchedule::Constant ? 0.0 : 1.0;
  block[kControlBeta1] = config.beta1;
  block[kControlBeta2] = config.beta2;
  block[kControlClipNorm] = config.clipNorm;
  block[kControlEmaDecay] = config.emaDecay;
  return block;
}

StepOutcome stepOutcome(const StepControlBlock &block) {
  StepOutcome out;
  out.loss = float(block[kControlLoss]);
  out.applied = block[kControlApplied] > 0;
  out.stepsTaken = int64_t(block[kControlStepsTaken]);
  out.info.step = int64_t(block[kControlStep]);
  out.info.lr = block[kControlLr];
  out.info.gradNorm = block[kControlGradNorm];
  out.info.clipScale = block[kControlClipScale];
  return out;
}

namespace {
constexpr size_t kBlockBytes = sizeof(StepControlBlock);
} // namespace

StepControl::StepControl(std::shared_ptr<Device> device, const ManifestOptimizer &config)
    : device_(std::move(device)), config_(config) {
  block_ = std::make_unique<Arena>(device_, kBlockBytes);
  for (CUevent &event : copied_)
    driver::check(driver::require().eventCreate(&event, CU_EVENT_DISABLE_TIMING),
                  "creating the step events", "cuEventCreate");
  reset(0, 1);
}

StepControl::~StepControl() {
  // The ring is freed after this (a member): no copy may still write it.
  if (const driver::Api *api = driver::api())
    for (CUevent event : copied_)
      if (event) {
        api->eventSynchronize(event);
        api->eventDestroy(event);
      }
}

uint64_t StepControl::address() const { return block_->at(0, kBlockBytes); }

void StepControl::reset(int64_t stepsTaken, int64_t totalSteps) {
  StepControlBlock block = makeStepControl(config_, stepsTaken, totalSteps);
  block_->upload(0, block.data(), kBlockBytes, "setting the step control block");
  totalSteps_ = totalSteps;
}

int64_t StepControl::downloadStepsTaken() const {
  double taken = 0;
  block_->download(kControlStepsTaken * sizeof(double), &taken, sizeof taken,
                   "reading the step counter");
  return int64_t(taken);
}

void StepControl::requireRoom() const {
  if (pending_ == kStepsInFlight)
    throw Error(fmt::format("device executor: {} training steps are queued and not collected",
                            kStepsInFlight));
}

void StepControl::enqueueReadback(CUstream stream) {
  requireRoom();
  const size_t slot = queued_ % kStepsInFlight;
  const driver::Api &api = driver::require();
  driver::check(api.memcpyDtoHAsync(ring_.data() + slot, CUdeviceptr(address()), kBlockBytes,
                                    stream),
                "copying the step's results back", "cuMemcpyDtoHAsync");
  driver::check(api.eventRecord(copied_[slot], stream), "copying the step's results back",
                "cuEventRecord");
  ++queued_;
  ++pending_;
}

bool StepControl::oldestArrived(const std::string &step) const {
  if (pending_ == 0)
    throw Error("device executor: no training step is queued");
  const size_t slot = (queued_ - pending_) % kStepsInFlight;
  const CUresult result = driver::require().eventQuery(copied_[slot]);
  if (result == CUDA_ERROR_NOT_READY)
    return false;
  driver::check(result, step, "cuEventQuery");
  return true;
}

StepOutcome StepControl::collect(const std::string &step) {
  if (pending_ == 0)
    throw Error("device executor: no training step is queued");
  const size_t slot = (queued_ - pending_) % kStepsInFlight;
  driver::check(driver::require().eventSynchronize(copied_[slot]), step, "cuEventSynchronize");
  --pending_;
  return stepOutcome(ring_.data()[slot]);
}

} // namespace stringrt::cuda
