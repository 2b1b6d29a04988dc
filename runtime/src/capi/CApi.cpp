// The C ABI (stringrt/stringrt.h) over the C++ API: a handle owns a Model,
// its Optimizer, copies of the bound inputs and the run's bookkeeping. Every
// entry point catches everything, records the message in a thread-local
// string and returns nonzero (or NULL / -1), so no exception crosses the C
// boundary.
#include "stringrt/stringrt.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Model.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Package.h"
#include "stringrt/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using stringrt::DType;
using stringrt::Error;

thread_local std::string lastError;

// The largest rank the package format allows (docs/package.md).
constexpr int kMaxRank = 8;
// The largest batch dimension the package format allows.
constexpr int64_t kMaxDim = int64_t{1} << 31;

// A bound input: a copy of the caller's tensor.
struct BoundInput {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;

  stringrt::HostTensor view() const {
    return dtype == DType::F32 ? stringrt::HostTensor(f32.data(), shape)
                               : stringrt::HostTensor(i32.data(), shape);
  }
};

const char *dtypeText(DType dtype) { return dtype == DType::F32 ? "f32" : "i32"; }

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeText(dtype)) + " " + stringrt::ref::shapeToString(shape);
}

// Records "<function>: <message>" as the thread's last error (an empty one
// if even that string cannot be allocated).
void setError(const char *function, const char *message) noexcept {
  try {
    lastError = std::string(function) + ": " + message;
  } catch (...) {
    lastError.clear();
  }
}

// Runs `body`, turning any exception into a failure of `function`.
template <typename Body> int guarded(const char *function, Body &&body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::bad_alloc &) {
    setError(function, "out of memory");
  } catch (const std::exception &e) {
    setError(function, e.what());
  } catch (...) {
    setError(function, "unknown error");
  }
  return 1;
}

} // namespace

struct stringrt_model {
  explicit stringrt_model(stringrt::Package package)
      : model(std::move(package)), slots(stringrt::optimizerSlots(model)),
        optimizer(model.manifest().optimizer, slots, model.parameters().size()) {}

  stringrt::Model model;
  std::vector<stringrt::OptimizerSlot> slots;
  stringrt::Optimizer optimizer;
  std::map<std::string, BoundInput> inputs;
  int64_t totalSteps = 0;     // 0: not set.
  int64_t lastBatch = 0;      // Batch size of the last training step.
  bool parametersSet = false; // Initialised or loaded.

  const std::string &name() const { return model.manifest().model; }

  // The bound inputs, checking that the model can run: parameters set and
  // every input bound.
  std::map<std::string, stringrt::HostTensor> runInputs() const {
    if (!parametersSet)
      throw Error("the parameters of model '" + name() +
                  "' are not set (call stringrt_model_init_parameters or "
                  "stringrt_model_load_parameters first)");
    std::map<std::string, stringrt::HostTensor> views;
    for (const stringrt::ManifestInput &in : model.manifest().inputs) {
      auto it = inputs.find(in.name);
      if (it == inputs.end())
        throw Error("input '" + in.name + "' of model '" + name() +
                    "' is not bound (stringrt_model_set_input_" + dtypeText(in.dtype) +
                    ")");
      views[in.name] = it->second.view();
    }
    return views;
  }

  // The batch size of the bound inputs (dim 0 of the first input with a batch
  // dimension), 0 when no input has one.
  int64_t batch() const {
    for (const stringrt::ManifestInput &in : model.manifest().inputs)
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (in.shape[d] == stringrt::kBatchDim)
          return inputs.at(in.name).shape[d];
    return 0;
  }

  void setInput(const char *inputName, DType dtype, const void *data,
                const int64_t *shape, int rank) {
    if (!inputName)
      throw Error("the input name is NULL");
    const stringrt::ManifestInput *input = nullptr;
    std::string names;
    for (const stringrt::ManifestInput &in : model.manifest().inputs) {
      names += (names.empty() ? "" : ", ") + in.name;
      if (in.name == inputName)
        input = &in;
    }
    if (!input)
      throw Error("model '" + name() + "' has no input '" + inputName +
                  "' (its inputs: " + names + ")");
    const std::string what = "input '" + input->name + "'";
    if (input->dtype != dtype)
      throw Error(what + " is " + describe(input->dtype, input->shape) + ", not " +
                  dtypeText(dtype) + " (use stringrt_model_set_input_" +
                  dtypeText(input->dtype) + ")");
    if (rank < 0 || rank > kMaxRank)
      throw Error(what + ": rank " + std::to_string(rank) + " is not in [0, " +
                  std::to_string(kMaxRank) + "]");
    if (rank > 0 && !shape)
      throw Error(what + ": the shape is NULL");
    std::vector<int64_t> dims(shape, shape + rank);
    if (dims.size() != input->shape.size())
      throw Error(what + " is " + describe(input->dtype, input->shape) + ", got rank " +
                  std::to_string(rank) + " " + stringrt::ref::shapeToString(dims));
    int64_t numel = 1;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t want = input->shape[d];
      const bool ok = want == stringrt::kBatchDim ? dims[d] >= 1 && dims[d] <= kMaxDim
                                                  : dims[d] == want;
      if (!ok)
        throw Error(what + " is " + describe(input->dtype, input->shape) + ", got shape " +
                    stringrt::ref::shapeToString(dims) +
                    (want == stringrt::kBatchDim
                         ? " (the batch dimension must be in [1, 2^31])"
                         : ""));
      if (numel > std::numeric_limits<int64_t>::max() / 4 / dims[d])
        throw Error(what + ": shape " + stringrt::ref::shapeToString(dims) + " is too large");
      numel *= dims[d];
    }
    if (!data)
      throw Error(what + ": the data is NULL");
    BoundInput bound;
    bound.dtype = dtype;
    bound.shape = std::move(dims);
    if (dtype == DType::F32) {
      const auto *p = static_cast<const float *>(data);
      bound.f32.assign(p, p + numel);
    } else {
      const auto *p = static_cast<const int32_t *>(data);
      bound.i32.assign(p, p + numel);
    }
    inputs[input->name] = std::move(bound);
  }
};

namespace {

void requireModel(const stringrt_model *model) {
  if (!model)
    throw Error("the model is NULL");
}

void requirePath(const char *path) {
  if (!path)
    throw Error("the path is NULL");
}

} // namespace

extern "C" {

const char *stringrt_last_error(void) { return lastError.c_str(); }

stringrt_model *stringrt_model_load(const char *package_path) {
  stringrt_model *model = nullptr;
  guarded("stringrt_model_load", [&] {
    requirePath(package_path);
    model = new stringrt_model(stringrt::Package::load(package_path));
  });
  return model;
}

void stringrt_model_free(stringrt_model *model) { delete model; }

int64_t stringrt_model_parameter_count(const stringrt_model *model) {
  int64_t count = -1;
  guarded("stringrt_model_parameter_count", [&] {
    requireModel(model);
    count = model->model.parameterCount();
  });
  return count;
}

int stringrt_model_init_parameters(stringrt_model *model) {
  return guarded("stringrt_model_init_parameters", [&] {
    requireModel(model);
    // A failing initialiser (a `load` whose file is bad) leaves the buffer
    // partly written: the parameters count as unset until a call succeeds.
    model->parametersSet = false;
    model->model.initParameters();
    model->parametersSet = true;
  });
}

int stringrt_model_load_parameters(stringrt_model *model, const char *safetensors_path) {
  return guarded("stringrt_model_load_parameters", [&] {
    requireModel(model);
    requirePath(safetensors_path);
    stringrt::loadParameters(safetensors_path, model->name(), model->slots,
                             model->model.parameters());
    model->parametersSet = true;
  });
}

int stringrt_model_set_input_f32(stringrt_model *model, const char *name, const float *data,
                                 const int64_t *shape, int rank) {
  return guarded("stringrt_model_set_input_f32", [&] {
    requireModel(model);
    model->setInput(name, DType::F32, data, shape, rank);
  });
}

int stringrt_model_set_input_i32(stringrt_model *model, const char *name, const int32_t *data,
                                 const int64_t *shape, int rank) {
  return guarded("stringrt_model_set_input_i32", [&] {
    requireModel(model);
    model->setInput(name, DType::I32, data, shape, rank);
  });
}

int stringrt_model_set_total_steps(stringrt_model *model, int64_t total_steps) {
  return guarded("stringrt_model_set_total_steps", [&] {
    requireModel(model);
    if (total_steps < 1)
      throw Error("the total steps must be >= 1, got " + std::to_string(total_steps));
    model->totalSteps = total_steps;
  });
}

int stringrt_model_train_step(stringrt_model *model, float *loss_out) {
  return guarded("stringrt_model_train_step", [&] {
    requireModel(model);
    std::map<std::string, stringrt::HostTensor> inputs = model->runInputs();
    if (model->totalSteps < 1)
      throw Error("the run's total steps are not set (stringrt_model_set_total_steps)");
    float loss = 0;
    std::vector<float> grads;
    model->model.gradients(inputs, loss, grads);
    if (!std::isfinite(loss))
      throw Error("step " + std::to_string(model->optimizer.stepCount() + 1) +
                  ": the loss is " + std::to_string(loss) + "; the step is not taken");
    model->optimizer.step(model->model.parameters(), grads, model->totalSteps);
    model->lastBatch = model->batch();
    if (loss_out)
      *loss_out = loss;
  });
}

int stringrt_model_forward(stringrt_model *model, const char *output_name, float *out,
                           int64_t capacity, int64_t *count_out) {
  return guarded("stringrt_model_forward", [&] {
    requireModel(model);
    if (!output_name)
      throw Error("the output name is NULL");
    if (capacity < 0)
      throw Error("the capacity is negative (" + std::to_string(capacity) + ")");
    std::string names;
    bool known = false;
    for (const stringrt::ProgramOutput &o : model->model.manifest().forward.outputs) {
      names += (names.empty() ? "" : ", ") + o.key();
      known = known || o.key() == output_name;
    }
    if (!known)
      throw Error("the forward program of model '" + model->name() + "' has no output '" +
                  output_name + "' (its outputs: " + names + ")");
    std::map<std::string, stringrt::HostTensor> inputs = model->runInputs();
    auto outputs = model->model.run("forward", inputs);
    const stringrt::ref::Tensor<float> &result = outputs.at(output_name);
    const int64_t count = result.numel();
    if (count_out)
      *count_out = count;
    if (count > capacity)
      throw Error("output '" + std::string(output_name) + "' has " + std::to_string(count) +
                  " elements " + stringrt::ref::shapeToString(result.shape) +
                  ", more than the capacity " + std::to_string(capacity));
    if (count > 0 && !out)
      throw Error("the output buffer is NULL");
    if (count > 0)
      std::memcpy(out, result.values.data(), static_cast<size_t>(count) * sizeof(float));
  });
}

int stringrt_model_save_checkpoint(stringrt_model *model, const char *path) {
  return guarded("stringrt_model_save_checkpoint", [&] {
    requireModel(model);
    requirePath(path);
    stringrt::CheckpointInfo info;
    info.model = model->name();
    info.step = model->optimizer.stepCount();
    info.batch = model->lastBatch;
    // A run taken past its schedule's end: the steps it took are its length
    // (a checkpoint's step is never beyond its total_steps).
    info.totalSteps = std::max(model->totalSteps, info.step);
    stringrt::saveCheckpoint(path, info, model->slots, model->model.parameters(),
                             model->optimizer);
  });
}

} // extern "C"
