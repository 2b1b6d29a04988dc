// `stringrun gradients`: one evaluation of a model's gradients program on the
// first training batch, written out for comparison with another
// implementation (tests/oracle/test_runtime_vs_torch.py compares it with
// PyTorch autograd).
#pragma once

#include "stringrt/Data.h"
#include "stringrt/Model.h"

#include <cstdint>
#include <string>

namespace stringrun {

struct GradientDumpOptions {
  int64_t batch = 0;      // >= 1
  uint64_t seed = 0;      // data-order and dropout seed, as `train --seed`
  uint64_t initSeed = 0;  // the initial parameters' draw, as `train --init-seed`
  std::string paramsPath; // empty: freshly initialised parameters
  std::string outPath;    // the safetensors file to write
};

struct GradientDumpResult {
  float loss = 0;
  int64_t gradients = 0; // trainable parameters written as grad.<name>
};

// Takes the batch `train` takes at step 1 (examples order[0, batch) of
// epochOrder(train examples, seed, 0)) and its dropout masks (step key
// {seed, 0, 0}, DropoutMask.h), sets the parameters (loaded from
// `paramsPath`, else initialised), runs Model::gradients once and writes,
// atomically, one safetensors file with
//   input.<name>  every model input of the batch (F32 or I32, its shape),
//   param.<name>  every parameter (F32, frozen ones too),
//   loss          the loss (F32, shape []),
//   grad.<name>   the gradient of every trainable parameter (F32),
// and metadata format "stringrun-gradients", model, batch, seed (and
// init_seed when not 0). Throws
// stringrt::Error (bad batch, data, parameter file, I/O).
GradientDumpResult dumpGradients(stringrt::Model &model,
                                 const stringrt::DataSet &data,
                                 const GradientDumpOptions &options);

} // namespace stringrun
