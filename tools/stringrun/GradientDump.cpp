#include "GradientDump.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"
#include "stringrt/Trainer.h"

#include <fmt/format.h>

#include <map>
#include <vector>

namespace stringrun {

GradientDumpResult dumpGradients(stringrt::Model &model,
                                 const stringrt::DataSet &data,
                                 const GradientDumpOptions &options) {
  using stringrt::Error;
  const stringrt::Manifest &manifest = model.manifest();
  if (options.batch < 1)
    throw Error(fmt::format("batch must be >= 1, got {}", options.batch));
  const int64_t count = data.count(stringrt::Split::Train);
  if (count < options.batch)
    throw Error(fmt::format("the train split has {} examples, fewer than one "
                            "batch of {}",
                            count, options.batch));
  stringrt::checkBatchMemory(model, options.batch, true, 0, "gradients");

  model.initParameters(options.initSeed);
  if (!options.paramsPath.empty())
    stringrt::loadParameters(options.paramsPath, manifest.model,
                             stringrt::optimizerSlots(model),
                             model.parameters());

  // The first batch of epoch 0 in the data order of the seed: what `train`
  // trains on at step 1.
  const std::vector<int64_t> order =
      stringrt::epochOrder(count, options.seed, 0);
  const stringrt::Batch batch =
      data.batch(stringrt::Split::Train, order.data(),
                 static_cast<size_t>(options.batch));

  GradientDumpResult result;
  std::vector<float> grads;
  model.setStepKey({options.seed, 0, 0}); // and the dropout masks of step 1
  model.gradients(stringrt::modelInputs(model, batch), result.loss, grads);

  std::vector<stringrt::TensorView> views;
  for (size_t i = 0; i < manifest.inputs.size(); ++i) {
    const stringrt::BatchTensor &t = batch.tensors[i];
    const void *values = t.dtype == stringrt::DType::F32
                             ? static_cast<const void *>(t.f32.data())
                             : static_cast<const void *>(t.i32.data());
    views.push_back({"input." + manifest.inputs[i].name, t.dtype, t.shape,
                     values});
  }
  const std::vector<float> &params = model.parameters();
  for (const stringrt::ParamSlot &slot : model.slots()) {
    views.push_back({"param." + slot.name, stringrt::DType::F32, slot.shape,
                     params.data() + slot.offset});
    if (slot.frozen)
      continue;
    views.push_back({"grad." + slot.name, stringrt::DType::F32, slot.shape,
                     grads.data() + slot.offset});
    ++result.gradients;
  }
  views.push_back({"loss", stringrt::DType::F32, {}, &result.loss});

  std::map<std::string, std::string> metadata = {
      {"format", "stringrun-gradients"},
      {"model", manifest.model},
      {"batch", std::to_string(options.batch)},
      {"seed", std::to_string(options.seed)},
  };
  if (options.initSeed != 0)
    metadata["init_seed"] = std::to_string(options.initSeed);
  stringrt::writeSafetensors(options.outPath, views, metadata);
  return result;
}

} // namespace stringrun
