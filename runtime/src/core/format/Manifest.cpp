// Parsing and validating a package manifest (docs/package.md). The manifest
// is untrusted input: every JSON type, every value id, every op's operand and
// result counts and attributes are checked, so the executor can index its
// value table without further checks. This file: the manifest and its
// sections (inputs, parameters, optimizer, data set); ManifestPrograms.cpp:
// the programs and their ops; ManifestReader.h: the JSON access both use.
#include "format/ManifestReader.h"

#include "stringrt/OpSchema.h"

#include <set>

namespace stringrt {

using detail::JsonMember;
using detail::JsonValue;
using detail::quoteForMessage;
using detail::ManifestReader;
using detail::ParamIndex;
using detail::parseProgram;
using detail::checkProgramOutputs;

// ---------------------------------------------------------------------------
// Small helpers of the data types.

const char *paramInitName(ParamInit init) {
  switch (init) {
  case ParamInit::Normal:
    return "normal";
  case ParamInit::Uniform:
    return "uniform";
  case ParamInit::Zeros:
    return "zeros";
  case ParamInit::Ones:
    return "ones";
  case ParamInit::Constant:
    return "constant";
  case ParamInit::Load:
    return "load";
  }
  return "?";
}

const char *optimizerKindName(OptimizerKind kind) {
  return kind == OptimizerKind::Sgd ? "sgd" : "adamw";
}

const char *lrScheduleName(LrSchedule schedule) {
  return schedule == LrSchedule::WarmupCosine ? "warmup_cosine" : "constant";
}

const char *datasetKindName(DatasetKind kind) {
  return kind == DatasetKind::Text ? "text" : "idx";
}

int64_t ManifestParam::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

namespace {

template <typename T> const char *attrTypeName();
template <> const char *attrTypeName<int64_t>() { return "integer"; }
template <> const char *attrTypeName<double>() { return "number"; }
template <> const char *attrTypeName<bool>() { return "boolean"; }
template <> const char *attrTypeName<std::string>() { return "string"; }
template <> const char *attrTypeName<std::vector<int64_t>>() {
  return "integer array";
}

template <typename T>
const T &getAttr(const ProgramOp &op, std::string_view name) {
  auto it = op.attrs.find(std::string(name));
  if (it == op.attrs.end())
    throw Error(fmt::format("{}: no attribute '{}'", op.op, name));
  const T *value = std::get_if<T>(&it->second);
  if (!value)
    throw Error(fmt::format("{}: attribute '{}' is not a {}", op.op, name,
                            attrTypeName<T>()));
  return *value;
}

} // namespace

bool ProgramOp::is(OpCode code) const { return op == opName(code); }

bool ProgramOp::has(std::string_view name) const {
  return attrs.find(std::string(name)) != attrs.end();
}
int64_t ProgramOp::getInt(std::string_view name) const {
  return getAttr<int64_t>(*this, name);
}
double ProgramOp::getFloat(std::string_view name) const {
  return getAttr<double>(*this, name);
}
bool ProgramOp::getBool(std::string_view name) const {
  return getAttr<bool>(*this, name);
}
const std::string &ProgramOp::getString(std::string_view name) const {
  return getAttr<std::string>(*this, name);
}
const std::vector<int64_t> &ProgramOp::getInts(std::string_view name) const {
  return getAttr<std::vector<int64_t>>(*this, name);
}
std::optional<int64_t> ProgramOp::getOptionalInt(std::string_view name) const {
  if (!has(name))
    return std::nullopt;
  return getInt(name);
}

const ManifestParam *Manifest::findParam(std::string_view name) const {
  for (const ManifestParam &param : params)
    if (param.name == name)
      return &param;
  return nullptr;
}

const Program &Manifest::program(std::string_view name) const {
  if (name == "forward")
    return forward;
  if (name == "gradients")
    return gradients;
  throw Error(fmt::format("no program {} (expected forward or gradients)",
                          quoteForMessage(name)));
}

namespace {

// Parses with a location path for messages: "params[2].shape[1]".
class ManifestParser : public ManifestReader {
public:
  using ManifestReader::ManifestReader;

  Manifest parse(std::string_view text) {
    JsonValue root;
    try {
      root = detail::parseJson(text);
    } catch (const detail::JsonParseError &error) {
      fail(fmt::format("manifest is not valid JSON: {}", error.what()));
    }
    Manifest manifest;
    const std::string where = "manifest";
    checkKeys(root, where, {"model", "inputs", "params", "optimizer",
                            "dataset", "programs"},
              {"model", "inputs", "params", "optimizer", "programs"});
    manifest.model = getString(*member(root, "model"), where + ".model");
    parseInputs(*member(root, "inputs"), manifest);
    parseParams(*member(root, "params"), manifest);
    for (size_t i = 0; i < manifest.params.size(); ++i)
      paramIndex_.emplace(manifest.params[i].name, i);
    manifest.optimizer = parseOptimizer(*member(root, "optimizer"));
    if (const JsonValue *dataset = member(root, "dataset"))
      manifest.dataset = parseDataset(*dataset);

    const JsonValue &programs = *member(root, "programs");
    checkKeys(programs, "manifest.programs", {"forward", "gradients"},
              {"forward", "gradients"});
    manifest.forward =
        parseProgram(*this, *member(programs, "forward"), "forward", manifest, paramIndex_);
    manifest.gradients =
        parseProgram(*this, *member(programs, "gradients"), "gradients", manifest, paramIndex_);
    checkProgramOutputs(*this, manifest);
    return manifest;
  }

private:
  // --- Sections ----------------------------------------------------------

  void parseInputs(const JsonValue &inputs, Manifest &manifest) const {
    expectKind(inputs, JsonValue::Kind::Array, "manifest.inputs");
    std::set<std::string> names;
    for (size_t i = 0; i < inputs.elements.size(); ++i) {
      std::string where = fmt::format("manifest.inputs[{}]", i);
      const JsonValue &entry = inputs.elements[i];
      checkKeys(entry, where, {"name", "dtype", "shape"},
                {"name", "dtype", "shape"});
      ManifestInput input;
      input.name = getString(*member(entry, "name"), where + ".name");
      if (input.name.empty())
        fail(where + ".name", "empty name");
      if (!names.insert(input.name).second)
        fail(where + ".name",
             fmt::format("duplicate input {}", quoteForMessage(input.name)));
      input.dtype = getDType(*member(entry, "dtype"), where + ".dtype");
      input.shape = getShape(*member(entry, "shape"), where + ".shape", true);
      manifest.inputs.push_back(std::move(input));
    }
  }

  void parseParams(const JsonValue &params, Manifest &manifest) const {
    expectKind(params, JsonValue::Kind::Array, "manifest.params");
    std::set<std::string> names;
    int64_t total = 0;
    for (size_t i = 0; i < params.elements.size(); ++i) {
      auto where = [&] { return fmt::format("manifest.params[{}]", i); };
      const JsonValue &entry = params.elements[i];
      expectKind(entry, JsonValue::Kind::Object, where);
      const JsonValue *initValue = member(entry, "init");
      if (!initValue)
        fail(where, "missing key \"init\"");
      std::string init = getString(*initValue, [&] { return where() + ".init"; });
      ManifestParam param;
      // The companions of each initializer, all required, no others.
      if (init == "normal") {
        param.init = ParamInit::Normal;
        checkKeys(entry, where,
                  {"name", "shape", "frozen", "init", "mean", "std", "seed"},
                  {"name", "shape", "frozen", "init", "mean", "std", "seed"});
        param.mean = getDouble(*member(entry, "mean"), [&] { return where() + ".mean"; });
        param.std = getDouble(*member(entry, "std"), [&] { return where() + ".std"; });
        param.seed = getUInt(*member(entry, "seed"), [&] { return where() + ".seed"; });
        if (!(param.std > 0.0))
          fail([&] { return where() + ".std"; }, "must be > 0");
      } else if (init == "uniform") {
        param.init = ParamInit::Uniform;
        checkKeys(entry, where,
                  {"name", "shape", "frozen", "init", "low", "high", "seed"},
                  {"name", "shape", "frozen", "init", "low", "high", "seed"});
        param.low = getDouble(*member(entry, "low"), [&] { return where() + ".low"; });
        param.high = getDouble(*member(entry, "high"), [&] { return where() + ".high"; });
        param.seed = getUInt(*member(entry, "seed"), [&] { return where() + ".seed"; });
        if (!(param.low < param.high))
          fail(where, "uniform needs low < high");
      } else if (init == "zeros" || init == "ones") {
        param.init = init == "zeros" ? ParamInit::Zeros : ParamInit::Ones;
        checkKeys(entry, where, {"name", "shape", "frozen", "init"},
                  {"name", "shape", "frozen", "init"});
      } else if (init == "constant") {
        param.init = ParamInit::Constant;
        checkKeys(entry, where, {"name", "shape", "frozen", "init", "value"},
                  {"name", "shape", "frozen", "init", "value"});
        param.value = getDouble(*member(entry, "value"), [&] { return where() + ".value"; });
      } else if (init == "load") {
        param.init = ParamInit::Load;
        checkKeys(entry, where,
                  {"name", "shape", "frozen", "init", "file", "tensor"},
                  {"name", "shape", "frozen", "init", "file", "tensor"});
        param.file = getString(*member(entry, "file"), [&] { return where() + ".file"; });
        param.tensor = getString(*member(entry, "tensor"), [&] { return where() + ".tensor"; });
        if (param.file.empty())
          fail([&] { return where() + ".file"; }, "empty file name");
      } else {
        fail([&] { return where() + ".init"; },
             fmt::format("unknown initializer {} (expected normal, uniform, "
                         "zeros, ones, constant or load)",
                         quoteForMessage(init)));
      }
      param.name = getString(*member(entry, "name"), [&] { return where() + ".name"; });
      if (param.name.empty())
        fail([&] { return where() + ".name"; }, "empty name");
      if (!names.insert(param.name).second)
        fail([&] { return where() + ".name"; }, fmt::format("duplicate parameter {}",
                                          quoteForMessage(param.name)));
      param.shape = getShape(*member(entry, "shape"), [&] { return where() + ".shape"; }, false);
      param.frozen = getBool(*member(entry, "frozen"), [&] { return where() + ".frozen"; });
      int64_t numel = 1;
      for (int64_t dim : param.shape) {
        numel *= dim; // dims <= 2^31 and the running total is bounded below.
        if (numel > kMaxParamElements)
          break;
      }
      total += numel;
      if (numel > kMaxParamElements || total > kMaxParamElements)
        fail([&] { return where() + ".shape"; },
             fmt::format("the parameters exceed {} elements in total",
                         kMaxParamElements));
      manifest.params.push_back(std::move(param));
    }
  }

  ManifestOptimizer parseOptimizer(const JsonValue &value) const {
    const std::string where = "manifest.optimizer";
    // ema_decay is written only by models that keep an EMA of the weights.
    checkKeys(value, where,
              {"kind", "lr", "beta1", "beta2", "eps", "weight_decay",
               "momentum", "clip_norm", "schedule", "warmup_steps", "min_lr",
               "ema_decay"},
              {"kind", "lr", "beta1", "beta2", "eps", "weight_decay",
               "momentum", "clip_norm", "schedule", "warmup_steps", "min_lr"});
    ManifestOptimizer opt;
    std::string kind = getString(*member(value, "kind"), where + ".kind");
    if (kind == optimizerKindName(OptimizerKind::AdamW))
      opt.kind = OptimizerKind::AdamW;
    else if (kind == optimizerKindName(OptimizerKind::Sgd))
      opt.kind = OptimizerKind::Sgd;
    else
      fail(where + ".kind",
           fmt::format("unknown optimizer {} (expected adamw or sgd)",
                       quoteForMessage(kind)));
    auto number = [&](const char *key) {
      return getDouble(*member(value, key), where + "." + key);
    };
    opt.lr = number("lr");
    opt.beta1 = number("beta1");
    opt.beta2 = number("beta2");
    opt.eps = number("eps");
    opt.weightDecay = number("weight_decay");
    opt.momentum = number("momentum");
    opt.clipNorm = number("clip_norm");
    opt.minLr = number("min_lr");
    if (member(value, "ema_decay"))
      opt.emaDecay = number("ema_decay");
    opt.warmupSteps =
        getInt(*member(value, "warmup_steps"), where + ".warmup_steps");
    std::string schedule =
        getString(*member(value, "schedule"), where + ".schedule");
    if (schedule == lrScheduleName(LrSchedule::Constant))
      opt.schedule = LrSchedule::Constant;
    else if (schedule == lrScheduleName(LrSchedule::WarmupCosine))
      opt.schedule = LrSchedule::WarmupCosine;
    else
      fail(where + ".schedule",
           fmt::format("unknown schedule {} (expected constant or "
                       "warmup_cosine)",
                       quoteForMessage(schedule)));
    if (!(opt.lr > 0))
      fail(where + ".lr", "must be > 0");
    if (!(opt.beta1 >= 0 && opt.beta1 < 1))
      fail(where + ".beta1", "must be in [0, 1)");
    if (!(opt.beta2 >= 0 && opt.beta2 < 1))
      fail(where + ".beta2", "must be in [0, 1)");
    if (!(opt.eps > 0))
      fail(where + ".eps", "must be > 0");
    if (!(opt.weightDecay >= 0))
      fail(where + ".weight_decay", "must be >= 0");
    if (!(opt.momentum >= 0 && opt.momentum < 1))
      fail(where + ".momentum", "must be in [0, 1)");
    if (!(opt.clipNorm >= 0))
      fail(where + ".clip_norm", "must be >= 0");
    if (!(opt.emaDecay >= 0 && opt.emaDecay < 1))
      fail(where + ".ema_decay", "must be in [0, 1)");
    if (opt.warmupSteps < 0)
      fail(where + ".warmup_steps", "must be >= 0");
    if (!(opt.minLr >= 0 && opt.minLr <= opt.lr))
      fail(where + ".min_lr", "must be in [0, lr]");
    return opt;
  }

  ManifestDataset parseDataset(const JsonValue &value) const {
    const std::string where = "manifest.dataset";
    checkKeys(value, where, {"kind", "path", "context_length", "augment"},
              {"kind", "path", "context_length"});
    ManifestDataset dataset;
    std::string kind = getString(*member(value, "kind"), where + ".kind");
    if (kind == datasetKindName(DatasetKind::Idx))
      dataset.kind = DatasetKind::Idx;
    else if (kind == datasetKindName(DatasetKind::Text))
      dataset.kind = DatasetKind::Text;
    else
      fail(where + ".kind",
           fmt::format("unknown dataset kind {} (expected idx or text)",
                       quoteForMessage(kind)));
    dataset.path = getString(*member(value, "path"), where + ".path");
    if (dataset.path.empty())
      fail(where + ".path", "empty path");
    dataset.contextLength =
        getInt(*member(value, "context_length"), where + ".context_length");
    if (dataset.kind == DatasetKind::Text &&
        (dataset.contextLength < 1 || dataset.contextLength > kMaxDim))
      fail(where + ".context_length",
           fmt::format("must be in [1, {}] for a text dataset", kMaxDim));
    if (dataset.kind == DatasetKind::Idx && dataset.contextLength != 0)
      fail(where + ".context_length", "must be 0 for an idx dataset");
    if (const JsonValue *augment = member(value, "augment")) {
      if (dataset.kind != DatasetKind::Idx)
        fail(where + ".augment", "applies only to an idx dataset");
      dataset.augment = parseAugment(*augment, where + ".augment");
    }
    return dataset;
  }

  AugmentPolicy parseAugment(const JsonValue &value, const std::string &where) const {
    checkKeys(value, where, {"crop_padding", "flip", "erase"}, {"crop_padding", "flip", "erase"});
    AugmentPolicy policy;
    policy.cropPadding = getInt(*member(value, "crop_padding"), where + ".crop_padding");
    policy.flipProbability = getDouble(*member(value, "flip"), where + ".flip");
    policy.eraseProbability = getDouble(*member(value, "erase"), where + ".erase");
    try {
      checkAugmentPolicy(policy);
    } catch (const Error &e) {
      fail(where, e.what());
    }
    return policy;
  }

  // The parameters by name (a get_param per parameter: a search each would
  // make loading quadratic).
  ParamIndex paramIndex_;
};

} // namespace

bool isKnownOp(std::string_view op) { return findOpCode(op).has_value(); }

std::optional<int64_t> arenaSlotsBytes(const std::vector<std::pair<int64_t, int64_t>> &slots,
                                       int64_t batch, int64_t alignment) {
  int64_t total = 0;
  for (const auto &[perBatch, fixed] : slots) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(perBatch, batch, &bytes) ||
        __builtin_add_overflow(bytes, fixed + alignment - 1, &bytes) ||
        __builtin_add_overflow(total, bytes / alignment * alignment, &total))
      return std::nullopt;
  }
  return total;
}

Manifest parseManifest(std::string_view json, const std::string &path) {
  return ManifestParser(path).parse(json);
}

} // namespace stringrt
