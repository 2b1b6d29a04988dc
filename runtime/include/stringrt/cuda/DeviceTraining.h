// The GPU as stringrt::train()'s backend (Trainer.h, TrainBackend): the
// trainer's loop, data order, log, checkpoints and resume, with each step and
// evaluation run by a DeviceModel (DeviceExecutor.h). Checkpoints are the CPU
// trainer's files (the device state is copied back before each is written),
// so a run resumes on either executor. While step n computes (one graph
// replay, optimizer included), batch n + 1 is assembled on the host and
// staged (DeviceOptions::overlapUpload) and step n + 1 queued; then the host
// waits for step n's results and reports them (so the device always has
// the next step queued), except at the end of an epoch or of the run.
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/Manifest.h"
#include "stringrt/Trainer.h"
#include "stringrt/cuda/DeviceExecutor.h"

#include <memory>
#include <string>

namespace stringrt::cuda {

class DeviceTrainBackend : public TrainBackend {
public:
  // Checks the package (DeviceModel::checkPackage) without touching the
  // device; the device model is made by start().
  DeviceTrainBackend(const Manifest &manifest, const CudaSection &section,
                     DeviceOptions options = {});

  // "<device name> (CUDA: TF32 off, graphs on, overlapped upload on)", or
  // "CUDA" before start().
  std::string name() const override;
  void start(const std::vector<float> &params, const Optimizer &optimizer) override;
  // DeviceModel::queueStep's micro-batches (the package is checked here:
  // DeviceModel::checkAccumulation).
  void setAccumulate(int64_t parts) override;
  // DeviceModel::augmentOnDevice, unless DeviceOptions::augmentOnDevice is off.
  bool takeAugmentation(const AugmentPolicy &policy, uint64_t seed) override;
  // The step is queued on the device (DeviceModel::queueStep), the next
  // batch assembled and staged while it computes; collect() waits for the
  // oldest step. One step more may be queued before the trainer collects
  // (kStepsInFlight - 1), so the device never waits for the host's
  // reporting.
  void queue(const std::map<std::string, HostTensor> &batch, const NextBatch &next,
             int64_t totalSteps, const StepKey &key) override;
  OptimizerStepInfo collect(float &loss) override;
  int64_t stepsAhead() const override { return int64_t(kStepsInFlight) - 1; }
  EvalResult evaluate(const DataSet &data, int64_t batch) override;
  EvalResult evaluateEma(const DataSet &data, int64_t batch) override;
  void fetch(std::vector<float> &params, Optimizer &optimizer) override;

  // The device model (null before start()).
  DeviceModel *model() { return device_.get(); }

private:
  DeviceModel &started() const;
  Manifest manifest_;
  CudaSection section_;
  DeviceOptions options_;
  std::unique_ptr<DeviceModel> device_;
  int64_t accumulate_ = 1;
};

} // namespace stringrt::cuda
