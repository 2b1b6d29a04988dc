// writeManifestJson: a Manifest as the JSON text of a package's `manifest`
// metadata (docs/package.md), the inverse of parseManifest (Manifest.cpp).
// The compiler fills a Manifest and calls it, so the format is written in
// one place, beside its reader. Keys are written in a fixed order; optional
// members (a dataset, its augmentation, an EMA decay, an op's kernels, a
// program's arena) only when present, so packages without them keep their
// bytes.
#include "stringrt/Manifest.h"

#include "format/JsonWriter.h"

#include <type_traits>

namespace stringrt {

using detail::JsonWriter;

namespace {

void writeShape(JsonWriter &json, const char *dtypeKey, DType dtype,
                const std::vector<int64_t> &shape) {
  json.member(dtypeKey, dtype == DType::I32 ? "i32" : "f32");
  json.member("shape", shape);
}

void writeInputs(JsonWriter &json, const std::vector<ManifestInput> &inputs) {
  json.key("inputs");
  json.beginArray();
  for (const ManifestInput &input : inputs) {
    json.beginObject();
    json.member("name", input.name);
    writeShape(json, "dtype", input.dtype, input.shape);
    json.endObject();
  }
  json.endArray();
}

// Each initialiser's companions, exactly those parseManifest requires.
void writeParams(JsonWriter &json, const std::vector<ManifestParam> &params) {
  json.key("params");
  json.beginArray();
  for (const ManifestParam &param : params) {
    json.beginObject();
    json.member("name", param.name);
    json.member("shape", param.shape);
    json.member("frozen", param.frozen);
    json.member("init", paramInitName(param.init));
    switch (param.init) {
    case ParamInit::Normal:
      json.member("mean", param.mean);
      json.member("std", param.std);
      json.member("seed", param.seed);
      break;
    case ParamInit::Uniform:
      json.member("low", param.low);
      json.member("high", param.high);
      json.member("seed", param.seed);
      break;
    case ParamInit::Constant:
      json.member("value", param.value);
      break;
    case ParamInit::Load:
      json.member("file", param.file);
      json.member("tensor", param.tensor);
      break;
    case ParamInit::Zeros:
    case ParamInit::Ones:
      break;
    }
    json.endObject();
  }
  json.endArray();
}

void writeOptimizer(JsonWriter &json, const ManifestOptimizer &opt) {
  json.key("optimizer");
  json.beginObject();
  json.member("kind", optimizerKindName(opt.kind));
  json.member("lr", opt.lr);
  json.member("beta1", opt.beta1);
  json.member("beta2", opt.beta2);
  json.member("eps", opt.eps);
  json.member("weight_decay", opt.weightDecay);
  json.member("momentum", opt.momentum);
  json.member("clip_norm", opt.clipNorm);
  json.member("min_lr", opt.minLr);
  if (opt.emaDecay > 0)
    json.member("ema_decay", opt.emaDecay);
  json.member("schedule", lrScheduleName(opt.schedule));
  json.member("warmup_steps", opt.warmupSteps);
  json.endObject();
}

void writeDataset(JsonWriter &json, const ManifestDataset &dataset) {
  json.key("dataset");
  json.beginObject();
  json.member("kind", datasetKindName(dataset.kind));
  json.member("path", dataset.path);
  json.member("context_length", dataset.contextLength);
  if (dataset.augment.enabled()) {
    json.key("augment");
    json.beginObject();
    json.member("crop_padding", dataset.augment.cropPadding);
    json.member("flip", dataset.augment.flipProbability);
    json.member("erase", dataset.augment.eraseProbability);
    json.endObject();
  }
  json.endObject();
}

void writeAttr(JsonWriter &json, const AttrValue &value) {
  std::visit([&](const auto &v) { json.value(v); }, value);
}

void writeOp(JsonWriter &json, const ProgramOp &op) {
  json.beginObject();
  json.member("op", op.op);
  json.key("results");
  json.beginArray();
  for (ValueId id : op.results)
    json.value(uint64_t(id));
  json.endArray();
  json.key("operands");
  json.beginArray();
  for (ValueId id : op.operands)
    json.value(uint64_t(id));
  json.endArray();
  json.key("attrs");
  json.beginObject();
  for (const auto &[name, value] : op.attrs) {
    json.key(name);
    writeAttr(json, value);
  }
  json.endObject();
  if (!op.kernels.empty()) {
    json.key("kernels");
    json.beginArray();
    for (const ProgramKernel &kernel : op.kernels) {
      json.beginObject();
      json.member("symbol", kernel.symbol);
      json.member("range", kernel.range);
      json.member("grain", kernel.grain);
      json.endObject();
    }
    json.endArray();
  }
  json.endObject();
}

void writeArena(JsonWriter &json, const ProgramArena &arena) {
  json.key("arena");
  json.beginObject();
  json.key("slots");
  json.beginArray();
  for (const auto &[perBatch, fixed] : arena.slots) {
    json.beginArray();
    json.value(perBatch);
    json.value(fixed);
    json.endArray();
  }
  json.endArray();
  json.member("value_slot", arena.valueSlot);
  json.key("report");
  json.beginObject();
  json.member("batch", arena.reportBatch);
  json.member("arena_bytes", arena.arenaBytes);
  json.member("no_reuse_bytes", arena.noReuseBytes);
  json.endObject();
  json.endObject();
}

void writeProgram(JsonWriter &json, const char *name, const Program &program) {
  json.key(name);
  json.beginObject();
  json.key("values");
  json.beginArray();
  for (const ProgramValue &value : program.values) {
    json.beginObject();
    writeShape(json, "dtype", value.dtype, value.shape);
    json.endObject();
  }
  json.endArray();
  json.key("inputs");
  json.beginArray();
  for (ValueId id : program.inputs)
    json.value(uint64_t(id));
  json.endArray();
  json.key("ops");
  json.beginArray();
  for (const ProgramOp &op : program.ops)
    writeOp(json, op);
  json.endArray();
  json.key("outputs");
  json.beginArray();
  for (const ProgramOutput &output : program.outputs) {
    json.beginObject();
    if (output.isGrad())
      json.member("grad", output.grad);
    else
      json.member("name", output.name);
    json.member("value", uint64_t(output.value));
    json.endObject();
  }
  json.endArray();
  if (program.arena)
    writeArena(json, *program.arena);
  json.endObject();
}

} // namespace

std::string writeManifestJson(const Manifest &manifest) {
  JsonWriter json;
  json.beginObject();
  json.member("model", manifest.model);
  writeInputs(json, manifest.inputs);
  writeParams(json, manifest.params);
  writeOptimizer(json, manifest.optimizer);
  if (manifest.dataset)
    writeDataset(json, *manifest.dataset);
  json.key("programs");
  json.beginObject();
  writeProgram(json, "forward", manifest.forward);
  writeProgram(json, "gradients", manifest.gradients);
  json.endObject();
  json.endObject();
  return json.take();
}

} // namespace stringrt
