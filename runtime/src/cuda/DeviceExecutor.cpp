// The device executor (DeviceExecutor.h): construction (the package's checks,
// the device's buffers), the public API and evaluation. DeviceModelImpl.h
// lists the files with the rest; the binding of a launch to pointers and
// sizes is StepBinding.cpp (pure, unit tested without a GPU).
#include "DeviceModelImpl.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>

namespace stringrt::cuda {

namespace {

constexpr size_t kGemmWorkspace = size_t(32) << 20; // cuBLAS workspace (graph capture)

std::string joined(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

} // namespace

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

namespace {

// ZeRO-1 (zeroStage 1): the gradients and the optimizer state are allocated
// when the ranks join (shardState); nothing may read them before.
void requireJoined(const DeviceOptions &options, bool sharded, const char *what) {
  if (options.zeroStage == 1 && !sharded)
    throw Error(fmt::format("device executor: {} with ZeRO-1 (zeroStage 1) before joinRanks, "
                            "which allocates this rank's slices",
                            what));
}

} // namespace

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
  // ZeRO-1 (zeroStage 1): joinRanks (shardState) allocates the gradients,
  // the moments of this rank's slice and, with sharded masters, the EMA's:
  // whole ones here would make the start-up's peak the replicated one.
  const bool sharded = options.zeroStage == 1;
  if (!sharded) {
    m.grads = std::make_unique<Arena>(m.device, bytes);
    m.moment1 = std::make_unique<Arena>(m.device, bytes);
    if (m.adamw())
      m.moment2 = std::make_unique<Arena>(m.device, bytes);
  }
  if (m.keepsEma() && !(sharded && usesBf16Params(m.manifest, m.section)))
    m.ema = std::make_unique<Arena>(m.device, bytes);
  m.partials = std::make_unique<Arena>(m.device, size_t(kMaxPartials) * 4);
  m.workspace = std::make_unique<Arena>(m.device, kGemmWorkspace);
  m.gemm->setWorkspace(m.workspace->at(0, kGemmWorkspace), kGemmWorkspace);
  m.hostReturn = std::make_unique<PinnedArray<float>>(1);
  m.control = std::make_unique<StepControl>(m.device, manifest.optimizer);
  if (usesBf16Params(m.manifest, m.section)) {
    if (!m.kernels->has(kBf16ParamsKernel))
      throw Error(fmt::format("the package reads a bf16 copy of the parameters but has no {} "
                              "kernel: compile it again with this stringc",
                              kBf16ParamsKernel));
    m.paramsBf16 = std::make_unique<Arena>(m.device, bytes / 2);
  }
  if (m.total > 0) {
    m.uploadFlat(*m.params, parameters.data(), "uploading the parameters");
    m.refreshBf16Params("uploading the parameters");
  }
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
  if (int64_t words = m.section.ticketWords(); words > 0) {
    uint64_t bytes = uint64_t(words) * 4;
    m.ticketBuffer = std::make_unique<Arena>(
        m.device, size_t(std::max<uint64_t>(bytes, kDeviceAlignment)));
    m.ticketsAddress = m.ticketBuffer->at(0, bytes);
    driver::check(driver::require().memsetD32Async(CUdeviceptr(m.ticketsAddress), 0,
                                                   size_t(words), m.stream),
                  "zeroing the ticket counters", "cuMemsetD32Async");
  }
  m.staging = std::make_unique<BatchStaging>(m.device, m.stream, options.overlapUpload);
  m.evalStaging = std::make_unique<BatchStaging>(m.device, m.stream, options.overlapUpload);
  std::vector<Arena *> zeroed = m.stateArenas();
  zeroed.push_back(m.grads.get());
  for (Arena *arena : zeroed)
    if (arena) // (ZeRO-1's come with joinRanks)
      driver::check(driver::require().memsetD32Async(CUdeviceptr(arena->at(0, arena->size())),
                                                     0, arena->size() / 4, m.stream),
                    "zeroing the optimizer state", "cuMemsetD32Async");
  m.sync("initialising the device model");
}

DeviceModel::~DeviceModel() {
  // Unwinding from an error with other ranks still in a step: the queued
  // all-reduces must not wait for them while the stream is destroyed.
  if (impl_ && impl_->ranks && std::uncaught_exceptions() > 0)
    impl_->ranks->abort();
}

const std::string &DeviceModel::deviceName() const { return impl_->device->name(); }
std::vector<std::string> DeviceModel::gemmAlgorithms() const {
  return impl_->gemm->chosenAlgorithms();
}

const char *DeviceModel::gemmPrecision() const { return gemmPrecisionName(impl_->gemmPrecision); }
int64_t DeviceModel::stepCount() const { return impl_->steps; }
const DeviceOptions &DeviceModel::options() const { return impl_->options; }

void DeviceModel::stage(const std::map<std::string, HostTensor> &inputs) {
  impl_->stage(inputs);
}

bool DeviceModel::augmentOnDevice(const AugmentPolicy &policy, uint64_t seed) {
  Impl &m = *impl_;
  checkAugmentPolicy(policy);
  if (!m.canAugmentImages())
    return false;
  m.deviceAugment = policy;
  m.augmentSeed = seed;
  return true;
}

void DeviceModel::stageTraining(const std::map<std::string, HostTensor> &inputs, int64_t step) {
  Impl &m = *impl_;
  if (!m.deviceAugment || !m.deviceAugment->enabled()) {
    m.stage(inputs);
    return;
  }
  // The draws of the step's samples (microseconds: tests/bench/host_batch.py);
  // the pixels move on the device as the batch enters the step.
  const int64_t B = m.batchOf(inputs); // every input checked against the manifest
  const HostTensor &images = inputs.at(m.manifest.inputs.front().name); // f32 [B, C, H, W]
  m.imageDraws.resize(size_t(B * kAugmentDrawWords));
  drawAugmentation(*m.deviceAugment, m.augmentSeed, step, B, images.shape[2], images.shape[3],
                   m.imageDraws.data());
  const HostTensor draws(m.imageDraws.data(), {B, kAugmentDrawWords});
  m.stage(inputs, nullptr, &draws);
}

bool DeviceModel::hasStagedBatch() const { return impl_->staging->pending(); }

void DeviceModel::setStepKey(const StepKey &key) { impl_->stepKey = key; }
const StepKey &DeviceModel::stepKey() const { return impl_->stepKey; }

void DeviceModel::queueStep(int64_t totalSteps, int64_t accumulate) {
  Impl &m = *impl_;
  requireJoined(m.options, m.zero, "a training step");
  m.control->requireRoom(); // before the staged batch is consumed
  const int64_t batch = m.stagedBatch();
  if (accumulate < 1 || accumulate > batch)
    throw Error(fmt::format("device executor: cannot split a batch of {} into {} micro-batches",
                            batch, accumulate));
  if (m.ranks && m.globalRows < batch)
    throw Error(fmt::format("device executor: a share of {} rows of a global batch of {} "
                            "(setGlobalBatch)",
                            batch, m.globalRows));
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
    m.staging->consume(destinations, bytes, m.imageAugmenter(batch));
    // A rank's micro-batches are weighted by the global batch (in the graph).
    const int64_t weightRows = m.ranks ? m.globalRows : batch;
    ReplayedWork &work = m.ranks ? s.rankWork[weightRows] : s.work;
    m.runMaybeGraphed(work, [&] { m.enqueueAccumulatedStep(s, weightRows); }, "training step",
                      where);
  } else if (m.ranks) {
    const std::string where = fmt::format("training step {}", ++m.stepsQueued);
    BatchBuffers &b = m.buffersFor("gradients", batch);
    ReplayedWork &work = m.rankSteps[{batch, m.globalRows}];
    const float weight = static_cast<float>(batch) / static_cast<float>(m.globalRows);
    m.writeStepKey(batch, where);
    m.consumeStaged(b, "gradients");
    m.runMaybeGraphed(work, [&] { m.enqueueRankStep(b, batch, weight); }, "training step",
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
  const std::string step =
      fmt::format("training step {}", m.stepsQueued - int64_t(m.control->pending()) + 1);
  if (m.ranks)
    m.awaitRankStep(step);
  StepOutcome outcome = m.control->collect(step);
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
  requireJoined(m.options, m.zero, "the gradients");
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
  requireJoined(m.options, m.zero, "setting the optimizer state");
  checkOptimizer(optimizer, m.adamw(), m.keepsEma(), m.hostTotal);
  if (int64_t(params.size()) != m.hostTotal)
    throw Error(fmt::format("device executor: {} parameters given, the manifest has {}",
                            params.size(), m.hostTotal));
  m.sync("setting the parameters and optimizer state"); // nothing in flight reads them
  m.control->discardPending(); // results of steps of an abandoned run (the trainer stopped)
  if (m.total > 0) {
    if (m.shardMasters) { // this rank's slice, then the copies the kernels read (collective)
      m.uploadShard(*m.masters, params.data(), "uploading the master weights");
      m.publishMasters(false, "uploading the parameters");
    } else {
      m.uploadFlat(*m.params, params.data(), "uploading the parameters");
      m.refreshBf16Params("uploading the parameters");
    }
    std::vector<Arena *> arenas = m.stateArenas();
    auto buffers = optimizer.stateBuffers();
    const size_t sharded = m.zero ? m.shardedArenas().size() : 0; // (the first ones)
    for (size_t i = 0; i < arenas.size(); ++i)
      if (i < sharded) // ZeRO-1: this rank's slice
        m.uploadShard(*arenas[i], buffers[i].values->data(), "uploading the optimizer state");
      else
        m.uploadFlat(*arenas[i], buffers[i].values->data(), "uploading the optimizer state");
  }
  m.steps = m.stepsQueued = optimizer.stepCount();
  m.control->reset(m.steps, m.control->totalSteps()); // and no longer halted
}

void DeviceModel::getState(std::vector<float> &params, Optimizer &optimizer) const {
  Impl &m = *impl_;
  requireJoined(m.options, m.zero, "reading the optimizer state");
  checkOptimizer(optimizer, m.adamw(), m.keepsEma(), m.hostTotal);
  m.sync("reading the parameters and optimizer state");
  params.resize(size_t(m.hostTotal));
  std::vector<Arena *> arenas = m.stateArenas();
  auto buffers = optimizer.stateBuffers();
  if (m.total > 0) {
    if (m.shardMasters) // every rank's slice (collective)
      m.gatherShards(*m.masters, params.data(),
                     "gathering the master weights (ZeRO-1 all-gather)");
    else
      m.downloadFlat(*m.params, params.data(), "reading the parameters");
    const size_t sharded = m.zero ? m.shardedArenas().size() : 0; // (the first ones)
    for (size_t i = 0; i < arenas.size(); ++i)
      if (i < sharded) // ZeRO-1: every rank's slice (collective)
        m.gatherShards(*arenas[i], buffers[i].values->data(),
                       "gathering the optimizer state (ZeRO-1 all-gather)");
      else
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
  // Batch i, in the buffers of `recycled` (a batch already staged).
  auto rangeOf = [&](int64_t i, Batch recycled = {}) {
    return data.range(Split::Test, i * batch, std::min(count, (i + 1) * batch),
                      std::move(recycled));
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
        current = rangeOf(i + 1, std::move(current));
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
  requireJoined(m.options, m.zero, "evaluating the EMA");
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
  if (m.shardMasters)
    return m.evaluateShardedEma([&] { return evaluate(data, batch); });
  // The EMA in place of the trainable weights, which wait in the gradient
  // buffer's slots (the next step's gradients overwrite them there) and
  // come back after: stream-ordered copies, the evaluation's graphs unchanged.
  m.copyTrainableSlots(*m.grads, *m.params, "keeping the weights aside");
  m.copyTrainableSlots(*m.params, *m.ema, "putting the EMA in place of the weights");
  m.refreshBf16Params("putting the EMA in place of the weights");
  EvalResult result;
  try {
    result = evaluate(data, batch);
  } catch (...) {
      m.copyTrainableSlots(*m.params, *m.grads, "putting the weights back");
    m.refreshBf16Params("putting the weights back");
    throw;
  }
  m.copyTrainableSlots(*m.params, *m.grads, "putting the weights back");
  m.refreshBf16Params("putting the weights back");
  result.ema = true;
  return result;
}

size_t DeviceModel::optimizerStateBytes() const {
  requireJoined(impl_->options, impl_->zero, "the optimizer state's bytes");
  size_t bytes = 0;
  for (const Arena *arena : impl_->stateArenas())
    bytes += arena->size();
  return bytes;
}

size_t DeviceModel::masterWeightBytes() const {
  const Impl &m = *impl_;
  if (!m.shardMasters)
    return m.params->size();
  return m.masters->size() + m.params->size() + m.f32Staging->size();
}

std::vector<float> DeviceModel::parameters() const {
  Impl &m = *impl_;
  std::vector<float> values(size_t(m.hostTotal));
  m.sync("reading the parameters");
  if (m.total > 0 && m.shardMasters)
    m.gatherShards(*m.masters, values.data(), "gathering the master weights (ZeRO-1 all-gather)");
  else if (m.total > 0)
    m.downloadFlat(*m.params, values.data(), "reading the parameters");
  return values;
}

} // namespace stringrt::cuda
