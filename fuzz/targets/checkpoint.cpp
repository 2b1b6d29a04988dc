// Fuzz target: safetensors files as checkpoints and parameter files
// (Checkpoint.h, Safetensors.h), for a model shaped like
// tests/lit/stringc/Inputs/tiny_mlp.pe (one parameter frozen). Each input is
// opened as a safetensors file (every tensor read), as checkpoint metadata,
// as a checkpoint for AdamW and for SGD, and as a parameter file. The loaders
// promise to change nothing when they throw: that is checked too.
#include "FuzzFile.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Safetensors.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

const char *const kModel = "tiny_mlp";

std::vector<stringrt::OptimizerSlot> makeSlots(size_t &total) {
  struct Shape {
    const char *name;
    std::vector<int64_t> shape;
    bool frozen;
  };
  const Shape shapes[] = {{"w_patch", {16, 8}, false}, {"b_patch", {8}, false},
                          {"gain", {8}, true},          {"w_head", {8, 3}, false},
                          {"b_head", {3}, false}};
  std::vector<stringrt::OptimizerSlot> slots;
  total = 0;
  for (const Shape &s : shapes) {
    size_t size = 1;
    for (int64_t d : s.shape)
      size *= size_t(d);
    slots.push_back({s.name, s.shape, total, size, s.frozen});
    total += size;
  }
  return slots;
}

// Distinct values, so that a partly written buffer would be noticed.
std::vector<float> pattern(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * float(i + 1);
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void loadAsCheckpoint(const std::string &path, const std::vector<stringrt::OptimizerSlot> &slots,
                      size_t total, stringrt::OptimizerKind kind) {
  stringrt::ManifestOptimizer config;
  config.kind = kind;
  if (kind == stringrt::OptimizerKind::Sgd)
    config.momentum = 0.9;
  stringrt::Optimizer optimizer(config, slots, total);
  std::vector<float> params = pattern(total, 0.5f);
  const std::vector<float> paramsBefore = params;
  std::vector<std::vector<float>> stateBefore;
  for (const auto &buffer : optimizer.stateBuffers())
    stateBefore.push_back(*buffer.values);
  try {
    stringrt::CheckpointInfo info = stringrt::loadCheckpoint(path, kModel, slots, params, optimizer);
    if (info.model != kModel || optimizer.stepCount() != info.step || params.size() != total)
      std::abort();
  } catch (const stringrt::Error &) {
    bool untouched = sameBits(params, paramsBefore) && optimizer.stepCount() == 0;
    auto buffers = optimizer.stateBuffers();
    for (size_t i = 0; i < buffers.size(); ++i)
      untouched = untouched && sameBits(*buffers[i].values, stateBefore[i]);
    if (!untouched)
      std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static stringc::fuzz::FuzzFile file("model.ckpt");
  static size_t total = 0;
  static const std::vector<stringrt::OptimizerSlot> slots = makeSlots(total);
  file.write(data, size);
  const std::string &path = file.path();

  try {
    stringrt::SafetensorsFile st = stringrt::SafetensorsFile::open(path);
    for (const stringrt::TensorInfo &t : st.tensors()) {
      std::vector<uint8_t> bytes = st.readBytes(t.name);
      if (bytes.size() != t.end - t.begin)
        std::abort();
      if (t.dtype == stringrt::DType::F32 && st.readF32(t.name).size() != size_t(t.numel()))
        std::abort();
    }
  } catch (const stringrt::Error &) {
  }
  try {
    stringrt::readCheckpointInfo(path);
  } catch (const stringrt::Error &) {
  }
  loadAsCheckpoint(path, slots, total, stringrt::OptimizerKind::AdamW);
  loadAsCheckpoint(path, slots, total, stringrt::OptimizerKind::Sgd);

  std::vector<float> params = pattern(total, 0.25f);
  const std::vector<float> before = params;
  try {
    stringrt::loadParameters(path, kModel, slots, params);
  } catch (const stringrt::Error &) {
    if (!sameBits(params, before))
      std::abort();
  }
  return 0;
}
