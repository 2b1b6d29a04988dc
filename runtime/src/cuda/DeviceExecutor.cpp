// The device executor (DeviceExecutor.h): device buffers, the walk of the
// step program, and the training step. The binding of a launch to pointers
// and sizes is StepBinding.cpp (pure, unit tested without a GPU).
#include "stringrt/cuda/DeviceExecutor.h"

#include "BatchStaging.h"
#include "DriverApi.h"
#include "PinnedArray.h"
#include "DeviceStepControl.h"
#include "stringrt/Error.h"
#include "stringrt/Optimizer.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/StepBinding.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace stringrt::cuda {
namespace {

constexpr int64_t kMaxPartials = kCudaMaxPartials; // pe_sumsq_partials' grid cap
constexpr size_t kGemmWorkspace = size_t(32) << 20; // cuBLAS workspace (graph capture)

std::string joined(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// Device work queued alike run after run (a training step, an evaluation
/// batch): eagerly on its first run, captured into `graph` on its second
/// and replayed from then on (Impl::runMaybeGraphed).
struct ReplayedWork {
  int64_t runs = 0;
  CUgraphExec graph = nullptr;
  ReplayedWork() = default;
  ReplayedWork(ReplayedWork &&other) noexcept : runs(other.runs), graph(other.graph) {
    other.graph = nullptr;
  }
  ReplayedWork &operator=(ReplayedWork &&) = delete;
  ~ReplayedWork() {
    if (graph)
      if (const driver::Api *api = driver::api())
        api->graphExecDestroy(graph);
  }
};

/// A program's device buffers at one batch size.
struct BatchBuffers {
  ProgramPlacement placement;
  std::unique_ptr<Arena> arena, extra, scratch;
  ReplayedWork work; // training steps (@gradients) / evaluation batches (@forward)
};

/// What a training step of `rows` examples in micro-batches (queueStep's
/// `accumulate`) needs besides each micro-batch size's BatchBuffers: the
/// whole staged batch (sliced into each micro-batch's inputs inside the
/// step), each micro-batch's step key, the step's weighted loss.
struct AccumulatedStep {
  std::vector<int64_t> begins, sizes; // the micro-batches' rows, in order
  std::vector<uint64_t> inputOffsets, rowBytes; // each input's place in `inputs`
  std::unique_ptr<Arena> inputs, keys, loss;
  ReplayedWork work;
};


} // namespace

struct DeviceModel::Impl {
  Manifest manifest;
  CudaSection section;
  DeviceOptions options;
  std::shared_ptr<Device> device;
  std::unique_ptr<KernelSet> kernels;
  std::unique_ptr<Gemm> gemm;
  GemmPrecision gemmPrecision = GemmPrecision::Fp32; // of every GEMM of the steps
  CUstream stream = nullptr;
  // The parameters at their device offsets (deviceParameterLayout: aligned,
  // zeros between), `total` floats in the device's flat buffers; the host's
  // flat vectors pack them (`hostTotal` floats, the Model's layout).
  std::vector<OptimizerSlot> slots;
  int64_t total = 0, hostTotal = 0;
  std::unique_ptr<Arena> params, grads, moment1, moment2, partials, workspace;
  std::unique_ptr<Arena> ema; // the EMA of the weights (optimizer ema = d > 0)
  // The section's constant arrays (index tables), uploaded once; their
  // device addresses are every op's OpPointers::constants.
  std::unique_ptr<Arena> constants;
  std::vector<uint64_t> constantAddresses;
  // The step key the dropout kernels read (CudaArgKind::StepKey), when the
  // package has such a launch: kStepKeyWords u32, written before each step.
  std::unique_ptr<Arena> stepKeyBuffer;
  uint64_t stepKeyAddress = 0;
  StepKey stepKey; // the key of the next step (setStepKey)
  bool graphsFailed = false;
  std::unique_ptr<PinnedArray<float>> hostReturn; // the loss of gradients()
  // The step counter, the schedule's constants and each step's scalars on
  // the device, and their copies back (DeviceStepControl.h).
  std::unique_ptr<StepControl> control;
  // Batches of trainStaged / gradients / forward, and of evaluate() (its
  // own, so that evaluating between two steps leaves the staged training
  // batch alone).
  std::unique_ptr<BatchStaging> staging, evalStaging;
  int64_t steps = 0;       // optimizer steps applied, as of the last step collected
  int64_t stepsQueued = 0; // steps before the state given + steps queued since (names them)
  std::map<std::pair<std::string, int64_t>, BatchBuffers> buffers;
  // Accumulated steps by (rows, micro-batches).
  std::map<std::pair<int64_t, int64_t>, AccumulatedStep> accumulated;
  // DeviceOptions::profile: the spans queued since the last collection, by
  // kind, and the events they used (reused).
  struct TimedSpan {
    std::string kind;
    CUevent start = nullptr, end = nullptr;
  };
  std::vector<TimedSpan> spans;
  bool inTrainingStep = false; // only training steps are profiled
  std::vector<CUevent> freeEvents, allEvents;

  bool adamw() const { return manifest.optimizer.kind == OptimizerKind::AdamW; }
  bool keepsEma() const { return manifest.optimizer.emaDecay > 0; }

  ~Impl() {
    if (const driver::Api *api = driver::api())
      for (CUevent event : allEvents)
        api->eventDestroy(event);
    control.reset();
    staging.reset();
    evalStaging.reset();
    accumulated.clear();
    buffers.clear();
    if (stream)
      if (const driver::Api *api = driver::api())
        api->streamDestroy(stream);
  }

  const Program &program(const std::string &name) const { return manifest.program(name); }

  /// Queues `work` bracketed by two events when profiling (kind: the op
  /// kind, "gradient copies" or "optimizer"), else just queues it.
  template <typename Work> void timed(const std::string &kind, Work &&work) {
    if (!options.profile || !inTrainingStep) {
      work();
      return;
    }
    auto take = [&] {
      if (freeEvents.empty()) {
        CUevent event = nullptr;
        driver::check(driver::require().eventCreate(&event, CU_EVENT_DEFAULT),
                      "profiling the step", "cuEventCreate");
        allEvents.push_back(event);
        return event;
      }
      CUevent event = freeEvents.back();
      freeEvents.pop_back();
      return event;
    };
    TimedSpan span{kind, take(), take()};
    driver::check(driver::require().eventRecord(span.start, stream), "profiling the step",
                  "cuEventRecord");
    work();
    driver::check(driver::require().eventRecord(span.end, stream), "profiling the step",
                  "cuEventRecord");
    spans.push_back(std::move(span));
  }

  /// Adds the queued spans' times to the profile (waits for the stream).
  void collectProfile() {
    if (!options.profile || spans.empty())
      return;
    sync("profiling the step");
    for (const TimedSpan &span : spans) {
      float ms = 0;
      driver::check(driver::require().eventElapsedTime(&ms, span.start, span.end),
                    "profiling the step", "cuEventElapsedTime");
      options.profile->add(span.kind, double(ms) / 1000.0);
      freeEvents.push_back(span.start);
      freeEvents.push_back(span.end);
    }
    spans.clear();
  }

  /// A host flat vector (packed, hostTotal floats) in the device layout.
  std::vector<float> toDeviceLayout(const float *packed) const {
    std::vector<float> padded(size_t(total), 0.0f);
    size_t at = 0;
    for (const OptimizerSlot &s : slots) {
      std::copy(packed + at, packed + at + s.size, padded.begin() + long(s.offset));
      at += s.size;
    }
    return padded;
  }
  /// The device layout's values back into a packed host vector.
  void toHostLayout(const std::vector<float> &padded, float *packed) const {
    size_t at = 0;
    for (const OptimizerSlot &s : slots) {
      std::copy(padded.begin() + long(s.offset), padded.begin() + long(s.offset + s.size),
                packed + at);
      at += s.size;
    }
  }
  void uploadFlat(Arena &arena, const float *packed, const char *what) {
    std::vector<float> padded = toDeviceLayout(packed);
    arena.upload(0, padded.data(), padded.size() * 4, what);
  }
  void downloadFlat(const Arena &arena, float *packed, const char *what) {
    std::vector<float> padded(static_cast<size_t>(total));
    arena.download(0, padded.data(), padded.size() * 4, what);
    toHostLayout(padded, packed);
  }

  /// The batch size of `inputs` (checked against the manifest's inputs).
  int64_t batchOf(const std::map<std::string, HostTensor> &inputs) const {
    std::optional<int64_t> batch;
    for (const ManifestInput &in : manifest.inputs) {
      auto it = inputs.find(in.name);
      if (it == inputs.end())
        throw Error(fmt::format("device executor: missing input '{}'", in.name));
      const HostTensor &t = it->second;
      if (t.dtype != in.dtype || t.shape.size() != in.shape.size())
        throw Error(fmt::format("device executor: input '{}' has the wrong type or rank",
                                in.name));
      for (size_t d = 0; d < in.shape.size(); ++d) {
        if (in.shape[d] >= 0) {
          if (t.shape[d] != in.shape[d])
            throw Error(fmt::format("device executor: input '{}' dimension {} is {}, not {}",
                                    in.name, d, t.shape[d], in.shape[d]));
        } else if (!batch) {
          batch = t.shape[d];
        } else if (*batch != t.shape[d]) {
          throw Error("device executor: the inputs disagree on the batch size");
        }
      }
    }
    if (inputs.size() != manifest.inputs.size())
      throw Error("device executor: inputs that the manifest does not name");
    if (batch && *batch < 1)
      throw Error("device executor: the batch size must be at least 1");
    return batch.value_or(1);
  }

  /// A device buffer of `bytes` (at least one alignment unit: never empty).
  std::unique_ptr<Arena> newArena(uint64_t bytes) const {
    return std::make_unique<Arena>(device, size_t(std::max<uint64_t>(bytes, kDeviceAlignment)));
  }

  BatchBuffers &buffersFor(const std::string &name, int64_t batch) {
    auto key = std::make_pair(name, batch);
    auto it = buffers.find(key);
    if (it != buffers.end())
      return it->second;
    BatchBuffers b;
    const Program &p = program(name);
    b.placement = placeValues(manifest, p, name, batch);
    uint64_t scratchBytes = 0;
    if (const CudaProgramSteps *steps = section.stepsOf(name))
      for (const CudaOpSteps &op : steps->ops)
        scratchBytes = std::max(scratchBytes, scratchLayout(op, batch).bytes);
    b.arena = newArena(b.placement.arenaBytes);
    b.extra = newArena(b.placement.extraBytes);
    b.scratch = newArena(scratchBytes);
    return buffers.emplace(key, std::move(b)).first->second;
  }

  uint64_t address(const BatchBuffers &b, ValueId v) const {
    const ValuePlace &place = b.placement.values[v];
    if (place.bytes == 0)
      return 0;
    switch (place.region) {
    case Region::Params:
      return params->at(place.offset, place.bytes);
    case Region::Arena:
      return b.arena->at(place.offset, place.bytes);
    case Region::Extra:
      return b.extra->at(place.offset, place.bytes);
    case Region::None:
      break;
    }
    return 0;
  }

  /// Stages `inputs` (checked against the manifest) for the next step (on
  /// `into`, default `staging`).
  void stage(const std::map<std::string, HostTensor> &inputs, BatchStaging *into = nullptr) {
    int64_t batch = batchOf(inputs);
    std::vector<HostTensor> ordered;
    for (const ManifestInput &in : manifest.inputs)
      ordered.push_back(inputs.at(in.name));
    (into ? into : staging.get())->stage(ordered, batch);
  }

  /// The staged batch's size (throws when none is staged).
  int64_t stagedBatch(const BatchStaging *from = nullptr) const {
    const BatchStaging &s = from ? *from : *staging;
    if (!s.pending())
      throw Error("device executor: no batch was staged for this step");
    return s.batch();
  }

  /// Queues the copy of the staged batch into program `name`'s inputs.
  void consumeStaged(const BatchBuffers &b, const std::string &name,
                     BatchStaging *from = nullptr) {
    const Program &p = program(name);
    std::vector<uint64_t> destinations, bytes;
    for (size_t i = 0; i < manifest.inputs.size(); ++i) {
      destinations.push_back(address(b, p.inputs[i]));
      bytes.push_back(b.placement.values[p.inputs[i]].bytes);
    }
    (from ? from : staging.get())->consume(destinations, bytes);
  }

  /// Runs program `name` on the device (asynchronously, on the stream).
  void walk(const std::string &name, BatchBuffers &b, int64_t batch) {
    const Program &p = program(name);
    const CudaProgramSteps &steps = *section.stepsOf(name);
    size_t next = 0; // the next entry of steps.ops
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const ProgramOp &op = p.ops[i];
      if (op.is(OpCode::GetParam))
        continue;
      if (op.is(OpCode::ArithConstant)) {
        // Constants share arena slots with other values: fill at their place.
        ValueId r = op.results[0];
        const ValuePlace &place = b.placement.values[r];
        double value = op.getFloat("value");
        uint32_t bits = 0;
        if (p.values[r].dtype == DType::I32) {
          int32_t v = int32_t(value);
          std::memcpy(&bits, &v, 4);
        } else {
          float v = float(value);
          std::memcpy(&bits, &v, 4);
        }
        if (place.bytes)
          driver::check(driver::require().memsetD32Async(CUdeviceptr(address(b, r)), bits,
                                                         place.bytes / 4, stream),
                        fmt::format("{} op {} (arith.constant)", name, i), "cuMemsetD32Async");
        continue;
      }
      if (next >= steps.ops.size() || steps.ops[next].op != int64_t(i))
        throw Error(fmt::format("{} op {} ({}) has no GPU steps", name, i, op.op));
      const CudaOpSteps &opSteps = steps.ops[next++];
      OpPointers pointers;
      pointers.constants = constantAddresses;
      pointers.stepKey = stepKeyAddress;
      for (ValueId v : op.operands)
        pointers.operands.push_back(address(b, v));
      for (ValueId v : op.results)
        pointers.results.push_back(address(b, v));
      ScratchLayout scratch = scratchLayout(opSteps, batch);
      for (size_t s = 0; s < scratch.offsets.size(); ++s) {
        uint64_t bytes = scratch.offsets.size() > s + 1 ? scratch.offsets[s + 1] - scratch.offsets[s]
                                                        : scratch.bytes - scratch.offsets[s];
        pointers.scratch.push_back(bytes ? b.scratch->at(scratch.offsets[s], bytes) : 0);
      }
      timed(op.op, [&] {
        for (size_t l = 0; l < opSteps.launches.size(); ++l) {
          std::string where = fmt::format("{} op {} ({}) launch {}", name, i, op.op, l);
          BoundLaunch bound = bindLaunch(section, opSteps.launches[l], pointers, batch, where);
          if (bound.gemm) {
            runGemm(*bound.gemm, where);
            checkLaunch(where + " (GEMM)");
          } else if (!bound.empty()) { // no block at this batch: nothing to do
            kernels->launch(bound.kernel->name, bound.args, where,
                            bound.grid ? &*bound.grid : nullptr, stream);
            checkLaunch(where + " (kernel " + bound.kernel->name + ")");
          }
        }
      });
    }
  }

  /// One GEMM of the step program in the package's precision; a bias
  /// epilogue as one cuBLASLt matmul where it can run, else the GEMM then
  /// pe_add_bias (the loader checked the package has it).
  void runGemm(const BoundGemm &g, const std::string &where) {
    if (g.bias) {
      if (gemm->runWithBias(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.b, g.bias, g.c,
                            where, gemmPrecision))
        return;
      gemm->run(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.b, 0.0f, g.c, where,
                gemmPrecision);
      if (g.m > 0 && g.n > 0)
        kernels->launch("pe_add_bias",
                        {KernelArg::pointer(g.c), KernelArg::pointer(g.bias),
                         KernelArg::integer(g.m * g.n), KernelArg::integer(g.n)},
                        where + " (bias)", nullptr, stream);
      return;
    }
    gemm->runStridedBatched(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.strideA, g.b,
                            g.strideB, g.beta, g.c, g.strideC, g.count, where, gemmPrecision);
  }

  /// Calls f(slot, address) for each gradient output of @gradients in `b`:
  /// its parameter's slot and the output's device address.
  template <typename F> void forEachGradientOutput(const BatchBuffers &b, F &&f) const {
    const Program &p = program("gradients");
    for (const ProgramOutput &out : p.outputs) {
      if (!out.isGrad())
        continue;
      auto slot = std::find_if(slots.begin(), slots.end(),
                               [&](const OptimizerSlot &s) { return s.name == out.grad; });
      if (slot == slots.end())
        throw Error(fmt::format("gradients output for unknown parameter '{}'", out.grad));
      if (b.placement.values[out.value].bytes != uint64_t(slot->size) * 4)
        throw Error(fmt::format("the gradient of '{}' has the wrong size", out.grad));
      f(*slot, address(b, out.value));
    }
  }

  /// After @gradients: each gradient output into its slot of `grads`.
  void collectGradients(const BatchBuffers &b) {
    forEachGradientOutput(b, [&](const OptimizerSlot &slot, uint64_t from) {
      const uint64_t bytes = uint64_t(slot.size) * 4;
      copyOnDevice(grads->at(slot.offset * 4, bytes), from, bytes, "collecting the gradients");
    });
  }

  void copyOnDevice(uint64_t to, uint64_t from, uint64_t bytes, const std::string &what) {
    driver::check(driver::require().memcpyDtoDAsync(CUdeviceptr(to), CUdeviceptr(from), bytes,
                                                    stream),
                  what, "cuMemcpyDtoDAsync");
  }

  void zeroOnDevice(uint64_t at, uint64_t floats, const std::string &what) {
    driver::check(driver::require().memsetD32Async(CUdeviceptr(at), 0, floats, stream), what,
                  "cuMemsetD32Async");
  }

  void copyBack(float *host, uint64_t device, size_t bytes, const char *what) {
    driver::check(driver::require().memcpyDtoHAsync(host, CUdeviceptr(device), bytes, stream),
                  what, "cuMemcpyDtoHAsync");
  }

  void sync(const std::string &what) {
    driver::check(driver::require().streamSynchronize(stream), what, "cuStreamSynchronize");
  }

  /// DeviceOptions::syncEachLaunch: waits for the launch just queued, so
  /// that its failure names it.
  void checkLaunch(const std::string &launch) {
    if (options.syncEachLaunch)
      sync(launch);
  }

  /// The device address of @gradients' loss (its first output).
  uint64_t lossAddress(const BatchBuffers &b) const {
    return address(b, program("gradients").outputs.at(0).value);
  }

  /// Queues the write of `stepKey` into the step key buffer (nothing when
  /// the package reads none), for a step of `batch` samples: four one-word
  /// memsets on the stream, before the step's work and outside its graph,
  /// so that a replayed step reads its own key. Throws Error, naming `where`,
  /// for a key outside the masks' domain (dropoutDomainError).
  void writeStepKey(int64_t batch, const std::string &where) {
    if (stepKeyAddress != 0)
      writeKeyWords(stepKeyAddress, stepKey, batch, where);
  }

  /// writeStepKey's memsets of `key` at `address`.
  void writeKeyWords(uint64_t address, const StepKey &key, int64_t batch,
                     const std::string &where) {
    if (std::string why = dropoutDomainError(0.0, 0, key, batch, 0); !why.empty())
      throw Error(fmt::format("{}: the dropout masks' key: {}", where, why));
    const uint32_t words[kStepKeyWords] = {uint32_t(key.seed), uint32_t(key.seed >> 32),
                                           uint32_t(key.step), uint32_t(key.firstSample)};
    for (int w = 0; w < kStepKeyWords; ++w)
      driver::check(driver::require().memsetD32Async(CUdeviceptr(address + 4 * w), words[w], 1,
                                                     stream),
                    where + " (writing the step key)", "cuMemsetD32Async");
  }

  /// Runs @gradients on the staged batch: the gradients into `grads`, the
  /// loss into hostReturn[0].
  void runGradients() {
    int64_t batch = stagedBatch();
    BatchBuffers &b = buffersFor("gradients", batch);
    writeStepKey(batch, "the gradients program");
    consumeStaged(b, "gradients");
    walk("gradients", b, batch);
    collectGradients(b);
    copyBack(hostReturn->data(), lossAddress(b), 4, "copying the loss back");
  }

  /// The number of gradient-norm partials pe_sumsq_partials writes.
  int64_t partialBlocks() const {
    if (total == 0)
      return 0;
    std::vector<KernelArg> args = {KernelArg::pointer(1), KernelArg::pointer(1),
                                   KernelArg::integer(total)};
    return int64_t(launchShapeFor(*section.find("pe_sumsq_partials"), args).grid[0]);
  }

  /// Queues a whole training step, nothing of it passing through the host:
  /// @gradients, the gradient copies, the norm's partials, the step's scalars
  /// (pe_optimizer_scalars: clipping factor, learning rate, bias
  /// corrections, into the control block) and the optimizer, which reads
  /// them there.
  void enqueueTrainStep(BatchBuffers &b, int64_t batch) {
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
  AccumulatedStep &accumulatedFor(int64_t rows, int64_t parts) {
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
  /// loss and gradients added, weighted by size / rows, into the step's loss
  /// and the flat gradient buffer (cuBLAS axpy); then the optimizer, as in
  /// enqueueTrainStep.
  void enqueueAccumulatedStep(const AccumulatedStep &s, int64_t rows) {
    inTrainingStep = true;
    const Program &p = program("gradients");
    timed("gradient accumulation", [&] {
      if (total > 0)
        zeroOnDevice(grads->at(0, size_t(total) * 4), uint64_t(total), "zeroing the gradients");
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
      walk("gradients", b, size);
      const float weight = static_cast<float>(size) / static_cast<float>(rows);
      timed("gradient accumulation", [&] {
        forEachGradientOutput(b, [&](const OptimizerSlot &slot, uint64_t from) {
          gemm->axpy(int64_t(slot.size), weight, from,
                     grads->at(slot.offset * 4, uint64_t(slot.size) * 4),
                     "accumulating the gradients");
        });
        gemm->axpy(1, weight, lossAddress(b), s.loss->at(0, 4), "accumulating the loss");
      });
    }
    timed("optimizer", [&] { enqueueOptimizer(s.loss->at(0, 4)); });
    inTrainingStep = false;
  }

  /// The gradient norm's partials, the step's scalars (from the step's loss
  /// at device address `loss`) and the update.
  void enqueueOptimizer(uint64_t loss) {
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
  bool capture(ReplayedWork &work, const std::function<void()> &enqueue, const char *what) {
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
  void runMaybeGraphed(ReplayedWork &work, const std::function<void()> &enqueue,
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
  std::vector<Arena *> stateArenas() const {
    std::vector<Arena *> arenas = {moment1.get()};
    if (adamw())
      arenas.push_back(moment2.get());
    if (keepsEma())
      arenas.push_back(ema.get());
    return arenas;
  }

  /// Calls `f(begin, n)` for each maximal run of trainable slots (floats of
  /// the device layout); frozen slots are never touched.
  template <typename F> void forTrainableRuns(F &&f) const {
    for (size_t s = 0; s < slots.size();) {
      if (slots[s].frozen) {
        ++s;
        continue;
      }
      size_t begin = slots[s].offset, end = begin;
      for (; s < slots.size() && !slots[s].frozen; ++s)
        end = slots[s].offset + slots[s].size;
      if (end > begin)
        f(begin, end - begin);
    }
  }

  /// Queues the optimizer's kernel (and pe_ema after it, with an EMA) once
  /// per maximal run of trainable slots; the step's scalars come from the
  /// control block.
  void launchOptimizer() {
    const ManifestOptimizer &config = manifest.optimizer;
    const KernelArg controlArg = KernelArg::pointer(control->address());
    forTrainableRuns([&](size_t begin, size_t n) {
      auto slice = [&](const Arena &a) { return KernelArg::pointer(a.at(begin * 4, n * 4)); };
      if (adamw())
        kernels->launch("pe_adamw",
                        {slice(*params), slice(*moment1), slice(*moment2), slice(*grads),
                         KernelArg::integer(int64_t(n)), controlArg,
                         KernelArg::real(float(config.beta1)),
                         KernelArg::real(float(config.beta2)), KernelArg::real(float(config.eps)),
                         KernelArg::real(float(config.weightDecay))},
                        "AdamW", nullptr, stream);
      else
        kernels->launch("pe_sgd",
                        {slice(*params), slice(*moment1), slice(*grads),
                         KernelArg::integer(int64_t(n)), controlArg,
                         KernelArg::real(float(config.momentum)),
                         KernelArg::real(float(config.weightDecay))},
                        "SGD", nullptr, stream);
      if (keepsEma())
        kernels->launch("pe_ema",
                        {slice(*ema), slice(*params), KernelArg::integer(int64_t(n)), controlArg},
                        "the EMA of the weights", nullptr, stream);
    });
  }

  /// Queues copies of every trainable slot of `from` into `to` (device
  /// layout; the padding between slots is left alone).
  void copyTrainableSlots(const Arena &to, const Arena &from, const char *what) {
    for (const OptimizerSlot &slot : slots) {
      if (slot.frozen || slot.size == 0)
        continue;
      const size_t at = slot.offset * 4, bytes = slot.size * 4;
      driver::check(driver::require().memcpyDtoDAsync(CUdeviceptr(to.at(at, bytes)),
                                                      CUdeviceptr(from.at(at, bytes)), bytes,
                                                      stream),
                    what, "cuMemcpyDtoDAsync");
    }
  }
};

void DeviceModel::checkAccumulation(const Manifest &manifest) {
  for (const ManifestInput &in : manifest.inputs) {
    const bool batchFirst =
        !in.shape.empty() && in.shape[0] < 0 &&
        std::all_of(in.shape.begin() + 1, in.shape.end(), [](int64_t d) { return d >= 0; });
    if (!batchFirst)
      throw Error(fmt::format("gradient accumulation splits the batch along the inputs' first "
                              "dimension, but input '{}' does not have its batch there alone",
                              in.name));
  }
}

void DeviceModel::checkPackage(const Manifest &manifest, const CudaSection &section) {
  std::vector<std::string> missing;
  for (const char *name : {"forward", "gradients"})
    for (const std::string &op : uncoveredOps(section, manifest.program(name), name))
      missing.push_back(fmt::format("{} ({})", op, name));
  if (!missing.empty())
    throw Error("the package cannot run on the GPU: these ops have no GPU steps: " +
                joined(missing));
  // Every launch binds and every GEMM fits its buffers (checked at batch 1
  // before the device is touched; the walk binds again at each batch).
  for (const char *name : {"forward", "gradients"})
    checkProgramSteps(manifest, section, name, 1);
  // The optimizer's kernels, with the parameters this runtime passes (a
  // package from an older stringc passed the step's scalars as values).
  const bool adamw = manifest.optimizer.kind == OptimizerKind::AdamW;
  using K = CudaParamKind;
  const K P = K::Ptr, I = K::I64, F = K::F32;
  std::vector<std::pair<const char *, std::vector<K>>> expected = {
      adamw ? std::pair<const char *, std::vector<K>>{"pe_adamw", {P, P, P, P, I, P, F, F, F, F}}
            : std::pair<const char *, std::vector<K>>{"pe_sgd", {P, P, P, I, P, F, F}},
      {"pe_sumsq_partials", {P, P, I}},
      {"pe_optimizer_scalars", {P, P, I, P}}};
  if (manifest.optimizer.emaDecay > 0)
    expected.push_back({"pe_ema", {P, P, I, P}});
  for (const auto &[kernel, params] : expected) {
    const CudaKernel *found = section.find(kernel);
    if (!found || found->params != params)
      throw Error(fmt::format("the package {} kernel {} (the {} optimizer on the device); "
                              "compile it again with this stringc --target=cuda",
                              found ? "has an older" : "has no", kernel,
                              adamw ? "adamw" : "sgd"));
  }
}

DeviceModel::DeviceModel(const Manifest &manifest, const CudaSection &section,
                         const std::vector<float> &parameters, DeviceOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl &m = *impl_;
  m.manifest = manifest;
  m.section = section;
  m.options = options;
  if (const char *sync = std::getenv("STRINGRT_CUDA_SYNC_LAUNCHES"); sync && std::string(sync) == "1")
    m.options.syncEachLaunch = true;
  if (m.options.syncEachLaunch || m.options.profile)
    m.options.graphs = false; // a wait cannot be captured; a graph's events time the graph
  checkPackage(manifest, section);
  DeviceParamLayout layout = deviceParameterLayout(manifest);
  for (size_t i = 0; i < manifest.params.size(); ++i) {
    const ManifestParam &p = manifest.params[i];
    OptimizerSlot slot;
    slot.name = p.name;
    slot.shape = p.shape;
    slot.offset = size_t(layout.offsets[i]);
    slot.size = 1;
    for (int64_t d : p.shape)
      slot.size *= size_t(d);
    slot.frozen = p.frozen;
    m.hostTotal += int64_t(slot.size);
    m.slots.push_back(slot);
  }
  m.total = layout.total;
  if (int64_t(parameters.size()) != m.hostTotal)
    throw Error(fmt::format("device executor: {} parameters given, the manifest has {}",
                            parameters.size(), m.hostTotal));

  m.device = Device::open(options.device);
  m.kernels = std::make_unique<KernelSet>(m.device, m.section);
  m.gemm = std::make_unique<Gemm>(m.device);
  driver::check(driver::require().streamCreate(&m.stream, CU_STREAM_NON_BLOCKING),
                "creating the executor's stream", "cuStreamCreate");
  m.gemm->setStream(m.stream);
  // A bf16 package (stringc --gpu-precision=bf16) runs its GEMMs on the
  // tensor cores in bf16 too; --tf32 asks for TF32 in an fp32 package.
  m.gemmPrecision = m.section.precision == "bf16" ? GemmPrecision::Bf16
                    : options.tf32                ? GemmPrecision::Tf32
                                                  : GemmPrecision::Fp32;
  size_t bytes = size_t(std::max<int64_t>(m.total, 1)) * 4;
  m.params = std::make_unique<Arena>(m.device, bytes);
  m.grads = std::make_unique<Arena>(m.device, bytes);
  m.moment1 = std::make_unique<Arena>(m.device, bytes);
  if (m.adamw())
    m.moment2 = std::make_unique<Arena>(m.device, bytes);
  if (m.keepsEma())
    m.ema = std::make_unique<Arena>(m.device, bytes);
  m.partials = std::make_unique<Arena>(m.device, size_t(kMaxPartials) * 4);
  m.workspace = std::make_unique<Arena>(m.device, kGemmWorkspace);
  m.gemm->setWorkspace(m.workspace->at(0, kGemmWorkspace), kGemmWorkspace);
  m.hostReturn = std::make_unique<PinnedArray<float>>(1);
  m.control = std::make_unique<StepControl>(m.device, manifest.optimizer);
  if (m.total > 0)
    m.uploadFlat(*m.params, parameters.data(), "uploading the parameters");
  ConstantLayout constants = constantLayout(m.section);
  m.constants = std::make_unique<Arena>(
      m.device, size_t(std::max<uint64_t>(constants.bytes, kDeviceAlignment)));
  for (size_t c = 0; c < m.section.constants.size(); ++c) {
    const CudaConstant &constant = m.section.constants[c];
    size_t bytes = constant.size() * 4;
    m.constants->upload(constants.offsets[c], constant.data(), bytes, "uploading the constants");
    m.constantAddresses.push_back(m.constants->at(constants.offsets[c], bytes));
  }
  if (m.section.usesStepKey()) {
    m.stepKeyBuffer = std::make_unique<Arena>(m.device, size_t(kDeviceAlignment));
    m.stepKeyAddress = m.stepKeyBuffer->at(0, kStepKeyWords * 4);
  }
  m.staging = std::make_unique<BatchStaging>(m.device, m.stream, options.overlapUpload);
  m.evalStaging = std::make_unique<BatchStaging>(m.device, m.stream, options.overlapUpload);
  std::vector<Arena *> zeroed = m.stateArenas();
  zeroed.push_back(m.grads.get());
  for (Arena *arena : zeroed)
    driver::check(driver::require().memsetD32Async(CUdeviceptr(arena->at(0, arena->size())), 0,
                                                   arena->size() / 4, m.stream),
                  "zeroing the optimizer state", "cuMemsetD32Async");
  m.sync("initialising the device model");
}

DeviceModel::~DeviceModel() = default;

const std::string &DeviceModel::deviceName() const { return impl_->device->name(); }
const char *DeviceModel::gemmPrecision() const { return gemmPrecisionName(impl_->gemmPrecision); }
int64_t DeviceModel::stepCount() const { return impl_->steps; }
const DeviceOptions &DeviceModel::options() const { return impl_->options; }

void DeviceModel::stage(const std::map<std::string, HostTensor> &inputs) {
  impl_->stage(inputs);
}

bool DeviceModel::hasStagedBatch() const { return impl_->staging->pending(); }

void DeviceModel::setStepKey(const StepKey &key) { impl_->stepKey = key; }
const StepKey &DeviceModel::stepKey() const { return impl_->stepKey; }

void DeviceModel::queueStep(int64_t totalSteps, int64_t accumulate) {
  Impl &m = *impl_;
  m.control->requireRoom(); // before the staged batch is consumed
  const int64_t batch = m.stagedBatch();
  if (accumulate < 1 || accumulate > batch)
    throw Error(fmt::format("device executor: cannot split a batch of {} into {} micro-batches",
                            batch, accumulate));
  if (totalSteps != m.control->totalSteps()) { // a new run length: the schedule's horizon
    m.sync("changing the run's length");
    m.control->reset(m.control->downloadStepsTaken(), totalSteps);
  }
  if (accumulate > 1) {
    AccumulatedStep &s = m.accumulatedFor(batch, accumulate);
    const std::string where = fmt::format("training step {}", ++m.stepsQueued);
    // Each micro-batch's key, outside the step's graph: the rows [begin,
    // begin + size) draw the masks those rows of the whole batch would.
    if (m.stepKeyAddress != 0)
      for (size_t part = 0; part < s.sizes.size(); ++part) {
        StepKey key = m.stepKey;
        key.firstSample += s.begins[part];
        const uint64_t keyBytes = kStepKeyWords * 4;
        m.writeKeyWords(s.keys->at(part * keyBytes, keyBytes), key, s.sizes[part], where);
      }
    std::vector<uint64_t> destinations, bytes;
    for (size_t i = 0; i < s.rowBytes.size(); ++i) {
      bytes.push_back(s.rowBytes[i] * uint64_t(batch));
      destinations.push_back(s.inputs->at(s.inputOffsets[i], bytes.back()));
    }
    m.staging->consume(destinations, bytes);
    m.runMaybeGraphed(s.work, [&] { m.enqueueAccumulatedStep(s, batch); }, "training step",
                      where);
  } else {
    const std::string where = fmt::format("training step {}", ++m.stepsQueued);
    BatchBuffers &b = m.buffersFor("gradients", batch);
    m.writeStepKey(batch, where);
    m.consumeStaged(b, "gradients");
    m.runMaybeGraphed(b.work, [&] { m.enqueueTrainStep(b, batch); }, "training step", where);
  }
  m.control->enqueueReadback(m.stream);
}

size_t DeviceModel::stepsInFlight() const { return impl_->control->pending(); }

StepOutcome DeviceModel::collectStep() {
  Impl &m = *impl_;
  StepOutcome outcome = m.control->collect(
      fmt::format("training step {}", m.stepsQueued - int64_t(m.control->pending()) + 1));
  m.steps = outcome.stepsTaken;
  m.collectProfile();
  return outcome;
}

OptimizerStepInfo DeviceModel::trainStaged(int64_t totalSteps, float &loss,
                                           const std::function<void()> &whileComputing) {
  if (stepsInFlight() > 0)
    throw Error("device executor: trainStaged with training steps queued and not collected");
  queueStep(totalSteps);
  if (whileComputing)
    whileComputing();
  StepOutcome outcome = collectStep();
  loss = outcome.loss;
  return outcome.info;
}

float DeviceModel::trainStep(const std::map<std::string, HostTensor> &inputs,
                             int64_t totalSteps) {
  stage(inputs);
  float loss = 0;
  trainStaged(totalSteps, loss);
  return loss;
}

void DeviceModel::gradients(const std::map<std::string, HostTensor> &inputs, float &loss,
                            std::vector<float> &flatGrads) {
  Impl &m = *impl_;
  m.stage(inputs);
  m.runGradients();
  std::vector<float> padded(static_cast<size_t>(m.total));
  if (m.total > 0)
    m.copyBack(padded.data(), m.grads->at(0, size_t(m.total) * 4), size_t(m.total) * 4,
               "copying the gradients back");
  m.sync("the gradients program");
  flatGrads.assign(size_t(m.hostTotal), 0.0f);
  m.toHostLayout(padded, flatGrads.data());
  loss = m.hostReturn->data()[0];
}

std::map<std::string, std::vector<float>>
DeviceModel::forward(const std::map<std::string, HostTensor> &inputs) {
  Impl &m = *impl_;
  m.stage(inputs, m.evalStaging.get()); // a staged training batch stays staged
  int64_t batch = m.stagedBatch(m.evalStaging.get());
  BatchBuffers &b = m.buffersFor("forward", batch);
  m.consumeStaged(b, "forward", m.evalStaging.get());
  m.walk("forward", b, batch);
  const Program &p = m.program("forward");
  std::map<std::string, std::vector<float>> outputs;
  for (const ProgramOutput &out : p.outputs) {
    if (out.isGrad() || p.values[out.value].dtype != DType::F32)
      continue;
    std::vector<float> &values = outputs[out.name];
    values.resize(b.placement.values[out.value].bytes / 4);
    if (!values.empty())
      m.copyBack(values.data(), m.address(b, out.value), values.size() * 4,
                 "copying the forward outputs back");
  }
  m.sync("the forward program");
  return outputs;
}

namespace {

/// Checks that `optimizer` holds the state of the device model's optimizer.
void checkOptimizer(const Optimizer &optimizer, bool adamw, bool ema, int64_t total) {
  if (optimizer.isAdamW() != adamw)
    throw Error(fmt::format("device executor: the package trains with {}, the optimizer state "
                            "given is {}'s",
                            adamw ? "adamw" : "sgd", optimizer.isAdamW() ? "adamw" : "sgd"));
  if (int64_t(optimizer.totalSize()) != total)
    throw Error(fmt::format("device executor: the optimizer state covers {} parameters, the "
                            "manifest has {}",
                            optimizer.totalSize(), total));
  if (optimizer.hasEma() != ema)
    throw Error(fmt::format("device executor: the package {} an EMA of the weights, the "
                            "optimizer state given {}",
                            ema ? "keeps" : "keeps no", optimizer.hasEma() ? "has one" : "none"));
}

} // namespace

void DeviceModel::setState(const std::vector<float> &params, const Optimizer &optimizer) {
  Impl &m = *impl_;
  checkOptimizer(optimizer, m.adamw(), m.keepsEma(), m.hostTotal);
  if (int64_t(params.size()) != m.hostTotal)
    throw Error(fmt::format("device executor: {} parameters given, the manifest has {}",
                            params.size(), m.hostTotal));
  m.sync("setting the parameters and optimizer state"); // nothing in flight reads them
  m.control->discardPending(); // results of steps of an abandoned run (the trainer stopped)
  if (m.total > 0) {
    m.uploadFlat(*m.params, params.data(), "uploading the parameters");
    std::vector<Arena *> arenas = m.stateArenas();
    auto buffers = optimizer.stateBuffers();
    for (size_t i = 0; i < arenas.size(); ++i)
      m.uploadFlat(*arenas[i], buffers[i].values->data(), "uploading the optimizer state");
  }
  m.steps = m.stepsQueued = optimizer.stepCount();
  m.control->reset(m.steps, m.control->totalSteps()); // and no longer halted
}

void DeviceModel::getState(std::vector<float> &params, Optimizer &optimizer) const {
  Impl &m = *impl_;
  checkOptimizer(optimizer, m.adamw(), m.keepsEma(), m.hostTotal);
  m.sync("reading the parameters and optimizer state");
  params.resize(size_t(m.hostTotal));
  std::vector<Arena *> arenas = m.stateArenas();
  auto buffers = optimizer.stateBuffers();
  if (m.total > 0) {
    m.downloadFlat(*m.params, params.data(), "reading the parameters");
    for (size_t i = 0; i < arenas.size(); ++i)
      m.downloadFlat(*arenas[i], buffers[i].values->data(), "reading the optimizer state");
  }
  optimizer.setStepCount(m.control->downloadStepsTaken()); // steps not yet collected too
}

namespace {

/// The output of @forward named `name`, or nullptr.
const ProgramOutput *outputNamed(const Program &p, const char *name) {
  for (const ProgramOutput &out : p.outputs)
    if (!out.isGrad() && out.name == name)
      return &out;
  return nullptr;
}

constexpr size_t kEvalResultBytes = size_t(64) << 20; // page-locked losses + logits per wait

} // namespace

EvalResult DeviceModel::evaluate(const DataSet &data, int64_t batch) {
  Impl &m = *impl_;
  const auto start = std::chrono::steady_clock::now();
  if (batch < 1)
    throw Error(fmt::format("evaluation batch must be >= 1, got {}", batch));
  const int64_t count = data.count(Split::Test);
  if (count == 0)
    throw Error("evaluation: the test split is empty");
  const Program &p = m.program("forward");
  const ProgramOutput *loss = outputNamed(p, "loss");
  if (!loss || p.values[loss->value].dtype != DType::F32 ||
      ref::shapeNumel(p.values[loss->value].shape) != 1)
    throw Error("evaluation: the forward program has no scalar \"loss\" output");
  // Accuracy as stringrt::evaluate() has it: argmax of [rows, classes] logits.
  const ProgramOutput *logits = outputNamed(p, "logits");
  int64_t classes = 0;
  if (!data.isText() && logits && p.values[logits->value].dtype == DType::F32 &&
      p.values[logits->value].shape.size() == 2 && p.values[logits->value].shape[1] > 0)
    classes = p.values[logits->value].shape[1];
  if (m.manifest.inputs.size() < 2 && classes > 0)
    throw Error("evaluation: accuracy needs the labels as the second input");

  const int64_t batches = (count + batch - 1) / batch;
  const int64_t perBatch = 1 + batch * classes; // floats: the loss, then the logits
  const int64_t chunk =
      std::max<int64_t>(1, int64_t(kEvalResultBytes / 4) / perBatch); // batches per wait
  PinnedArray<float> results(size_t(std::min(chunk, batches) * perBatch));
  auto inputsOf = [&](const Batch &hb) {
    std::map<std::string, HostTensor> inputs;
    for (size_t i = 0; i < m.manifest.inputs.size() && i < hb.tensors.size(); ++i) {
      const BatchTensor &t = hb.tensors[i];
      inputs[m.manifest.inputs[i].name] = t.dtype == DType::F32
                                              ? HostTensor(t.f32.data(), t.shape)
                                              : HostTensor(t.i32.data(), t.shape);
    }
    return inputs;
  };
  auto rangeOf = [&](int64_t i) {
    return data.range(Split::Test, i * batch, std::min(count, (i + 1) * batch));
  };

  double lossSum = 0;
  int64_t correct = 0;
  for (int64_t first = 0; first < batches; first += chunk) {
    const int64_t last = std::min(batches, first + chunk);
    std::vector<int64_t> rows;
    std::vector<std::vector<int32_t>> labels;
    Batch current = rangeOf(first);
    m.stage(inputsOf(current), m.evalStaging.get());
    for (int64_t i = first; i < last; ++i) {
      const int64_t n = current.size;
      rows.push_back(n);
      if (classes > 0)
        labels.push_back(current.tensors[1].i32);
      const std::string where = fmt::format("evaluation batch {}", i + 1);
      BatchBuffers &b = m.buffersFor("forward", n);
      m.consumeStaged(b, "forward", m.evalStaging.get());
      m.runMaybeGraphed(b.work, [&] { m.walk("forward", b, n); }, "evaluation batch", where);
      float *slot = results.data() + (i - first) * perBatch;
      m.copyBack(slot, m.address(b, loss->value), 4, "copying the evaluation loss back");
      if (classes > 0) {
        const uint64_t bytes = uint64_t(n * classes) * 4;
        if (b.placement.values[logits->value].bytes != bytes)
          throw Error("evaluation: the logits have the wrong size");
        m.copyBack(slot + 1, m.address(b, logits->value), bytes,
                   "copying the evaluation logits back");
      }
      if (i + 1 < last) { // prepared and uploaded while batch i computes
        current = rangeOf(i + 1);
        m.stage(inputsOf(current), m.evalStaging.get());
      }
    }
    m.sync("evaluation");
    for (int64_t i = first; i < last; ++i) {
      const float *slot = results.data() + (i - first) * perBatch;
      const int64_t n = rows[size_t(i - first)];
      lossSum += double(slot[0]) * double(n);
      if (classes > 0)
        correct += countCorrect(slot + 1, labels[size_t(i - first)].data(), n, classes);
    }
  }
  EvalResult result;
  result.examples = count;
  result.loss = lossSum / double(count);
  if (classes > 0)
    result.accuracy = double(correct) / double(count);
  if (data.isText())
    result.perplexity = std::exp(result.loss);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

EvalResult DeviceModel::evaluateEma(const DataSet &data, int64_t batch) {
  Impl &m = *impl_;
  if (!m.keepsEma())
    throw Error("device executor: the package keeps no EMA of the weights (optimizer ema = ...)");
  if (stepsInFlight() > 0)
    throw Error("device executor: evaluateEma with training steps queued and not collected");
  // Before the first step the EMA is the weights (Optimizer::emaParameters).
  if (m.control->downloadStepsTaken() == 0) {
    EvalResult result = evaluate(data, batch);
    result.ema = true;
    return result;
  }
  // The EMA in place of the trainable weights, which wait in the gradient
  // buffer's slots (the next step's gradients overwrite them there) and
  // come back after: stream-ordered copies, the evaluation's graphs unchanged.
  m.copyTrainableSlots(*m.grads, *m.params, "keeping the weights aside");
  m.copyTrainableSlots(*m.params, *m.ema, "putting the EMA in place of the weights");
  EvalResult result;
  try {
    result = evaluate(data, batch);
  } catch (...) {
    m.copyTrainableSlots(*m.params, *m.grads, "putting the weights back");
    throw;
  }
  m.copyTrainableSlots(*m.params, *m.grads, "putting the weights back");
  result.ema = true;
  return result;
}

std::vector<float> DeviceModel::parameters() const {
  Impl &m = *impl_;
  std::vector<float> values(size_t(m.hostTotal));
  m.sync("reading the parameters");
  if (m.total > 0)
    m.downloadFlat(*m.params, values.data(), "reading the parameters");
  return values;
}

} // namespace stringrt::cuda
