#include "stringrt/Checkpoint.h"

#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"
#include "stringrt/reference/Tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <set>

#include <zlib.h>

namespace stringrt {

namespace {

const char *kindName(const Optimizer &optimizer) {
  return optimizer.isAdamW() ? "adamw" : "sgd";
}

void checkSlots(const std::string &path, const std::vector<OptimizerSlot> &slots,
                size_t total) {
  for (const OptimizerSlot &slot : slots) {
    if (slot.offset > total || slot.size > total - slot.offset ||
        static_cast<int64_t>(slot.size) != ref::shapeNumel(slot.shape))
      throw Error(path, fmt::format("parameter '{}' does not fit the {} "
                                    "parameters of the model",
                                    slot.name, total));
  }
}

template <typename Int>
Int parseInt(const std::string &path,
             const std::map<std::string, std::string> &meta, const char *key) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw Error(path, fmt::format("checkpoint metadata lacks '{}'", key));
  const std::string &text = it->second;
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw Error(path, fmt::format("checkpoint metadata '{}' is not an integer: "
                                  "\"{}\"",
                                  key, text));
  return value;
}

constexpr const char *kChecksumKey = "tensor_crc32";

// CRC-32 of `size` bytes, continuing `crc`.
uint32_t crcOf(uint32_t crc, const void *data, size_t size) {
  return static_cast<uint32_t>(
      ::crc32_z(crc, static_cast<const Bytef *>(data), static_cast<z_size_t>(size)));
}

std::string crcText(uint32_t crc) { return fmt::format("{:08x}", crc); }

// The metadata's numbers must describe a run that could have written them.
void checkConsistent(const std::string &path, const CheckpointInfo &info) {
  auto fail = [&](const std::string &what) {
    throw Error(path, "checkpoint metadata is inconsistent: " + what +
                          " (a damaged or edited checkpoint)");
  };
  if (info.step > 0 && info.totalSteps < info.step)
    fail(fmt::format("step {} of a run of total_steps {}", info.step, info.totalSteps));
  if (info.step > 0 && info.batch < 1)
    fail(fmt::format("step {} with batch {}", info.step, info.batch));
  if (info.epoch > info.step)
    fail(fmt::format("epoch {} after step {} (an epoch takes at least one step)", info.epoch,
                     info.step));
}

// Checks format and version; returns the metadata parsed.
CheckpointInfo infoOf(const SafetensorsFile &file) {
  const std::string &path = file.path();
  const auto &meta = file.metadata();
  auto format = meta.find("format");
  if (format == meta.end() || format->second != kCheckpointFormat)
    throw Error(path, fmt::format("not a stringc checkpoint (metadata format "
                                  "is {}, expected \"{}\")",
                                  format == meta.end()
                                      ? std::string("absent")
                                      : "\"" + format->second + "\"",
                                  kCheckpointFormat));
  int version = parseInt<int>(path, meta, "version");
  if (version < kOldestCheckpointVersion || version > kCheckpointVersion)
    throw Error(path, fmt::format("checkpoint format version {} is not "
                                  "supported (this runtime reads versions {} to {})",
                                  version, kOldestCheckpointVersion, kCheckpointVersion));
  if (version >= 2 && !meta.count(kChecksumKey))
    throw Error(path, fmt::format("checkpoint metadata lacks '{}'", kChecksumKey));
  CheckpointInfo info;
  auto model = meta.find("model");
  if (model == meta.end())
    throw Error(path, "checkpoint metadata lacks 'model'");
  info.model = model->second;
  info.step = parseInt<int64_t>(path, meta, "step");
  info.epoch = parseInt<int64_t>(path, meta, "epoch");
  info.dataSeed = parseInt<uint64_t>(path, meta, "data_seed");
  info.batch = parseInt<int64_t>(path, meta, "batch");
  info.totalSteps = parseInt<int64_t>(path, meta, "total_steps");
  if (info.step < 0 || info.epoch < 0 || info.batch < 0 || info.totalSteps < 0)
    throw Error(path, "checkpoint metadata has a negative step, epoch, batch "
                      "or total_steps");
  checkConsistent(path, info);
  return info;
}

// A version 2 checkpoint's tensors against its tensor_crc32 (version 1 has
// none). Reads every tensor once, in name order.
void verifyChecksum(const SafetensorsFile &file) {
  auto recorded = file.metadata().find(kChecksumKey);
  if (recorded == file.metadata().end())
    return;
  std::vector<const TensorInfo *> tensors;
  for (const TensorInfo &t : file.tensors())
    tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo *a, const TensorInfo *b) { return a->name < b->name; });
  uint32_t crc = crcOf(0, nullptr, 0);
  for (const TensorInfo *t : tensors) {
    std::vector<uint8_t> bytes = file.readBytes(t->name);
    crc = crcOf(crc, bytes.data(), bytes.size());
  }
  if (crcText(crc) != recorded->second)
    throw Error(file.path(), fmt::format("checkpoint data is corrupt: its tensors' CRC-32 is "
                                         "{}, the metadata records \"{}\" (a damaged or "
                                         "edited checkpoint)",
                                         crcText(crc), recorded->second));
}

void checkModel(const std::string &path, const CheckpointInfo &info,
                const std::string &model) {
  if (info.model != model)
    throw Error(path, fmt::format("checkpoint is of model '{}', not '{}'",
                                  info.model, model));
}

// Reads tensor `name` (F32 of `shape`) into `out`; one of another shape
// goes through `adapt` when there is one.
void readTensor(const SafetensorsFile &file, const std::string &name,
                const std::vector<int64_t> &shape, std::vector<float> &out,
                const ParameterAdapter *adapt = nullptr) {
  const TensorInfo *t = file.find(name);
  if (!t)
    throw Error(file.path(), fmt::format("tensor '{}' is missing", name));
  if (t->dtype != DType::F32)
    throw Error(file.path(), fmt::format("tensor '{}' is {}, expected F32",
                                         name, dtypeName(t->dtype)));
  if (t->shape != shape && adapt && *adapt) {
    out = (*adapt)(name, t->shape, file.readF32(name), shape);
    if (static_cast<int64_t>(out.size()) != ref::shapeNumel(shape))
      throw Error(file.path(), fmt::format("tensor '{}' was adapted to {} values, expected {}",
                                           name, out.size(), ref::shapeToString(shape)));
    return;
  }
  if (t->shape != shape)
    throw Error(file.path(),
                fmt::format("tensor '{}' has shape {}, expected {}", name,
                            ref::shapeToString(t->shape),
                            ref::shapeToString(shape)));
  out = file.readF32(name);
}

// Every slot's tensor `<prefix><name>` into a copy of `base` (only the slots'
// ranges change).
std::vector<float> readSlots(const SafetensorsFile &file,
                             const std::vector<OptimizerSlot> &slots,
                             const std::string &prefix, bool trainableOnly,
                             std::vector<float> base,
                             const ParameterAdapter *adapt = nullptr) {
  std::vector<float> values;
  for (const OptimizerSlot &slot : slots) {
    if (trainableOnly && slot.frozen)
      continue;
    readTensor(file, prefix + slot.name, slot.shape, values, adapt);
    std::memcpy(base.data() + slot.offset, values.data(),
                slot.size * sizeof(float));
  }
  return base;
}

// A checkpoint holds the whole state: a shard's (ZeRO-1) is gathered first.
void checkWholeState(const std::string &path, const Optimizer &optimizer) {
  if (!optimizer.holdsAllState())
    throw Error(path, fmt::format("the optimizer holds the state of elements [{}, {}) of {} "
                                  "only (a ZeRO-1 shard): a checkpoint takes the whole state",
                                  optimizer.stateBegin(), optimizer.stateEnd(),
                                  optimizer.totalSize()));
}

} // namespace

void saveCheckpoint(const std::string &path, const CheckpointInfo &info,
                    const std::vector<OptimizerSlot> &slots,
                    const std::vector<float> &params,
                    const Optimizer &optimizer) {
  checkSlots(path, slots, params.size());
  if (optimizer.totalSize() != params.size())
    throw Error(path, "the optimizer was built for another parameter buffer");
  checkWholeState(path, optimizer);
  if (info.step < 0 || info.epoch < 0 || info.batch < 0 || info.totalSteps < 0)
    throw Error(path, "a negative step, epoch, batch or total_steps");
  checkConsistent(path, info); // what would not load is not written
  std::vector<TensorView> views;
  for (const OptimizerSlot &slot : slots)
    views.push_back({slot.name, DType::F32, slot.shape,
                     params.data() + slot.offset});
  for (const auto &buffer : optimizer.stateBuffers())
    for (const OptimizerSlot &slot : slots)
      if (!slot.frozen)
        views.push_back({buffer.prefix + slot.name, DType::F32, slot.shape,
                         buffer.values->data() + slot.offset});
  // The checksum covers the tensors in name order (unique names).
  std::vector<const TensorView *> byName;
  for (const TensorView &v : views)
    byName.push_back(&v);
  std::sort(byName.begin(), byName.end(),
            [](const TensorView *a, const TensorView *b) { return a->name < b->name; });
  uint32_t crc = crcOf(0, nullptr, 0);
  for (const TensorView *v : byName)
    crc = crcOf(crc, v->data, static_cast<size_t>(ref::shapeNumel(v->shape)) * sizeof(float));
  std::map<std::string, std::string> meta = {
      {"format", kCheckpointFormat},
      {"version", std::to_string(kCheckpointVersion)},
      {"model", info.model},
      {"step", std::to_string(info.step)},
      {"epoch", std::to_string(info.epoch)},
      {"data_seed", std::to_string(info.dataSeed)},
      {"batch", std::to_string(info.batch)},
      {"total_steps", std::to_string(info.totalSteps)},
      {"optimizer", kindName(optimizer)},
      {kChecksumKey, crcText(crc)},
  };
  writeSafetensors(path, views, meta);
}

CheckpointInfo readCheckpointInfo(const std::string &path) {
  return infoOf(SafetensorsFile::open(path));
}

CheckpointInfo loadCheckpoint(const std::string &path, const std::string &model,
                              const std::vector<OptimizerSlot> &slots,
                              std::vector<float> &params,
                              Optimizer &optimizer) {
  SafetensorsFile file = SafetensorsFile::open(path);
  CheckpointInfo info = infoOf(file);
  checkModel(path, info, model);
  checkSlots(path, slots, params.size());
  verifyChecksum(file);
  if (optimizer.totalSize() != params.size())
    throw Error(path, "the optimizer was built for another parameter buffer");
  checkWholeState(path, optimizer);
  auto kind = file.metadata().find("optimizer");
  if (kind == file.metadata().end())
    throw Error(path, "checkpoint metadata lacks 'optimizer'");
  if (kind->second != kindName(optimizer))
    throw Error(path, fmt::format("checkpoint holds {} optimizer state but the "
                                  "model trains with {}",
                                  kind->second, kindName(optimizer)));

  // Every tensor must be one the model has.
  std::set<std::string> expected;
  auto buffers = optimizer.stateBuffers();
  for (const OptimizerSlot &slot : slots) {
    expected.insert(slot.name);
    if (!slot.frozen)
      for (const auto &buffer : buffers)
        expected.insert(buffer.prefix + slot.name);
  }
  for (const TensorInfo &t : file.tensors())
    if (!expected.count(t.name))
      throw Error(path, fmt::format("tensor '{}' is not a parameter or "
                                    "optimizer state of model '{}'",
                                    t.name, model));

  // Read everything first, then commit.
  std::vector<float> newParams = readSlots(file, slots, "", false, params);
  std::vector<std::vector<float>> newState;
  for (const auto &buffer : buffers)
    newState.push_back(
        readSlots(file, slots, buffer.prefix, true, *buffer.values));
  optimizer.setStepCount(info.step);
  params.swap(newParams);
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].values->swap(newState[i]);
  return info;
}

void loadParameters(const std::string &path, const std::string &model,
                    const std::vector<OptimizerSlot> &slots,
                    std::vector<float> &params, bool ema,
                    const ParameterAdapter &adapt) {
  SafetensorsFile file = SafetensorsFile::open(path);
  auto format = file.metadata().find("format");
  const bool checkpoint = format != file.metadata().end() && format->second == kCheckpointFormat;
  if (checkpoint) {
    CheckpointInfo info = infoOf(file);
    checkModel(path, info, model);
    verifyChecksum(file);
  }
  checkSlots(path, slots, params.size());
  std::vector<float> newParams = readSlots(file, slots, "", false, params, &adapt);
  if (ema) {
    auto trainable = std::find_if(slots.begin(), slots.end(),
                                  [](const OptimizerSlot &s) { return !s.frozen; });
    if (!checkpoint || (trainable != slots.end() && !file.find("ema." + trainable->name)))
      throw Error(path, "holds no EMA of the weights (only checkpoints of a model whose "
                        "optimizer has ema = d do)");
    newParams = readSlots(file, slots, "ema.", true, std::move(newParams), &adapt);
  }
  params.swap(newParams);
}

} // namespace stringrt
