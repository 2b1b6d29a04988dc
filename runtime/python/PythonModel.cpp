// stringrt.Model's state (PythonModel.h): the CPU path is the C ABI's
// (runtime/src/capi/CApi.cpp) over the C++ API; the "cuda" path keeps the
// parameters and the optimizer state on a DeviceModel and copies them to the
// host only when Python asks for them (syncFromDevice) or changes them there
// (syncToDevice).
#include "PythonModel.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Trainer.h"

#ifdef STRINGRT_PYTHON_HAVE_CUDA
#include "stringrt/cuda/DeviceExecutor.h"
#endif

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace stringrt::python {

bool haveCuda() {
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

Model makeModel(const Package &package, const std::string &kernels) {
  if (kernels.empty())
    return Model(package);
  if (kernels == "compiled")
    return Model(package, KernelSet::Compiled);
  if (kernels == "fast")
    return Model(package, KernelSet::Fast);
  if (kernels == "reference")
    return Model(package, KernelSet::Reference);
  throw Error("unknown kernels '" + kernels + "' (compiled, fast or reference)");
}

std::string lossText(float loss) {
  return std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";
}

} // namespace

#ifdef STRINGRT_PYTHON_HAVE_CUDA
struct PythonModel::Device {
  std::unique_ptr<cuda::DeviceModel> model;
};
#else
struct PythonModel::Device {};
#endif

PythonModel::PythonModel(const Package &package, const std::string &kernels,
                         const std::string &device, uint64_t seed)
    : package_(package), model_(makeModel(package, kernels)), slots_(optimizerSlots(model_)),
      optimizer_(model_.manifest().optimizer, slots_, model_.parameters().size()),
      device_(device), seed_(seed) {
  if (device == "cpu")
    return;
  if (device != "cuda")
    throw Error("unknown device '" + device + "' (cpu or cuda)");
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  if (!package.cuda())
    throw Error(package.path(), "device \"cuda\" needs a package compiled with "
                                "--target=cuda; this one's target is \"" +
                                    package.target() + "\"");
  gpu_ = std::make_unique<Device>();
  // Uploads the (zero) parameters; initParameters and the loads push theirs.
  gpu_->model = std::make_unique<cuda::DeviceModel>(model_.manifest(), *package.cuda(),
                                                    model_.parameters());
#else
  throw Error("device \"cuda\": this stringrt module was built without the CUDA backend "
              "(the CUDA toolkit was not found when it was configured)");
#endif
}

PythonModel::~PythonModel() = default;

std::string PythonModel::kernels() const {
  switch (model_.kernels()) {
  case KernelSet::Compiled:
    return "compiled";
  case KernelSet::Fast:
    return "fast";
  case KernelSet::Reference:
    return "reference";
  }
  return "?";
}

void PythonModel::syncFromDevice() {
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  if (gpu_)
    gpu_->model->getState(model_.parameters(), optimizer_);
#endif
}

void PythonModel::syncToDevice() {
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  if (gpu_)
    gpu_->model->setState(model_.parameters(), optimizer_);
#endif
}

void PythonModel::initParameters(uint64_t initSeed) {
  std::lock_guard<std::mutex> lock(mutex_);
  syncFromDevice(); // the optimizer state stays the device's
  model_.initParameters(initSeed);
  syncToDevice();
}

void PythonModel::loadParameters(const std::string &path, bool ema) {
  std::lock_guard<std::mutex> lock(mutex_);
  syncFromDevice(); // the optimizer state stays the device's
  stringrt::loadParameters(path, model_.manifest().model, slots_, model_.parameters(), ema);
  syncToDevice();
}

void PythonModel::loadCheckpoint(const std::string &path) {
  std::lock_guard<std::mutex> lock(mutex_);
  CheckpointInfo info = stringrt::loadCheckpoint(path, model_.manifest().model, slots_,
                                                 model_.parameters(), optimizer_);
  lastBatch_ = info.batch;
  syncToDevice();
}

void PythonModel::saveCheckpoint(const std::string &path, int64_t totalSteps) {
  std::lock_guard<std::mutex> lock(mutex_);
  syncFromDevice();
  CheckpointInfo info;
  info.model = model_.manifest().model;
  info.step = optimizer_.stepCount();
  info.batch = lastBatch_;
  // A checkpoint's step is never beyond its run's length (the C ABI's rule).
  info.totalSteps = std::max(totalSteps, info.step);
  stringrt::saveCheckpoint(path, info, slots_, model_.parameters(), optimizer_);
}

std::map<std::string, std::vector<float>>
PythonModel::forward(const std::map<std::string, HostTensor> &inputs,
                     std::map<std::string, std::vector<int64_t>> &shapes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, std::vector<float>> result;
  shapes.clear();
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  if (gpu_) {
    // The device gives flat values; the shapes are the program's, with the batch.
    int64_t batch = 0;
    for (const ManifestInput &in : model_.manifest().inputs)
      if (!in.shape.empty() && in.shape[0] == -1 && inputs.count(in.name))
        batch = inputs.at(in.name).shape[0];
    result = gpu_->model->forward(inputs);
    const Program &program = model_.manifest().forward;
    for (const ProgramOutput &out : program.outputs) {
      std::vector<int64_t> shape = program.values[out.value].shape;
      for (int64_t &d : shape)
        if (d == -1)
          d = batch;
      shapes[out.key()] = shape;
    }
    return result;
  }
#endif
  for (auto &[name, tensor] : model_.run("forward", inputs)) {
    shapes[name] = tensor.shape;
    result[name] = std::move(tensor.values);
  }
  return result;
}

float PythonModel::gradients(const std::map<std::string, HostTensor> &inputs,
                             std::vector<float> &flatGrads) {
  std::lock_guard<std::mutex> lock(mutex_);
  float loss = 0;
  const StepKey key{seed_, optimizer_.stepCount(), 0};
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  if (gpu_) {
    gpu_->model->setStepKey(key);
    gpu_->model->gradients(inputs, loss, flatGrads);
    return loss;
  }
#endif
  model_.setStepKey(key);
  model_.gradients(inputs, loss, flatGrads);
  return loss;
}

OptimizerStepInfo PythonModel::trainStep(const std::map<std::string, HostTensor> &inputs,
                                         int64_t totalSteps, float &loss) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (totalSteps < 1)
    throw Error("total_steps must be >= 1, got " + std::to_string(totalSteps));
  const int64_t step = optimizer_.stepCount() + 1;
  // The dropout masks of `stringrun train --seed` at this step.
  const StepKey key{seed_, step - 1, 0};
  int64_t batch = 0;
  for (const auto &entry : inputs)
    if (!entry.second.shape.empty())
      batch = std::max(batch, entry.second.shape[0]);
#ifdef STRINGRT_PYTHON_HAVE_CUDA
  if (gpu_) {
    gpu_->model->setStepKey(key);
    gpu_->model->stage(inputs);
    gpu_->model->queueStep(totalSteps);
    cuda::StepOutcome outcome = gpu_->model->collectStep();
    loss = outcome.loss;
    if (!outcome.applied) {
      // The device halts after a non-finite loss until its state is set
      // again: restore the state it kept (the step was not applied).
      syncFromDevice();
      syncToDevice();
      throw Error("step " + std::to_string(step) + ": the loss is " + lossText(loss) +
                  "; the step is not taken");
    }
    optimizer_.setStepCount(outcome.stepsTaken);
    lastBatch_ = batch;
    return outcome.info;
  }
#endif
  std::vector<float> grads;
  model_.setStepKey(key);
  model_.gradients(inputs, loss, grads);
  if (!std::isfinite(loss))
    throw Error("step " + std::to_string(step) + ": the loss is " + lossText(loss) +
                "; the step is not taken");
  OptimizerStepInfo info = optimizer_.step(model_.parameters(), grads, totalSteps);
  lastBatch_ = batch;
  return info;
}

} // namespace stringrt::python
