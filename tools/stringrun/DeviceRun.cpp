// stringrun --device cuda (DeviceRun.h).
#include "DeviceRun.h"
#include "ProfileTable.h"

#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"
#include "stringrt/Trainer.h"

#ifdef STRINGRUN_HAVE_CUDA
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/DeviceExecutor.h"
#include "stringrt/cuda/DeviceRanks.h"
#include "stringrt/cuda/DeviceTraining.h"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

namespace stringrun {

#ifndef STRINGRUN_HAVE_CUDA

bool deviceBackendBuilt() { return false; }
std::string deviceUnavailableReason() {
  return "this stringrun was built without the CUDA backend (no CUDA toolkit at configure "
         "time, or configured with -DSTRINGC_WITH_CUDA=OFF as scripts/main.sh does on a fresh "
         "build directory; `bash scripts/build.sh` builds everything)";
}
namespace {
[[noreturn]] void unavailable() {
  throw stringrt::Error("--device cuda: " + deviceUnavailableReason());
}
} // namespace
std::unique_ptr<stringrt::TrainBackend> deviceTrainBackend(const stringrt::CudaSection *,
                                                           const stringrt::Model &,
                                                           const DeviceRunOptions &) {
  unavailable();
}
std::unique_ptr<stringrt::TrainBackend> deviceRanksBackend(const stringrt::CudaSection *,
                                                           const stringrt::Model &,
                                                           const DeviceRunOptions &,
                                                           stringrt::Communicator &, double) {
  unavailable();
}
int deviceBench(const stringrt::CudaSection *, stringrt::Model &, const stringrt::DataSet &,
                const DeviceRunOptions &, int64_t) {
  unavailable();
}
int deviceGradients(const stringrt::CudaSection *, stringrt::Model &, const stringrt::DataSet &,
                    const DeviceRunOptions &) {
  unavailable();
}

#else

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool deviceBackendBuiltImpl() { return true; }

stringrt::cuda::DeviceOptions deviceOptions(const stringrt::CudaSection *cuda,
                                            const DeviceRunOptions &run) {
  if (!cuda)
    throw stringrt::Error("--device cuda needs a package of target cuda (stringc --target=cuda)");
  std::string why = stringrt::cuda::unavailableReason();
  if (!why.empty())
    throw stringrt::Error("--device cuda: no usable CUDA device: " + why);
  stringrt::cuda::DeviceOptions options;
  options.tf32 = run.tf32;
  options.graphs = run.graphs;
  options.overlapUpload = run.overlapUpload;
  options.overlapAllReduce = run.overlapAllReduce;
  options.bucketBytes = run.bucketBytes;
  options.zeroStage = run.zeroStage;
  options.augmentOnDevice = run.deviceAugment;
  options.syncEachLaunch = run.syncEachLaunch;
  return options;
}

/// The device model of `model`'s manifest and current parameters; its
/// training steps are profiled into `profile` when given.
std::unique_ptr<stringrt::cuda::DeviceModel> open(const stringrt::CudaSection *cuda,
                                                  stringrt::Model &model,
                                                  const DeviceRunOptions &run,
                                                  stringrt::OpProfile *profile = nullptr) {
  stringrt::cuda::DeviceOptions options = deviceOptions(cuda, run);
  options.profile = profile;
  return std::make_unique<stringrt::cuda::DeviceModel>(model.manifest(), *cuda,
                                                       model.parameters(), options);
}

int64_t stepsPerEpoch(const stringrt::DataSet &data, int64_t batch) {
  if (batch < 1)
    throw stringrt::Error(fmt::format("batch must be >= 1, got {}", batch));
  int64_t perEpoch = data.count(stringrt::Split::Train) / batch;
  if (perEpoch == 0)
    throw stringrt::Error(fmt::format("the train split has {} examples, fewer than one batch of {}",
                                      data.count(stringrt::Split::Train), batch));
  return perEpoch;
}

} // namespace

bool deviceBackendBuilt() { return deviceBackendBuiltImpl(); }
std::string deviceUnavailableReason() { return stringrt::cuda::unavailableReason(); }

std::unique_ptr<stringrt::TrainBackend> deviceTrainBackend(const stringrt::CudaSection *cuda,
                                                           const stringrt::Model &model,
                                                           const DeviceRunOptions &options) {
  stringrt::cuda::DeviceOptions device = deviceOptions(cuda, options);
  return std::make_unique<stringrt::cuda::DeviceTrainBackend>(model.manifest(), *cuda, device);
}

std::unique_ptr<stringrt::TrainBackend> deviceRanksBackend(const stringrt::CudaSection *cuda,
                                                           const stringrt::Model &model,
                                                           const DeviceRunOptions &options,
                                                           stringrt::Communicator &ranks,
                                                           double rankTimeoutSeconds) {
  return stringrt::cuda::makeDeviceDataParallelBackend(
      model.manifest(), *cuda, deviceOptions(cuda, options), ranks, rankTimeoutSeconds);
}

int deviceBench(const stringrt::CudaSection *cuda, stringrt::Model &model,
                const stringrt::DataSet &data, const DeviceRunOptions &options, int64_t steps) {
  model.initParameters();
  stringrt::OpProfile profile;
  auto device = open(cuda, model, options, options.profile ? &profile : nullptr);
  const int64_t perEpoch = stepsPerEpoch(data, options.batch);
  const int64_t total = steps + 1;
  const int64_t count = data.count(stringrt::Split::Train);
  std::vector<int64_t> order;
  auto batchOf = [&](int64_t s) {
    if (s % perEpoch == 0 || order.empty())
      order = stringrt::epochOrder(count, 0, s / perEpoch);
    return data.batch(stringrt::Split::Train, order.data() + (s % perEpoch) * options.batch,
                      static_cast<size_t>(options.batch));
  };
  // Steps are queued ahead of the host: while step s computes, batch s + 1
  // is assembled and staged and step s - 1's results are read (the device
  // never waits for the host).
  bool finite = true;
  auto collect = [&] {
    stringrt::cuda::StepOutcome outcome = device->collectStep();
    if (!outcome.applied && finite) {
      finite = false;
      std::fprintf(stderr, "stringrun: error: bench: the loss of step %lld is %g\n",
                   static_cast<long long>(outcome.info.step), double(outcome.loss));
    }
  };
  device->stage(stringrt::modelInputs(model, batchOf(0)));
  auto start = Clock::now();
  for (int64_t s = 0; s < total; ++s) {
    device->setStepKey({0, s, 0}); // fresh dropout masks each step, as in training
    device->queueStep(total);
    if (s + 1 < total)
      device->stage(stringrt::modelInputs(model, batchOf(s + 1)));
    if (s == 0) { // the warm-up step (allocation, first launches) is not timed
      collect();
      profile.clear();
      start = Clock::now();
    } else if (device->stepsInFlight() == stringrt::cuda::kStepsInFlight) {
      collect();
    }
  }
  while (device->stepsInFlight() > 0)
    collect();
  double seconds = secondsSince(start);
  if (!finite)
    return 1;
  std::printf("bench '%s' on %s: %lld steps of batch %lld in %.3f s: %.3f steps/s, %.1f %s/s "
              "(%.2f ms/step; %s GEMMs, CUDA graphs %s, overlapped upload %s)\n",
              model.manifest().model.c_str(), device->deviceName().c_str(),
              static_cast<long long>(steps), static_cast<long long>(options.batch), seconds,
              double(steps) / seconds,
              double(steps * options.batch * data.unitsPerExample()) / seconds, data.unit(),
              1000.0 * seconds / double(steps), device->gemmPrecision(),
              device->options().graphs ? "on" : "off",
              device->options().overlapUpload ? "on" : "off");
  if (options.profile) {
    printProfile(profile, steps, seconds,
                 "(not in a profiled span: host work, gaps between launches)");
    for (const std::string &line : device->gemmAlgorithms())
      std::printf("cuBLASLt: %s\n", line.c_str());
  }
  return 0;
}

int deviceGradients(const stringrt::CudaSection *cuda, stringrt::Model &model,
                    const stringrt::DataSet &data, const DeviceRunOptions &options) {
  model.initParameters(options.initSeed);
  auto device = open(cuda, model, options);
  stepsPerEpoch(data, options.batch);
  const std::vector<int64_t> order =
      stringrt::epochOrder(data.count(stringrt::Split::Train), options.seed, 0);
  stringrt::Batch b =
      data.batch(stringrt::Split::Train, order.data(), static_cast<size_t>(options.batch));
  auto inputs = stringrt::modelInputs(model, b);
  float gpuLoss = 0, cpuLoss = 0;
  std::vector<float> gpu, cpu;
  // The dropout masks of `train --seed S`'s step 1 on both (GradientDump.cpp).
  const stringrt::StepKey key{options.seed, 0, 0};
  device->setStepKey(key);
  model.setStepKey(key);
  device->gradients(inputs, gpuLoss, gpu);
  model.gradients(inputs, cpuLoss, cpu);
  const bool bf16 = cuda->precision == "bf16";
  const double lossTolerance = bf16 ? kBf16LossTolerance : kLossTolerance;
  const double gradientTolerance = bf16 ? kBf16GradientTolerance : kGradientTolerance;
  bool ok = std::fabs(double(gpuLoss) - cpuLoss) <= lossTolerance * std::max(1.0, std::fabs(double(cpuLoss)));
  std::printf("gradients '%s' on %s: batch %lld, loss %.7f (GPU) vs %.7f (CPU)%s\n",
              model.manifest().model.c_str(), device->deviceName().c_str(),
              static_cast<long long>(options.batch), gpuLoss, cpuLoss, ok ? "" : "  MISMATCH");
  std::vector<stringrt::TensorView> tensors;
  tensors.push_back({"loss", stringrt::DType::F32, {}, &gpuLoss});
  double worst = 0;
  for (const stringrt::ParamSlot &slot : model.slots()) {
    if (slot.frozen)
      continue;
    double largest = 0, diff = 0;
    for (int64_t i = slot.offset; i < slot.offset + slot.size; ++i) {
      largest = std::max(largest, std::fabs(double(cpu[size_t(i)])));
      diff = std::max(diff, std::fabs(double(gpu[size_t(i)]) - cpu[size_t(i)]));
    }
    double relative = diff / std::max(largest, 1e-12);
    bool slotOk = relative <= gradientTolerance || diff <= 1e-7;
    ok = ok && slotOk;
    worst = std::max(worst, slotOk ? 0.0 : relative);
    std::printf("  grad %-40s max |gpu - cpu| %.3e, max |cpu| %.3e, relative %.3e%s\n",
                slot.name.c_str(), diff, largest, relative, slotOk ? "" : "  MISMATCH");
    tensors.push_back({"grad." + slot.name, stringrt::DType::F32, slot.shape,
                       gpu.data() + slot.offset});
  }
  if (!options.outPath.empty()) {
    std::map<std::string, std::string> metadata = {{"model", model.manifest().model},
                                                   {"device", device->deviceName()},
                                                   {"batch", std::to_string(options.batch)},
                                                   {"seed", std::to_string(options.seed)}};
    if (options.initSeed != 0)
      metadata["init_seed"] = std::to_string(options.initSeed);
    stringrt::writeSafetensors(options.outPath, tensors, metadata);
  }
  std::printf("%s: every gradient within %.0e of its largest magnitude\n",
              ok ? "PASS" : "FAIL", gradientTolerance);
  return ok ? 0 : 1;
}

#endif

} // namespace stringrun
