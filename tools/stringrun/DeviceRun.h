// stringrun --device cuda (docs/cuda.md, "The device executor"): training,
// benchmarking and one step's gradients on the GPU through
// stringrt::cuda::DeviceModel. Evaluation runs on the CPU model with the
// parameters copied back. Without the CUDA backend (a build without the
// toolkit) or without a usable device, each entry point throws an Error
// saying why.
#pragma once

#include "stringrt/Data.h"
#include "stringrt/Model.h"
#include "stringrt/CudaSection.h"

#include <cstdint>
#include <string>

namespace stringrun {

struct DeviceRunOptions {
  int64_t epochs = 0, steps = 0, batch = 32;
  uint64_t seed = 0;
  bool evaluate = true;
  bool tf32 = false;
  bool graphs = true; // CUDA graphs for the training step (--no-graphs: off)
  std::string outPath; // gradients: the safetensors file of the GPU's gradients
};

// Whether this stringrun has the CUDA backend, and why a device cannot be
// used ("" when one can).
bool deviceBackendBuilt();
std::string deviceUnavailableReason();

// Trains with the package's step program on the GPU: the data order and the
// schedule of `stringrun train` (epochOrder, floor(examples / batch) steps per
// epoch), the test split evaluated after every epoch. Returns the exit code.
int deviceTrain(const stringrt::CudaSection *cuda, stringrt::Model &model,
                const stringrt::DataSet &data, const DeviceRunOptions &options);

// Times `steps` training steps (after one warm-up step) on the GPU.
int deviceBench(const stringrt::CudaSection *cuda, stringrt::Model &model,
                const stringrt::DataSet &data, const DeviceRunOptions &options, int64_t steps);

// Runs @gradients once on the first training batch of the seed on the GPU
// and on the CPU model, prints each gradient's largest difference relative
// to its largest magnitude, writes the GPU's loss and gradients to
// options.outPath, and returns 1 when the loss or a gradient is off by more
// than the tolerance (kGradientTolerance).
constexpr double kGradientTolerance = 2e-3;
constexpr double kLossTolerance = 1e-4;
int deviceGradients(const stringrt::CudaSection *cuda, stringrt::Model &model,
                    const stringrt::DataSet &data, const DeviceRunOptions &options);

} // namespace stringrun
