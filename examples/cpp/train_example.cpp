// train_example: trains a compiled model package for a few steps with the
// C++ API of libstringrt, printing the loss of every step, then writes a
// checkpoint (which `stringrun eval --params` reads).
//
//   stringc model.pe --target=cpu -o model.pkg
//   train_example model.pkg DATA_DIR [STEPS]
//
// DATA_DIR is an IDX image directory (MNIST layout) or, for a language model,
// a text file. The checkpoint goes to MODEL.pkg with ".ckpt" appended.
#include "stringrt/Checkpoint.h"
#include "stringrt/Data.h"
#include "stringrt/Error.h"
#include "stringrt/Model.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Package.h"
#include "stringrt/Trainer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: train_example MODEL.pkg DATA_DIR [STEPS]\n");
    return 2;
  }
  const std::string packagePath = argv[1], dataPath = argv[2];
  const long steps = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 10;
  if (steps < 1) {
    std::fprintf(stderr, "train_example: STEPS must be a number >= 1\n");
    return 2;
  }
  try {
    // The package: manifest, programs, parameter initialisers, optimizer.
    stringrt::Model model(stringrt::Package::load(packagePath));
    model.initParameters();
    std::printf("model '%s': %lld parameters\n", model.manifest().model.c_str(),
                static_cast<long long>(model.parameterCount()));

    // The training data, checked against the model's inputs.
    stringrt::DataSet data = stringrt::loadModelData(model, dataPath);
    const int64_t examples = data.count(stringrt::Split::Train);
    if (examples < 1)
      throw stringrt::Error(dataPath, "the train split is empty");
    const int64_t batch = std::min<int64_t>(stringrt::kDefaultBatch, examples);

    // The package's optimizer and learning-rate schedule over the flat
    // parameter buffer.
    std::vector<stringrt::OptimizerSlot> slots = stringrt::optimizerSlots(model);
    stringrt::Optimizer optimizer(model.manifest().optimizer, slots,
                                  model.parameters().size());

    std::vector<float> grads;
    std::vector<int64_t> order;
    const int64_t perEpoch = examples / batch;
    for (int64_t step = 0; step < steps; ++step) {
      // A fresh shuffle of the train split every epoch (seed 0).
      if (step % perEpoch == 0)
        order = stringrt::epochOrder(examples, 0, step / perEpoch);
      stringrt::Batch b = data.batch(stringrt::Split::Train,
                                     order.data() + (step % perEpoch) * batch,
                                     static_cast<size_t>(batch));
      // Loss and gradients, then one optimizer step.
      float loss = 0;
      model.gradients(stringrt::modelInputs(model, b), loss, grads);
      stringrt::OptimizerStepInfo info =
          optimizer.step(model.parameters(), grads, steps);
      std::printf("step %lld/%ld: loss %.6f (lr %.3e)\n",
                  static_cast<long long>(info.step), steps, loss, info.lr);
    }

    // Parameters and optimizer state, resumable with `stringrun train --resume`.
    stringrt::CheckpointInfo info;
    info.model = model.manifest().model;
    info.step = optimizer.stepCount();
    info.batch = batch;
    info.totalSteps = steps;
    info.epoch = steps / perEpoch;
    const std::string checkpoint = packagePath + ".ckpt";
    stringrt::saveCheckpoint(checkpoint, info, slots, model.parameters(), optimizer);
    std::printf("checkpoint %s (step %lld)\n", checkpoint.c_str(),
                static_cast<long long>(info.step));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "train_example: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
