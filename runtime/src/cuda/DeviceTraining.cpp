// The GPU as train()'s backend (DeviceTraining.h).
#include "stringrt/cuda/DeviceTraining.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

namespace stringrt::cuda {

DeviceTrainBackend::DeviceTrainBackend(const Manifest &manifest, const CudaSection &section,
                                       DeviceOptions options)
    : manifest_(manifest), section_(section), options_(options) {
  DeviceModel::checkPackage(manifest_, section_);
}

std::string DeviceTrainBackend::name() const {
  if (!device_)
    return "CUDA";
  auto onOff = [](bool on) { return on ? "on" : "off"; };
  const DeviceOptions &options = device_->options();
  return fmt::format("{} (CUDA: {} GEMMs, graphs {}, overlapped upload {})",
                     device_->deviceName(), device_->gemmPrecision(), onOff(options.graphs),
                     onOff(options.overlapUpload));
}

DeviceModel &DeviceTrainBackend::started() const {
  if (!device_)
    throw Error("the GPU training backend was used before start()");
  return *device_;
}

void DeviceTrainBackend::start(const std::vector<float> &params, const Optimizer &optimizer) {
  if (!device_)
    device_ = std::make_unique<DeviceModel>(manifest_, section_, params, options_);
  device_->setState(params, optimizer);
}

void DeviceTrainBackend::setAccumulate(int64_t parts) {
  if (parts > 1)
    DeviceModel::checkAccumulation(manifest_);
  accumulate_ = parts;
}

bool DeviceTrainBackend::takeAugmentation(const AugmentPolicy &policy, uint64_t seed) {
  return options_.augmentOnDevice && started().augmentOnDevice(policy, seed);
}

void DeviceTrainBackend::queue(const std::map<std::string, HostTensor> &batch,
                               const NextBatch &next, int64_t totalSteps,
                               const StepKey &key) {
  DeviceModel &device = started();
  device.setStepKey(key);
  // The previous step staged this batch when it was its `next`.
  if (!device.hasStagedBatch())
    device.stageTraining(batch, key.step);
  device.queueStep(totalSteps, accumulate_);
  // While the step computes, the next batch is assembled and uploaded.
  if (const std::map<std::string, HostTensor> *inputs = next())
    device.stageTraining(*inputs, key.step + 1);
}

OptimizerStepInfo DeviceTrainBackend::collect(float &loss) {
  StepOutcome outcome = started().collectStep();
  loss = outcome.loss;
  return outcome.info;
}

EvalResult DeviceTrainBackend::evaluate(const DataSet &data, int64_t batch) {
  return started().evaluate(data, batch);
}

EvalResult DeviceTrainBackend::evaluateEma(const DataSet &data, int64_t batch) {
  return started().evaluateEma(data, batch);
}

void DeviceTrainBackend::fetch(std::vector<float> &params, Optimizer &optimizer) {
  started().getState(params, optimizer);
}

} // namespace stringrt::cuda
