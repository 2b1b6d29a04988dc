// stringrun --device cuda (docs/cuda.md, "The device executor"): training
// and evaluation (stringrt::train() / the test split with the GPU as the
// backend, stringrt::cuda::DeviceTrainBackend), benchmarking and one step's
// gradients on the GPU through stringrt::cuda::DeviceModel. Without the CUDA
// backend (a build without the toolkit) or without a usable device, each
// entry point throws an Error saying why.
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/Data.h"
#include "stringrt/Distributed.h"
#include "stringrt/Model.h"
#include "stringrt/Trainer.h"

#include <cstdint>
#include <memory>
#include <string>

namespace stringrun {

struct DeviceRunOptions {
  int64_t epochs = 0, steps = 0, batch = 32;
  uint64_t seed = 0;
  uint64_t initSeed = 0; // gradients: the initial parameters' draw (--init-seed)
  bool evaluate = true;
  bool tf32 = false;
  bool graphs = true; // CUDA graphs for the training step (--no-graphs: off)
  bool overlapUpload = true; // batch upload on a second stream (--no-overlap: off)
  // GPU ranks: each all-reduce bucket as its gradients are final, beside the
  // backward (--no-overlap-allreduce: off); the buckets' cap (--bucket-kib;
  // 0: DDP's 1 MiB first, 25 MiB after).
  bool overlapAllReduce = true;
  int64_t bucketBytes = 0;
  int zeroStage = 0; // GPU ranks: 1 for ZeRO-1 (--zero 1)
  bool deviceAugment = true; // augmentation in a kernel (--host-augment: off)
  bool syncEachLaunch = false; // wait after every launch (--sync-launches)
  bool profile = false; // bench: GPU time by op kind (--profile; graphs off)
  std::string outPath; // gradients: the safetensors file of the GPU's gradients
};

// Whether this stringrun has the CUDA backend, and why a device cannot be
// used ("" when one can).
bool deviceBackendBuilt();
std::string deviceUnavailableReason();

// The GPU as stringrt::train()'s backend (train and eval --device cuda):
// checks the package (a cuda package whose ops all have GPU steps) and that
// a device can be used; the device model is made when the run starts.
std::unique_ptr<stringrt::TrainBackend> deviceTrainBackend(const stringrt::CudaSection *cuda,
                                                           const stringrt::Model &model,
                                                           const DeviceRunOptions &options);

// The backend of one rank of a data-parallel run on GPUs under an MPI
// launcher (stringrt::cuda::makeDeviceDataParallelBackend): this rank's GPU
// (its local rank modulo the devices), NCCL for the gradients.
std::unique_ptr<stringrt::TrainBackend> deviceRanksBackend(const stringrt::CudaSection *cuda,
                                                           const stringrt::Model &model,
                                                           const DeviceRunOptions &options,
                                                           stringrt::Communicator &ranks,
                                                           double rankTimeoutSeconds);

// Times `steps` training steps (after one warm-up step) on the GPU; with
// options.profile, then prints the GPU time of each op kind (CUDA events
// around every op, graphs off).
int deviceBench(const stringrt::CudaSection *cuda, stringrt::Model &model,
                const stringrt::DataSet &data, const DeviceRunOptions &options, int64_t steps);

// Runs @gradients once on the first training batch of the seed on the GPU
// and on the CPU model, prints each gradient's largest difference relative
// to its largest magnitude, writes the GPU's loss and gradients to
// options.outPath, and returns 1 when the loss or a gradient is off by more
// than the tolerance (kGradientTolerance and kLossTolerance;
// kBf16GradientTolerance and kBf16LossTolerance for a package of precision
// bf16, which stores its activations in bf16 and whose attention and GEMMs
// round their operands to bf16: 2^-9 relative at every store, which the
// q/k projections' small gradients (dS = P (dP - delta) cancels) and twelve
// layers of vit_s_rope grow, under the emulator at batch 2, to 1.26e-1
// (encoder.7.wq) and a loss 1.4e-3 off (2026-12-01; 5.9e-2 and 1.3e-4 with
// f32 activations). PyTorch's own bf16 autocast moves the same model's q/k
// gradients by 50-100% and its loss by 4.7e-3 with the CPU's autocast at
// batch 2, 12-24% and 2-4e-4 on an H200 at batch 16
// (tests/bench/bf16_gradient_error.py). A wrong layout or a missing term
// gives errors of order 1: the bounds still separate).
constexpr double kGradientTolerance = 2e-3;
constexpr double kLossTolerance = 1e-4;
constexpr double kBf16GradientTolerance = 2.5e-1;
constexpr double kBf16LossTolerance = 5e-3;
int deviceGradients(const stringrt::CudaSection *cuda, stringrt::Model &model,
                    const stringrt::DataSet &data, const DeviceRunOptions &options);

} // namespace stringrun
