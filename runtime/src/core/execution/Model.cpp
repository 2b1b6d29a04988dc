// Model: the flat parameter buffer, the initialisers, input checking and the
// two program executors (docs/package.md, "Runtime API").
#include "stringrt/Model.h"

#include "execution/Executor.h"
#include "execution/Initializers.h"
#include "stringrt/Error.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace stringrt {

struct Model::Impl {
  Manifest manifest;
  std::string path;
  KernelSet kernels = KernelSet::Fast;
  std::shared_ptr<const KernelLibrary> library; // KernelSet::Compiled
  std::vector<ParamSlot> slots;
  std::unordered_map<std::string, size_t> slotByName; // index into slots
  std::vector<float> params;
  int64_t count = 0;
  std::unique_ptr<detail::Executor> forward;
  std::unique_ptr<detail::Executor> gradients;
  // The training step later runs draw pe.dropout's masks for.
  StepKey stepKey;
  // Value buffers recycled across ops, programs and runs (Executor.h).
  mutable detail::BufferPool pool;
  // For each output of the gradients program: the slot of its parameter, or
  // -1 for the loss.
  std::vector<int64_t> gradSlots;

  [[noreturn]] void fail(const std::string &message) const {
    if (path.empty())
      throw Error(message);
    throw Error(path, message);
  }

  int64_t slotIndex(const std::string &name) const {
    auto it = slotByName.find(name);
    return it == slotByName.end() ? -1 : static_cast<int64_t>(it->second);
  }

  const detail::Executor &executor(const std::string &program) const {
    if (program == "forward")
      return *forward;
    if (program == "gradients")
      return *gradients;
    fail("no program '" + program + "' (the programs are forward and gradients)");
  }

  // Runs a program; its errors get the package path.
  std::vector<ref::Tensor<float>> execute(const detail::Executor &executor,
                                          const std::vector<HostTensor> &inputs,
                                          std::optional<int64_t> batch) const {
    try {
      return executor.run(inputs, batch, params.data(), nullptr, &pool, stepKey);
    } catch (const Error &e) {
      if (!e.path().empty())
        throw;
      fail(e.what());
    }
  }

  std::vector<HostTensor> bindInputs(const std::map<std::string, HostTensor> &inputs,
                                     std::optional<int64_t> &batch) const;
  void build();
};

void Model::Impl::build() {
  for (const ManifestParam &p : manifest.params) {
    if (!slotByName.emplace(p.name, slots.size()).second)
      fail("parameter '" + p.name + "' is declared twice");
    for (int64_t d : p.shape)
      if (d < 1)
        fail("parameter '" + p.name + "' has shape " + ref::shapeToString(p.shape) +
             " (every dimension must be at least 1)");
    ParamSlot slot;
    slot.name = p.name;
    slot.shape = p.shape;
    slot.offset = count;
    slot.size = ref::shapeNumel(p.shape);
    slot.frozen = p.frozen;
    count += slot.size;
    slots.push_back(std::move(slot));
  }
  params.assign(static_cast<size_t>(count), 0.0f);

  std::vector<detail::ParamLocation> locations;
  for (const ParamSlot &s : slots)
    locations.push_back({s.name, s.offset, s.shape});
  for (const auto *program : {&manifest.forward, &manifest.gradients})
    if (program->inputs.size() != manifest.inputs.size())
      fail("program '" + std::string(program == &manifest.forward ? "forward" : "gradients") +
           "' has " + std::to_string(program->inputs.size()) + " inputs, the manifest " +
           std::to_string(manifest.inputs.size()));
  try {
    forward = std::make_unique<detail::Executor>(manifest.forward, "forward", locations,
                                                 kernels, library.get());
    gradients = std::make_unique<detail::Executor>(manifest.gradients, "gradients", locations,
                                                   kernels, library.get());
  } catch (const Error &e) {
    fail(e.what());
  }
  for (size_t k = 0; k < manifest.inputs.size(); ++k) {
    const ManifestInput &in = manifest.inputs[k];
    for (const auto *program : {&manifest.forward, &manifest.gradients}) {
      const ProgramValue &v = program->values[program->inputs[k]];
      if (v.dtype != in.dtype || v.shape != in.shape)
        fail("input '" + in.name + "' is " + detail::valueTypeName(in.dtype) + " " +
             ref::shapeToString(in.shape) + " in the manifest, " +
             detail::valueTypeName(v.dtype) + " " + ref::shapeToString(v.shape) +
             " in a program");
    }
  }

  // The gradients program: the loss, then one gradient per trainable parameter.
  for (size_t j = 0; j < manifest.gradients.outputs.size(); ++j) {
    const ProgramOutput &out = manifest.gradients.outputs[j];
    if (!out.isGrad()) {
      gradSlots.push_back(-1);
      continue;
    }
    int64_t s = slotIndex(out.grad);
    if (s < 0)
      fail("program 'gradients': output '" + out.key() + "' is not a parameter's gradient");
    const ParamSlot &slot = slots[static_cast<size_t>(s)];
    if (slot.frozen)
      fail("program 'gradients': parameter '" + slot.name + "' is frozen but has a gradient");
    const ProgramValue &v = manifest.gradients.values[out.value];
    if (v.dtype != DType::F32 || v.shape != slot.shape)
      fail("program 'gradients': the gradient of '" + slot.name + "' is " +
           detail::valueTypeName(v.dtype) + " " + ref::shapeToString(v.shape) +
           ", the parameter f32 " + ref::shapeToString(slot.shape));
    gradSlots.push_back(s);
  }
}

std::vector<HostTensor> Model::Impl::bindInputs(const std::map<std::string, HostTensor> &inputs,
                                                std::optional<int64_t> &batch) const {
  auto names = [&] {
    std::string list;
    for (const ManifestInput &in : manifest.inputs)
      list += (list.empty() ? "" : ", ") + in.name;
    return list.empty() ? std::string("none") : list;
  };
  for (const auto &entry : inputs) {
    const std::string &name = entry.first; // C++17 lambdas cannot capture a binding
    bool known = std::any_of(manifest.inputs.begin(), manifest.inputs.end(),
                             [&](const ManifestInput &in) { return in.name == name; });
    if (!known)
      fail("unknown input '" + name + "' (the model's inputs: " + names() + ")");
  }
  std::string batchFrom;
  std::vector<HostTensor> bound;
  for (const ManifestInput &in : manifest.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      fail("missing input '" + in.name + "' (the model's inputs: " + names() + ")");
    const HostTensor &t = it->second;
    if (t.dtype != in.dtype)
      fail("input '" + in.name + "' must be " + detail::valueTypeName(in.dtype) + ", got " +
           detail::valueTypeName(t.dtype));
    bool fits = t.shape.size() == in.shape.size();
    for (size_t d = 0; fits && d < in.shape.size(); ++d) {
      if (in.shape[d] != kBatchDim) {
        fits = t.shape[d] == in.shape[d];
        continue;
      }
      if (!batch) {
        batch = t.shape[d];
        batchFrom = in.name;
      } else if (*batch != t.shape[d]) {
        fail("inputs disagree on the batch size: '" + batchFrom + "' has " +
             std::to_string(*batch) + ", '" + in.name + "' has " + std::to_string(t.shape[d]));
      }
    }
    if (!fits)
      fail("input '" + in.name + "' must have shape " + ref::shapeToString(in.shape) +
           " (-1: the batch), got " + ref::shapeToString(t.shape));
    if (batch && *batch < 1)
      fail("input '" + batchFrom + "': the batch size must be at least 1, got " +
           std::to_string(*batch));
    for (int64_t d : t.shape)
      if (d < 0)
        fail("input '" + in.name + "' has a negative dimension " + ref::shapeToString(t.shape));
    if (!t.data && t.numel() > 0)
      fail("input '" + in.name + "' has no data");
    bound.push_back(t);
  }
  return bound;
}

namespace {

// The package's kernel library for `kernels`: loaded for KernelSet::Compiled
// only (the fast and reference kernels never map a package's code); throws
// when Compiled cannot run.
std::shared_ptr<const KernelLibrary> libraryFor(const Package &package, KernelSet kernels) {
  if (kernels != KernelSet::Compiled)
    return nullptr;
  if (!package.hasKernels())
    throw Error(package.path(), "the package has no compiled kernels (target \"" +
                                    package.target() +
                                    "\"; compile it with --target=cpu): use the fast or "
                                    "reference kernels");
  if (!package.kernelsUnavailable().empty())
    throw Error(package.path(), "the package's compiled kernels cannot run here: " +
                                    package.kernelsUnavailable() +
                                    ": recompile the package on this machine, or use "
                                    "the fast or reference kernels");
  return package.loadKernelLibrary();
}

KernelSet defaultKernels(const Package &package) {
  return package.hasKernels() && package.kernelsUnavailable().empty() ? KernelSet::Compiled
                                                                      : KernelSet::Fast;
}

} // namespace

Model::Model(Package package) : Model(package, defaultKernels(package)) {}

Model::Model(Package package, KernelSet kernels)
    : Model(package.manifest(), package.path(), kernels, libraryFor(package, kernels)) {}

Model::Model(Manifest manifest, std::string path, KernelSet kernels,
             std::shared_ptr<const KernelLibrary> library)
    : impl_(std::make_unique<Impl>()) {
  impl_->manifest = std::move(manifest);
  impl_->path = std::move(path);
  impl_->kernels = kernels;
  impl_->library = std::move(library);
  impl_->build();
}

Model::~Model() = default;
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;

const Manifest &Model::manifest() const { return impl_->manifest; }
KernelSet Model::kernels() const { return impl_->kernels; }
bool Model::arenaPlan() const {
  return impl_->forward->usesArena() && impl_->gradients->usesArena();
}
void Model::setArenaPlan(bool enabled) {
  if (enabled && (!impl_->manifest.forward.arena || !impl_->manifest.gradients.arena))
    impl_->fail("the package has no arena plan");
  impl_->forward->setUseArena(enabled);
  impl_->gradients->setUseArena(enabled);
}
void Model::setProfile(OpProfile *profile) {
  impl_->forward->setProfile(profile);
  impl_->gradients->setProfile(profile);
}
void Model::setStepKey(const StepKey &key) { impl_->stepKey = key; }
const StepKey &Model::stepKey() const { return impl_->stepKey; }
const std::shared_ptr<const KernelLibrary> &Model::kernelLibrary() const {
  return impl_->library;
}

std::vector<float> &Model::parameters() { return impl_->params; }
const std::vector<float> &Model::parameters() const { return impl_->params; }
const std::vector<ParamSlot> &Model::slots() const { return impl_->slots; }
int64_t Model::parameterCount() const { return impl_->count; }

int64_t Model::programBytes(const std::string &program, int64_t batch) const {
  return impl_->executor(program).runBytes(batch);
}

const ParamSlot *Model::findSlot(const std::string &name) const {
  int64_t s = impl_->slotIndex(name);
  return s < 0 ? nullptr : &impl_->slots[static_cast<size_t>(s)];
}

void Model::initParameters(uint64_t initSeed) {
  Impl &m = *impl_;
  if (static_cast<int64_t>(m.params.size()) != m.count)
    m.params.assign(static_cast<size_t>(m.count), 0.0f);
  for (size_t i = 0; i < m.slots.size(); ++i) {
    const ManifestParam &p = m.manifest.params[i];
    const ParamSlot &slot = m.slots[i];
    float *out = m.params.data() + slot.offset;
    switch (p.init) {
    case ParamInit::Zeros:
      std::fill(out, out + slot.size, 0.0f);
      break;
    case ParamInit::Ones:
      std::fill(out, out + slot.size, 1.0f);
      break;
    case ParamInit::Constant:
      std::fill(out, out + slot.size, static_cast<float>(p.value));
      break;
    case ParamInit::Uniform:
      detail::fillUniform(out, slot.size, p.low, p.high, detail::runInitSeed(p.seed, initSeed));
      break;
    case ParamInit::Normal:
      detail::fillNormal(out, slot.size, p.mean, p.std, detail::runInitSeed(p.seed, initSeed));
      break;
    case ParamInit::Load:
      detail::loadParameter(out, slot.shape, p.file, p.tensor, p.name);
      break;
    }
  }
}

std::map<std::string, ref::Tensor<float>>
Model::run(const std::string &program, const std::map<std::string, HostTensor> &inputs) {
  Impl &m = *impl_;
  const detail::Executor &executor = m.executor(program);
  if (static_cast<int64_t>(m.params.size()) != m.count)
    m.fail("the parameter buffer has " + std::to_string(m.params.size()) + " elements, the model " +
           std::to_string(m.count));
  std::optional<int64_t> batch;
  std::vector<HostTensor> bound = m.bindInputs(inputs, batch);
  std::vector<ref::Tensor<float>> values = m.execute(executor, bound, batch);
  std::map<std::string, ref::Tensor<float>> outputs;
  const std::vector<ProgramOutput> &outs = executor.program().outputs;
  for (size_t j = 0; j < outs.size(); ++j)
    outputs[outs[j].key()] = std::move(values[j]);
  return outputs;
}

void Model::gradients(const std::map<std::string, HostTensor> &inputs, float &loss,
                      std::vector<float> &flatGrads) {
  Impl &m = *impl_;
  if (static_cast<int64_t>(m.params.size()) != m.count)
    m.fail("the parameter buffer has " + std::to_string(m.params.size()) + " elements, the model " +
           std::to_string(m.count));
  if (m.gradSlots.empty() || m.gradSlots[0] != -1)
    m.fail("program 'gradients' has no loss as its first output");
  std::optional<int64_t> batch;
  std::vector<HostTensor> bound = m.bindInputs(inputs, batch);
  std::vector<ref::Tensor<float>> values = m.execute(*m.gradients, bound, batch);
  if (values[0].numel() != 1)
    m.fail("program 'gradients': the loss has shape " + ref::shapeToString(values[0].shape) +
           ", not a scalar");
  loss = values[0].values[0];
  flatGrads.assign(static_cast<size_t>(m.count), 0.0f);
  for (size_t j = 1; j < values.size(); ++j) {
    int64_t s = m.gradSlots[j];
    if (s < 0)
      continue;
    const ParamSlot &slot = m.slots[static_cast<size_t>(s)];
    std::copy(values[j].values.begin(), values[j].values.end(),
              flatGrads.begin() + slot.offset);
  }
}

} // namespace stringrt
