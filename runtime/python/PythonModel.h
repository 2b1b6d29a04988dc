// The state behind a Python stringrt.Model (docs/python.md): a Model (the
// parameters in one flat host buffer, the programs on the CPU kernels), the
// package's optimizer over its slots and, for device "cuda", a DeviceModel
// that holds the live parameters and optimizer state on the GPU. Nothing here
// knows Python: StringrtModule.cpp converts NumPy arrays to HostTensors and
// releases the GIL around these calls, which take the model's mutex: two
// Python threads using one Model wait for each other.
#pragma once

#include "stringrt/HostTensor.h"
#include "stringrt/KernelSet.h"
#include "stringrt/Model.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Package.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace stringrt::python {

// Whether this module was built with the CUDA backend.
bool haveCuda();

class PythonModel {
public:
  // `kernels` empty: the package's default (Model(Package)); else
  // "compiled", "fast" or "reference". `device`: "cpu" or "cuda" (a package
  // compiled with --target=cuda, a module built with the CUDA backend).
  // `seed`: the data-order seed whose dropout masks train_step draws
  // ({seed, step, 0}, as `stringrun train --seed`).
  PythonModel(const Package &package, const std::string &kernels, const std::string &device,
              uint64_t seed);
  ~PythonModel();

  const Manifest &manifest() const { return model_.manifest(); }
  const std::vector<ParamSlot> &slots() const { return model_.slots(); }
  const std::string &device() const { return device_; }
  std::string kernels() const;
  int64_t stepCount() const { return optimizer_.stepCount(); }

  // The host's flat parameter buffer. On the CPU it is the live one (NumPy
  // views into it see every step); with a device it is refreshed from the
  // device by syncFromDevice() and pushed to it by syncToDevice().
  std::vector<float> &hostParameters() { return model_.parameters(); }
  void syncFromDevice();
  void syncToDevice();

  // The manifest's initialisers (initSeed != 0 draws again: Model::initParameters).
  void initParameters(uint64_t initSeed);
  // A checkpoint's or safetensors file's parameters (Checkpoint.h
  // loadParameters; `ema`: the checkpoint's EMA of the weights).
  void loadParameters(const std::string &path, bool ema);
  // Resumes: parameters, optimizer state and step count of a checkpoint.
  void loadCheckpoint(const std::string &path);
  // A checkpoint (step = steps taken, batch = the last step's).
  void saveCheckpoint(const std::string &path, int64_t totalSteps);

  // Inputs are checked by the programs (Model::run: every input, no other,
  // the dtype, the rank, every dimension but the batch).
  // The forward program's outputs by name.
  std::map<std::string, std::vector<float>> forward(const std::map<std::string, HostTensor> &inputs,
                                                    std::map<std::string, std::vector<int64_t>> &shapes);
  // The loss and the flat gradients (frozen slots 0).
  float gradients(const std::map<std::string, HostTensor> &inputs, std::vector<float> &flatGrads);
  // Gradients, then optimizer step t = stepCount() + 1 of a run of
  // `totalSteps` steps. A non-finite loss throws and takes no step.
  OptimizerStepInfo trainStep(const std::map<std::string, HostTensor> &inputs,
                              int64_t totalSteps, float &loss);

private:
  struct Device;
  Package package_;
  Model model_;
  std::vector<OptimizerSlot> slots_;
  Optimizer optimizer_;
  std::string device_;
  uint64_t seed_ = 0;
  int64_t lastBatch_ = 0;
  std::unique_ptr<Device> gpu_;
  std::mutex mutex_; // held by every public call that computes or loads
};

} // namespace stringrt::python
