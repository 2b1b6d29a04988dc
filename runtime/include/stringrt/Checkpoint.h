// Training checkpoints: safetensors files (written atomically) holding every
// parameter by name (F32, its shape), the optimizer state per trainable
// parameter ("adam.m.<name>" and "adam.v.<name>", or "sgd.u.<name>") and, in
// `__metadata__`: format "stringc-checkpoint", version, model, step, epoch,
// data_seed, batch, total_steps, optimizer ("adamw" / "sgd") and, from
// version 2, tensor_crc32: the CRC-32 (zlib's) of every tensor's bytes, the
// tensors taken in name order, as 8 lower-case hex digits. Version 1
// checkpoints (no checksum) are read too.
#pragma once

#include "stringrt/Optimizer.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace stringrt {

constexpr const char *kCheckpointFormat = "stringc-checkpoint";
constexpr int kCheckpointVersion = 2;
constexpr int kOldestCheckpointVersion = 1;

struct CheckpointInfo {
  std::string model;      // The package's model name.
  int64_t step = 0;       // Optimizer steps taken.
  int64_t epoch = 0;      // Epochs completed.
  uint64_t dataSeed = 0;  // Seed of the data order.
  int64_t batch = 0;      // Batch size of the run.
  int64_t totalSteps = 0; // Steps of the whole run (the schedule's N).
};

// Writes the checkpoint atomically (a previous file at `path` survives any
// failure). `slots` describe `params`; `optimizer` must have been built over
// the same slots. Throws Error.
void saveCheckpoint(const std::string &path, const CheckpointInfo &info,
                    const std::vector<OptimizerSlot> &slots,
                    const std::vector<float> &params,
                    const Optimizer &optimizer);

// Reads only the metadata, validating the format, the version and that the
// numbers are consistent: none negative; a step beyond 0 has a batch and is
// at most total_steps; epoch (completed epochs) at most step.
CheckpointInfo readCheckpointInfo(const std::string &path);

// Loads a checkpoint into `params` and `optimizer` (its state and step
// count). Everything is validated before anything is changed: the format and
// version, the metadata's consistency, the tensors' checksum (version 2),
// the model name (== `model`), every slot present with its shape and F32,
// the optimizer kind and its state tensors, and no tensor the model does
// not have. On any problem an Error naming the file is thrown and `params` and
// `optimizer` are untouched.
CheckpointInfo loadCheckpoint(const std::string &path, const std::string &model,
                              const std::vector<OptimizerSlot> &slots,
                              std::vector<float> &params, Optimizer &optimizer);

// Loads just the parameters from a checkpoint or any safetensors file holding
// a tensor per slot by name (other tensors are ignored). A checkpoint of
// another model, or whose checksum or metadata is wrong, is rejected.
// Validates everything before changing `params`. With `ema`, the EMA of the
// weights a checkpoint keeps (Optimizer::emaParameters: "ema.<name>" for the
// trainable slots, the parameters for the frozen ones); a file without one is
// rejected.
//
// `adapt`, when given, is asked for each parameter whose tensor in the file
// has another shape than the model's (a learned position table trained at
// another image size): it returns the values in the model's shape or throws.
// Without it such a tensor is an error naming both shapes.
using ParameterAdapter = std::function<std::vector<float>(
    const std::string &name, const std::vector<int64_t> &fileShape, std::vector<float> values,
    const std::vector<int64_t> &modelShape)>;
void loadParameters(const std::string &path, const std::string &model,
                    const std::vector<OptimizerSlot> &slots,
                    std::vector<float> &params, bool ema = false,
                    const ParameterAdapter &adapt = nullptr);

} // namespace stringrt
