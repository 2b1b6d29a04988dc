// A training step on the device (DeviceModelImpl.h), nothing of it passing
// through the host: @gradients (in micro-batches when accumulating), the
// gradient norm's partials, the step's scalars, the optimizer; captured into
// a CUDA graph and replayed.
#include "DeviceModelImpl.h"

#include <algorithm>
#include <cstring>

namespace stringrt::cuda {

/// The number of gradient-norm partials pe_sumsq_partials writes over
/// `floats` gradients (default: the whole buffer, `total`).
int64_t DeviceModel::Impl::partialBlocks(int64_t floats) const {
  const int64_t n = floats < 0 ? total : floats;
  if (n == 0)
    return 0;
  std::vector<KernelArg> args = {KernelArg::pointer(1), KernelArg::pointer(1),
                                 KernelArg::integer(n)};
  return int64_t(launchShapeFor(*section.find("pe_sumsq_partials"), args).grid[0]);
}

/// Queues a whole training step, nothing of it passing through the host:
/// @gradients, the gradient copies, the norm's partials, the step's scalars
/// (pe_optimizer_scalars: clipping factor, learning rate, bias
/// corrections, into the control block) and the optimizer, which reads
/// them there.
void DeviceModel::Impl::enqueueTrainStep(BatchBuffers &b, int64_t batch) {
  inTrainingStep = true; // profiled (DeviceOptions::profile)
  walk("gradients", b, batch);
  timed("gradient copies", [&] { collectGradients(b); });
  timed("optimizer", [&] { enqueueOptimizer(lossAddress(b)); });
  inTrainingStep = false;
}

/// The micro-batches of a step of `rows` examples in `parts` (the CPU
/// trainer's split: consecutive rows, sizes differing by at most one, the
/// larger first) and the buffers that step needs, the BatchBuffers of each
/// micro-batch size included (nothing is allocated while a step is
/// captured). The inputs must carry the batch in their first dimension
/// alone, as the CPU trainer's split assumes.
AccumulatedStep &DeviceModel::Impl::accumulatedFor(int64_t rows, int64_t parts) {
  const auto key = std::make_pair(rows, parts);
  if (auto it = accumulated.find(key); it != accumulated.end())
    return it->second;
  AccumulatedStep s;
  s.sizes = microBatchSizes(rows, parts);
  int64_t begin = 0;
  for (int64_t size : s.sizes) {
    s.begins.push_back(begin);
    begin += size;
  }
  checkAccumulation(manifest);
  uint64_t bytes = 0;
  for (const ManifestInput &in : manifest.inputs) {
    uint64_t row = dtypeSize(in.dtype);
    for (size_t d = 1; d < in.shape.size(); ++d)
      row *= uint64_t(in.shape[d]);
    s.inputOffsets.push_back(bytes);
    s.rowBytes.push_back(row);
    bytes += (row * uint64_t(rows) + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
  }
  s.inputs = newArena(bytes);
  s.keys = newArena(uint64_t(parts) * kStepKeyWords * 4);
  s.loss = newArena(4);
  for (int64_t size : s.sizes)
    buffersFor("gradients", size);
  return accumulated.emplace(key, std::move(s)).first->second;
}

/// Queues an accumulated training step, nothing of it passing through the
/// host: for each micro-batch, its step key (from s.keys) and its rows of
/// the whole batch into @gradients' inputs at its size, the walk, and its
/// loss and gradients added, weighted by size / `weightRows`, into the
/// step's loss and the flat gradient buffer (cuBLAS axpy); on a
/// data-parallel rank their sums across the ranks, overlapped with the last
/// micro-batch's backward (enqueueOverlappedSum; the earlier micro-batches'
/// sums are not final); then the optimizer, as in enqueueTrainStep.
void DeviceModel::Impl::enqueueAccumulatedStep(const AccumulatedStep &s, int64_t weightRows) {
  inTrainingStep = true;
  const Program &p = program("gradients");
  timed("gradient accumulation", [&] {
    if (total > 0)
      zeroOnDevice(grads->at(0, size_t(gradFloats()) * 4), uint64_t(gradFloats()),
                   "zeroing the gradients");
    zeroOnDevice(s.loss->at(0, 4), 1, "zeroing the loss");
  });
  for (size_t part = 0; part < s.sizes.size(); ++part) {
    const int64_t size = s.sizes[part];
    BatchBuffers &b = buffersFor("gradients", size);
    timed("micro-batch inputs", [&] {
      const uint64_t keyBytes = kStepKeyWords * 4;
      if (stepKeyAddress != 0)
        copyOnDevice(stepKeyAddress, s.keys->at(part * keyBytes, keyBytes), keyBytes,
                     "the micro-batch's step key");
      for (size_t i = 0; i < manifest.inputs.size(); ++i) {
        const uint64_t to = address(b, p.inputs[i]);
        if (to == 0) // an input @gradients does not read
          continue;
        const uint64_t bytes = s.rowBytes[i] * uint64_t(size);
        if (b.placement.values[p.inputs[i]].bytes != bytes)
          throw Error(fmt::format("input '{}' of a micro-batch of {} has the wrong size",
                                  manifest.inputs[i].name, size));
        const uint64_t from = s.inputOffsets[i] + s.rowBytes[i] * uint64_t(s.begins[part]);
        copyOnDevice(to, s.inputs->at(from, bytes), bytes, "the micro-batch's inputs");
      }
    });
    const float weight = static_cast<float>(size) / static_cast<float>(weightRows);
    if (ranks && options.overlapAllReduce && part + 1 == s.sizes.size()) {
      // The last micro-batch: its gradients complete the sums, which the
      // ranks' all-reduce takes bucket by bucket as its backward goes.
      enqueueOverlappedSum(b, size, weight, s.loss->at(0, 4), "gradient accumulation",
                           "accumulating the gradients");
      continue;
    }
    walk("gradients", b, size);
    timed("gradient accumulation", [&] {
      forEachGradientOutput(b, [&](const OptimizerSlot &slot, uint64_t from) {
        gemm->axpy(int64_t(slot.size), weight, from,
                   grads->at(slot.offset * 4, uint64_t(slot.size) * 4),
                   "accumulating the gradients");
      });
      gemm->axpy(1, weight, lossAddress(b), s.loss->at(0, 4), "accumulating the loss");
    });
  }
  if (ranks && !options.overlapAllReduce) // one all-reduce a step, after the last micro-batch
    enqueueRankSum(s.loss->at(0, 4));
  timed("optimizer", [&] { enqueueOptimizer(s.loss->at(0, 4)); });
  inTrainingStep = false;
}

/// The gradient norm's partials, the step's scalars (from the step's loss
/// at device address `loss`) and the update.
void DeviceModel::Impl::enqueueOptimizer(uint64_t loss) {
  if (zero) {
    enqueueShardOptimizer(loss);
    return;
  }
  const int64_t blocks = partialBlocks();
  if (blocks > 0)
    kernels->launch("pe_sumsq_partials",
                    {KernelArg::pointer(partials->at(0, kMaxPartials * 4)),
                     KernelArg::pointer(grads->at(0, size_t(total) * 4)),
                     KernelArg::integer(total)},
                    "the gradient norm", nullptr, stream);
  checkLaunch("the gradient norm (kernel pe_sumsq_partials)");
  const std::array<int64_t, 3> oneBlock = {1, 1, 1};
  kernels->launch("pe_optimizer_scalars",
                  {KernelArg::pointer(control->address()),
                   KernelArg::pointer(partials->at(0, kMaxPartials * 4)),
                   KernelArg::integer(blocks), KernelArg::pointer(loss)},
                  "the optimizer's scalars", &oneBlock, stream);
  checkLaunch("the optimizer's scalars (kernel pe_optimizer_scalars)");
  launchOptimizer();
  checkLaunch(adamw() ? "the optimizer (kernel pe_adamw)" : "the optimizer (kernel pe_sgd)");
}

/// Captures `enqueue` (the device part of a training step or evaluation
/// batch) into work.graph; false (nothing queued) when capture fails.
bool DeviceModel::Impl::capture(ReplayedWork &work, const std::function<void()> &enqueue,
                                const char *what) {
  const driver::Api &api = driver::require();
  std::string failure;
  CUgraph graph = nullptr;
  CUresult begun = api.streamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (begun != CUDA_SUCCESS) {
    failure = "cuStreamBeginCapture failed: " + driver::describe(begun);
  } else {
    try {
      enqueue();
    } catch (const std::exception &error) {
      failure = error.what();
    }
    CUresult ended = api.streamEndCapture(stream, &graph);
    if (failure.empty() && ended != CUDA_SUCCESS)
      failure = "cuStreamEndCapture failed: " + driver::describe(ended);
    if (failure.empty()) {
      CUresult made = api.graphInstantiate(&work.graph, graph, 0);
      if (made != CUDA_SUCCESS) {
        failure = "cuGraphInstantiate failed: " + driver::describe(made);
        work.graph = nullptr;
      }
    }
    if (graph)
      api.graphDestroy(graph);
  }
  if (failure.empty())
    return true;
  graphsFailed = true;
  std::fprintf(stderr,
               "stringrt: capturing the %s in a CUDA graph failed (%s); "
               "running without graphs\n",
               what, failure.c_str());
  return false;
}

/// Queues `enqueue` (the device work of `work`): eagerly on its first
/// run, captured on the second and replayed from then on
/// (DeviceOptions::graphs).
void DeviceModel::Impl::runMaybeGraphed(ReplayedWork &work, const std::function<void()> &enqueue,
                                        const char *what, const std::string &step) {
  bool graphs = options.graphs && !graphsFailed;
  if (graphs && !work.graph && work.runs >= 1)
    capture(work, enqueue, what);
  if (graphs && work.graph)
    driver::check(driver::require().graphLaunch(work.graph, stream), step, "cuGraphLaunch");
  else
    enqueue();
  ++work.runs;
}

/// The state buffers of the device optimizer, in Optimizer::stateBuffers()
/// order: AdamW m, v; SGD u; then the EMA of the weights when kept.
std::vector<Arena *> DeviceModel::Impl::stateArenas() const {
  std::vector<Arena *> arenas = {moment1.get()};
  if (adamw())
    arenas.push_back(moment2.get());
  if (keepsEma())
    arenas.push_back(ema.get());
  return arenas;
}

/// Queues the optimizer's kernel once per maximal run of trainable slots,
/// then pe_ema on each (with an EMA); the step's scalars come from the
/// control block. (Every element's update is its own: the order of the
/// runs' launches does not change a bit.)
void DeviceModel::Impl::launchOptimizer() {
  forTrainableRuns(
      [&](size_t begin, size_t n) { launchUpdate(begin, n, begin, adamWritesBf16()); });
  launchEma();
  if (!adamWritesBf16()) // SGD: the copy rewritten after the update
    refreshBf16Params("the bf16 copy of the parameters");
}

/// Queues AdamW's or SGD's kernel on one run of floats [begin, begin + n)
/// of the flat buffers, its moments at `stateBegin` floats of their arenas.
void DeviceModel::Impl::launchUpdate(size_t begin, size_t n, size_t stateBegin,
                                     bool writesBf16) {
  const ManifestOptimizer &config = manifest.optimizer;
  const KernelArg controlArg = KernelArg::pointer(control->address());
  auto at = [&](const Arena &a, size_t from) { return KernelArg::pointer(a.at(from * 4, n * 4)); };
  const auto [master, masterBegin] = masterAt(begin);
  if (adamw()) {
    std::vector<KernelArg> args = {
        at(*master, masterBegin),  at(*moment1, stateBegin), at(*moment2, stateBegin),
        at(*grads, begin),   KernelArg::integer(int64_t(n)), controlArg,
        KernelArg::real(float(config.beta1)), KernelArg::real(float(config.beta2)),
        KernelArg::real(float(config.eps)),   KernelArg::real(float(config.weightDecay))};
    // With a bf16 copy of the parameters, AdamW writes it as it updates.
    if (writesBf16)
      args.push_back(KernelArg::pointer(paramsBf16->at(begin * 2, n * 2)));
    kernels->launch(writesBf16 ? kAdamWBf16Kernel : "pe_adamw", args, "AdamW", nullptr, stream);
  } else {
    kernels->launch("pe_sgd",
                    {at(*master, masterBegin), at(*moment1, stateBegin), at(*grads, begin),
                     KernelArg::integer(int64_t(n)), controlArg,
                     KernelArg::real(float(config.momentum)),
                     KernelArg::real(float(config.weightDecay))},
                    "SGD", nullptr, stream);
  }
}

/// Queues pe_ema on every run of trainable slots (the EMA whole), or with
/// sharded masters on those of this rank's slice (the EMA of the slice).
void DeviceModel::Impl::launchEma() {
  if (!keepsEma())
    return;
  auto launch = [&](size_t begin, size_t n) {
    const auto [master, at] = masterAt(begin); // (the EMA at the masters' offset)
    kernels->launch("pe_ema",
                    {KernelArg::pointer(ema->at(at * 4, n * 4)),
                     KernelArg::pointer(master->at(at * 4, n * 4)),
                     KernelArg::integer(int64_t(n)), KernelArg::pointer(control->address())},
                    "the EMA of the weights", nullptr, stream);
  };
  if (shardMasters)
    forTrainableSliceRuns(launch);
  else
    forTrainableRuns(launch);
}

void DeviceModel::Impl::refreshBf16Params(const char *what) {
  if (!paramsBf16 || total == 0)
    return;
  if (shardMasters)
    throw Error(fmt::format("device executor: {}: with sharded master weights the bf16 copy "
                            "is the ranks' (publishMasters)",
                            what));
  kernels->launch(kBf16ParamsKernel,
                  {KernelArg::pointer(paramsBf16->at(0, size_t(total) * 2)),
                   KernelArg::pointer(params->at(0, size_t(total) * 4)),
                   KernelArg::integer(total), KernelArg::integer(total)},
                  what, nullptr, stream);
}

/// Queues copies of every trainable slot of `from` into `to` (device
/// layout; the padding between slots is left alone).
void DeviceModel::Impl::copyTrainableSlots(const Arena &to, const Arena &from, const char *what) {
  for (const OptimizerSlot &slot : slots) {
    if (slot.frozen || slot.size == 0)
      continue;
    const size_t at = slot.offset * 4, bytes = slot.size * 4;
    driver::check(driver::require().memcpyDtoDAsync(CUdeviceptr(to.at(at, bytes)),
                                                    CUdeviceptr(from.at(at, bytes)), bytes, stream),
                  what, "cuMemcpyDtoDAsync");
  }
}

} // namespace stringrt::cuda
