// The device executor (DeviceExecutor.h): device buffers, the walk of the
// step program, and the training step. The binding of a launch to pointers
// and sizes is StepBinding.cpp (pure, unit tested without a GPU).
#include "stringrt/cuda/DeviceExecutor.h"

#include "Driver.h"
#include "stringrt/Error.h"
#include "stringrt/Optimizer.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/StepBinding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace stringrt::cuda {
namespace {

constexpr int64_t kMaxPartials = 1024; // pe_sumsq_partials' grid cap
constexpr size_t kGemmWorkspace = size_t(32) << 20; // cuBLAS workspace (graph capture)

std::string joined(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// A program's device buffers at one batch size.
struct BatchBuffers {
  ProgramPlacement placement;
  std::unique_ptr<Arena> arena, extra, scratch;
  int64_t trainSteps = 0;        // training steps run at this batch size
  CUgraphExec trainGraph = nullptr; // the captured device part of a step
  ~BatchBuffers() {
    if (trainGraph)
      if (const driver::Api *api = driver::api())
        api->graphExecDestroy(trainGraph);
  }
  BatchBuffers() = default;
  BatchBuffers(BatchBuffers &&other) noexcept
      : placement(std::move(other.placement)), arena(std::move(other.arena)),
        extra(std::move(other.extra)), scratch(std::move(other.scratch)),
        trainSteps(other.trainSteps), trainGraph(other.trainGraph) {
    other.trainGraph = nullptr;
  }
  BatchBuffers &operator=(BatchBuffers &&) = delete;
};

/// Page-locked host memory for the asynchronous copies back.
class PinnedFloats {
public:
  explicit PinnedFloats(size_t count) : count_(count) {
    void *p = nullptr;
    driver::check(driver::require().memHostAlloc(&p, std::max<size_t>(count, 1) * 4, 0),
                  "allocating page-locked host memory", "cuMemHostAlloc");
    data_ = static_cast<float *>(p);
  }
  ~PinnedFloats() {
    if (const driver::Api *api = driver::api())
      api->memFreeHost(data_);
  }
  PinnedFloats(const PinnedFloats &) = delete;
  PinnedFloats &operator=(const PinnedFloats &) = delete;
  float *data() { return data_; }
  size_t size() const { return count_; }

private:
  float *data_ = nullptr;
  size_t count_;
};

} // namespace

struct DeviceModel::Impl {
  Manifest manifest;
  CudaSection section;
  DeviceOptions options;
  std::shared_ptr<Device> device;
  std::unique_ptr<KernelSet> kernels;
  std::unique_ptr<Gemm> gemm;
  CUstream stream = nullptr;
  std::vector<OptimizerSlot> slots;
  int64_t total = 0;
  std::unique_ptr<Arena> params, grads, moment1, moment2, partials, workspace;
  bool graphsFailed = false;
  std::unique_ptr<PinnedFloats> hostReturn; // loss, then the partials
  int64_t steps = 0;
  std::map<std::pair<std::string, int64_t>, BatchBuffers> buffers;

  ~Impl() {
    buffers.clear();
    if (stream)
      if (const driver::Api *api = driver::api())
        api->streamDestroy(stream);
  }

  const Program &program(const std::string &name) const { return manifest.program(name); }

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
    auto arena = [&](uint64_t bytes) {
      return std::make_unique<Arena>(device, size_t(std::max<uint64_t>(bytes, kDeviceAlignment)));
    };
    b.arena = arena(b.placement.arenaBytes);
    b.extra = arena(b.placement.extraBytes);
    b.scratch = arena(scratchBytes);
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

  void upload(const BatchBuffers &b, const std::string &name,
              const std::map<std::string, HostTensor> &inputs) {
    const Program &p = program(name);
    for (size_t i = 0; i < manifest.inputs.size(); ++i) {
      const HostTensor &t = inputs.at(manifest.inputs[i].name);
      const ValuePlace &place = b.placement.values[p.inputs[i]];
      if (place.bytes == 0)
        continue;
      if (uint64_t(t.numel()) * 4 != place.bytes)
        throw Error(fmt::format("device executor: input '{}' size mismatch",
                                manifest.inputs[i].name));
      driver::check(driver::require().memcpyHtoDAsync(CUdeviceptr(address(b, p.inputs[i])),
                                                      t.data, place.bytes, stream),
                    "uploading the batch", "cuMemcpyHtoDAsync");
    }
  }

  /// Runs program `name` on the device (asynchronously, on the stream).
  void walk(const std::string &name, BatchBuffers &b, int64_t batch) {
    const Program &p = program(name);
    const CudaProgramSteps &steps = *section.stepsOf(name);
    size_t next = 0; // the next entry of steps.ops
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const ProgramOp &op = p.ops[i];
      if (op.op == "pe.get_param")
        continue;
      if (op.op == "arith.constant") {
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
      for (size_t l = 0; l < opSteps.launches.size(); ++l) {
        std::string where = fmt::format("{} op {} ({}) launch {}", name, i, op.op, l);
        BoundLaunch bound = bindLaunch(section, opSteps.launches[l], pointers, batch, where);
        if (bound.gemm) {
          const BoundGemm &g = *bound.gemm;
          gemm->runStridedBatched(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.strideA,
                                  g.b, g.strideB, g.beta, g.c, g.strideC, g.count, where);
        } else {
          kernels->launch(bound.kernel->name, bound.args, where,
                          bound.grid ? &*bound.grid : nullptr, stream);
        }
      }
    }
  }

  /// After @gradients: each gradient output into its slot of `grads`.
  void collectGradients(const BatchBuffers &b) {
    const Program &p = program("gradients");
    for (const ProgramOutput &out : p.outputs) {
      if (!out.isGrad())
        continue;
      auto slot = std::find_if(slots.begin(), slots.end(),
                               [&](const OptimizerSlot &s) { return s.name == out.grad; });
      if (slot == slots.end())
        throw Error(fmt::format("gradients output for unknown parameter '{}'", out.grad));
      uint64_t bytes = uint64_t(slot->size) * 4;
      if (b.placement.values[out.value].bytes != bytes)
        throw Error(fmt::format("the gradient of '{}' has the wrong size", out.grad));
      driver::check(driver::require().memcpyDtoDAsync(
                        CUdeviceptr(grads->at(slot->offset * 4, bytes)),
                        CUdeviceptr(address(b, out.value)), bytes, stream),
                    "collecting the gradients", "cuMemcpyDtoDAsync");
    }
  }

  void copyBack(float *host, uint64_t device, size_t bytes, const char *what) {
    driver::check(driver::require().memcpyDtoHAsync(host, CUdeviceptr(device), bytes, stream),
                  what, "cuMemcpyDtoHAsync");
  }

  void sync(const std::string &what) {
    driver::check(driver::require().streamSynchronize(stream), what, "cuStreamSynchronize");
  }

  /// Queues @gradients on the uploaded batch, the copies of the gradients
  /// into `grads` and of the loss into hostReturn[0].
  void enqueueGradients(BatchBuffers &b, int64_t batch) {
    walk("gradients", b, batch);
    collectGradients(b);
    ValueId loss = program("gradients").outputs.at(0).value;
    copyBack(hostReturn->data(), address(b, loss), 4, "copying the loss back");
  }

  /// Runs @gradients at the batch of `inputs` (see enqueueGradients).
  void runGradients(const std::map<std::string, HostTensor> &inputs) {
    int64_t batch = batchOf(inputs);
    BatchBuffers &b = buffersFor("gradients", batch);
    upload(b, "gradients", inputs);
    enqueueGradients(b, batch);
  }

  /// The number of gradient-norm partials pe_sumsq_partials writes.
  int64_t partialBlocks() const {
    if (total == 0)
      return 0;
    std::vector<KernelArg> args = {KernelArg::pointer(1), KernelArg::pointer(1),
                                   KernelArg::integer(total)};
    return int64_t(launchShapeFor(*section.find("pe_sumsq_partials"), args).grid[0]);
  }

  /// Queues the device part of a training step: @gradients, the gradient
  /// copies, the norm's partials and their copy into hostReturn[1..].
  void enqueueTrainStep(BatchBuffers &b, int64_t batch) {
    enqueueGradients(b, batch);
    int64_t blocks = partialBlocks();
    if (blocks == 0)
      return;
    kernels->launch("pe_sumsq_partials",
                    {KernelArg::pointer(partials->at(0, kMaxPartials * 4)),
                     KernelArg::pointer(grads->at(0, size_t(total) * 4)),
                     KernelArg::integer(total)},
                    "the gradient norm", nullptr, stream);
    copyBack(hostReturn->data() + 1, partials->at(0, size_t(blocks) * 4), size_t(blocks) * 4,
             "copying the gradient norm back");
  }

  /// Captures enqueueTrainStep into b.trainGraph; false (nothing queued)
  /// when capture fails.
  bool capture(BatchBuffers &b, int64_t batch) {
    const driver::Api &api = driver::require();
    std::string failure;
    CUgraph graph = nullptr;
    CUresult begun = api.streamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (begun != CUDA_SUCCESS) {
      failure = "cuStreamBeginCapture failed: " + driver::describe(begun);
    } else {
      try {
        enqueueTrainStep(b, batch);
      } catch (const std::exception &error) {
        failure = error.what();
      }
      CUresult ended = api.streamEndCapture(stream, &graph);
      if (failure.empty() && ended != CUDA_SUCCESS)
        failure = "cuStreamEndCapture failed: " + driver::describe(ended);
      if (failure.empty()) {
        CUresult made = api.graphInstantiate(&b.trainGraph, graph, 0);
        if (made != CUDA_SUCCESS) {
          failure = "cuGraphInstantiate failed: " + driver::describe(made);
          b.trainGraph = nullptr;
        }
      }
      if (graph)
        api.graphDestroy(graph);
    }
    if (failure.empty())
      return true;
    graphsFailed = true;
    std::fprintf(stderr,
                 "stringrt: capturing the training step in a CUDA graph failed (%s); "
                 "running without graphs\n",
                 failure.c_str());
    return false;
  }
};

DeviceModel::DeviceModel(const Manifest &manifest, const CudaSection &section,
                         const std::vector<float> &parameters, DeviceOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl &m = *impl_;
  m.manifest = manifest;
  m.section = section;
  m.options = options;
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
  if (manifest.optimizer.kind != OptimizerKind::AdamW)
    throw Error("the device executor trains with adamw only, the package's optimizer is sgd");
  for (const char *kernel : {"pe_adamw", "pe_sumsq_partials"})
    if (!section.find(kernel))
      throw Error(fmt::format("the package has no kernel {} (the optimizer on the device)",
                              kernel));
  for (const ManifestParam &p : manifest.params) {
    OptimizerSlot slot;
    slot.name = p.name;
    slot.shape = p.shape;
    slot.offset = size_t(m.total);
    slot.size = 1;
    for (int64_t d : p.shape)
      slot.size *= size_t(d);
    slot.frozen = p.frozen;
    m.total += int64_t(slot.size);
    m.slots.push_back(slot);
  }
  if (int64_t(parameters.size()) != m.total)
    throw Error(fmt::format("device executor: {} parameters given, the manifest has {}",
                            parameters.size(), m.total));

  m.device = Device::open(options.device);
  m.kernels = std::make_unique<KernelSet>(m.device, m.section);
  m.gemm = std::make_unique<Gemm>(m.device);
  driver::check(driver::require().streamCreate(&m.stream, CU_STREAM_NON_BLOCKING),
                "creating the executor's stream", "cuStreamCreate");
  m.gemm->setStream(m.stream);
  m.gemm->setTF32(options.tf32);
  size_t bytes = size_t(std::max<int64_t>(m.total, 1)) * 4;
  m.params = std::make_unique<Arena>(m.device, bytes);
  m.grads = std::make_unique<Arena>(m.device, bytes);
  m.moment1 = std::make_unique<Arena>(m.device, bytes);
  m.moment2 = std::make_unique<Arena>(m.device, bytes);
  m.partials = std::make_unique<Arena>(m.device, size_t(kMaxPartials) * 4);
  m.workspace = std::make_unique<Arena>(m.device, kGemmWorkspace);
  m.gemm->setWorkspace(m.workspace->at(0, kGemmWorkspace), kGemmWorkspace);
  m.hostReturn = std::make_unique<PinnedFloats>(size_t(1 + kMaxPartials));
  if (m.total > 0)
    m.params->upload(0, parameters.data(), size_t(m.total) * 4, "uploading the parameters");
  for (Arena *zeroed : {m.grads.get(), m.moment1.get(), m.moment2.get()})
    driver::check(driver::require().memsetD32Async(CUdeviceptr(zeroed->at(0, zeroed->size())), 0,
                                                   zeroed->size() / 4, m.stream),
                  "zeroing the optimizer state", "cuMemsetD32Async");
  m.sync("initialising the device model");
}

DeviceModel::~DeviceModel() = default;

const std::string &DeviceModel::deviceName() const { return impl_->device->name(); }
int64_t DeviceModel::stepCount() const { return impl_->steps; }

float DeviceModel::trainStep(const std::map<std::string, HostTensor> &inputs,
                             int64_t totalSteps) {
  Impl &m = *impl_;
  const ManifestOptimizer &config = m.manifest.optimizer;
  int64_t t = m.steps + 1;
  double lr = learningRate(config, t, totalSteps);
  int64_t batch = m.batchOf(inputs);
  BatchBuffers &b = m.buffersFor("gradients", batch);
  m.upload(b, "gradients", inputs);
  // The first step at a batch size runs eagerly (it also warms cuBLAS up);
  // the second is captured, and replayed from then on.
  bool graphs = m.options.graphs && !m.graphsFailed;
  if (graphs && !b.trainGraph && b.trainSteps >= 1)
    m.capture(b, batch);
  if (graphs && b.trainGraph)
    driver::check(driver::require().graphLaunch(b.trainGraph, m.stream),
                  fmt::format("training step {}", t), "cuGraphLaunch");
  else
    m.enqueueTrainStep(b, batch);
  ++b.trainSteps;
  int64_t blocks = m.partialBlocks();
  m.sync(fmt::format("training step {}", t));
  float loss = m.hostReturn->data()[0];
  double sumSq = 0;
  for (int64_t i = 0; i < blocks; ++i)
    sumSq += double(m.hostReturn->data()[1 + i]);
  double norm = std::sqrt(sumSq);
  double scale = config.clipNorm > 0 && norm > config.clipNorm ? config.clipNorm / norm : 1.0;
  double bc1 = 1.0 - std::pow(config.beta1, double(t));
  double bc2 = 1.0 - std::pow(config.beta2, double(t));
  // One AdamW launch per maximal run of trainable slots (frozen: untouched).
  for (size_t s = 0; s < m.slots.size();) {
    if (m.slots[s].frozen) {
      ++s;
      continue;
    }
    size_t begin = m.slots[s].offset, end = begin;
    for (; s < m.slots.size() && !m.slots[s].frozen; ++s)
      end = m.slots[s].offset + m.slots[s].size;
    size_t n = end - begin;
    if (n == 0)
      continue;
    std::vector<KernelArg> args = {
        KernelArg::pointer(m.params->at(begin * 4, n * 4)),
        KernelArg::pointer(m.moment1->at(begin * 4, n * 4)),
        KernelArg::pointer(m.moment2->at(begin * 4, n * 4)),
        KernelArg::pointer(m.grads->at(begin * 4, n * 4)),
        KernelArg::integer(int64_t(n)),
        KernelArg::real(float(lr)),
        KernelArg::real(float(config.beta1)),
        KernelArg::real(float(config.beta2)),
        KernelArg::real(float(config.eps)),
        KernelArg::real(float(config.weightDecay)),
        KernelArg::real(float(bc1)),
        KernelArg::real(float(bc2)),
        KernelArg::real(float(scale))};
    m.kernels->launch("pe_adamw", args, fmt::format("AdamW, step {}", t), nullptr, m.stream);
  }
  m.steps = t;
  return loss;
}

void DeviceModel::gradients(const std::map<std::string, HostTensor> &inputs, float &loss,
                            std::vector<float> &flatGrads) {
  Impl &m = *impl_;
  m.runGradients(inputs);
  flatGrads.assign(size_t(m.total), 0.0f);
  if (m.total > 0)
    m.copyBack(flatGrads.data(), m.grads->at(0, size_t(m.total) * 4), size_t(m.total) * 4,
               "copying the gradients back");
  m.sync("the gradients program");
  loss = m.hostReturn->data()[0];
}

std::map<std::string, std::vector<float>>
DeviceModel::forward(const std::map<std::string, HostTensor> &inputs) {
  Impl &m = *impl_;
  int64_t batch = m.batchOf(inputs);
  BatchBuffers &b = m.buffersFor("forward", batch);
  m.upload(b, "forward", inputs);
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

std::vector<float> DeviceModel::parameters() const {
  Impl &m = *impl_;
  std::vector<float> values(size_t(m.total));
  m.sync("reading the parameters");
  if (m.total > 0)
    m.params->download(0, values.data(), values.size() * 4, "reading the parameters");
  return values;
}

} // namespace stringrt::cuda
