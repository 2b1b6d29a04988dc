// Parsing and validating a package manifest (docs/package.md). The manifest
// is untrusted input: every JSON type, every value id, every op's operand and
// result counts and attributes are checked here, so the executor can index
// its value table without further checks.
#include "stringrt/Manifest.h"
#include "stringrt/ManifestLimits.h"
#include "stringrt/OpSchema.h"

#include "format/Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

namespace stringrt {

using detail::JsonMember;
using detail::JsonValue;
using detail::quoteForMessage;

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

// kMaxRank, kMaxDim, kMaxParamElements and kMaxExampleElements (every
// shape's elements but the batch: times a batch <= 2^31, every size fits an
// int64_t): ManifestLimits.h, shared with the compiler, which refuses models
// beyond them.

template <typename T> std::string shapeText(const std::vector<T> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The numbers of a JSON array as written, for a message.
std::vector<std::string> jsonInts(const JsonValue &array) {
  std::vector<std::string> texts;
  for (const JsonValue &e : array.elements)
    texts.push_back(e.text);
  return texts;
}

// The values an integer attribute (or each element of an integer array
// attribute) may take, by name: sizes and counts in [1, 2^31], indices and
// offsets within 2^31 (what any shape allows), an axis within the rank
// limit; a seed is any 64-bit integer. Bounded values keep every product and
// difference a kernel computes with them inside int64_t.
std::pair<int64_t, int64_t> intAttrRange(std::string_view name) {
  if (name == "patch" || name == "heads" || name == "size" || name == "length" ||
      name == "rows" || name == "cols" || name == "dim")
    return {1, kMaxDim};
  if (name == "index" || name == "special" || name == "skip_base" || name == "support")
    return {0, kMaxDim};
  if (name == "axis")
    return {0, int64_t(kMaxRank)};
  if (name == "offsets")
    return {-kMaxDim, kMaxDim};
  return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
}

const char *dtypeKeyword(DType dtype) {
  return dtype == DType::I32 ? "i32" : "f32";
}

// Where a JSON value is in the manifest ("manifest.programs.forward.ops[3]
// (pe.relu).operands[1]"), for messages: a string, or a function that builds
// one, called only when a message needs it (building a location for every
// value and op made loading a package of 200,000 parameters slow). It
// refers to its string or function: pass it down, never keep it.
class Where {
public:
  Where(const std::string &text) : text_(&text) {}
  Where(const char *literal) : literal_(literal) {}
  template <typename Build,
            typename = decltype(std::string(std::declval<const Build &>()()))>
  Where(const Build &build)
      : build_(&build), call_([](const void *b) {
          return (*static_cast<const Build *>(b))();
        }) {}

  std::string str() const {
    return text_ ? *text_ : literal_ ? std::string(literal_) : call_(build_);
  }

private:
  const std::string *text_ = nullptr;
  const char *literal_ = nullptr;
  const void *build_ = nullptr;
  std::string (*call_)(const void *) = nullptr;
};

// Parses with a location path for messages: "params[2].shape[1]".
class ManifestParser {
public:
  explicit ManifestParser(const std::string &path) : path_(path) {}

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
    manifest.forward = parseProgram(*member(programs, "forward"), "forward",
                                    manifest);
    manifest.gradients = parseProgram(*member(programs, "gradients"),
                                      "gradients", manifest);
    checkForwardOutputs(manifest);
    checkGradientOutputs(manifest);
    return manifest;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path_, what);
  }
  [[noreturn]] void fail(const Where &where, const std::string &what) const {
    throw Error(path_, where.str() + ": " + what);
  }

  // --- JSON access -------------------------------------------------------

  void expectKind(const JsonValue &value, JsonValue::Kind kind,
                  const Where &where) const {
    if (value.kind != kind)
      fail(where, fmt::format("expected {}, got {}", detail::jsonKindName(kind),
                              detail::jsonKindName(value.kind)));
  }

  // Checks that `object` is an object whose keys are all in `allowed`,
  // unique, and include every key of `required`.
  // (A bit per allowed key: no allocation per object.)
  void checkKeys(const JsonValue &object, const Where &where,
                 std::initializer_list<const char *> allowed,
                 std::initializer_list<const char *> required) const {
    expectKind(object, JsonValue::Kind::Object, where);
    uint64_t seen = 0;
    for (const JsonMember &m : object.members) {
      size_t index = 0;
      for (const char *key : allowed) {
        if (m.key == key)
          break;
        ++index;
      }
      if (index == allowed.size())
        fail(where, fmt::format("unknown key {}", quoteForMessage(m.key)));
      if (seen & (uint64_t(1) << index))
        fail(where, fmt::format("duplicate key {}", quoteForMessage(m.key)));
      seen |= uint64_t(1) << index;
    }
    for (const char *key : required)
      if (!member(object, key))
        fail(where, fmt::format("missing key \"{}\"", key));
  }

  static const JsonValue *member(const JsonValue &object,
                                 std::string_view key) {
    for (const JsonMember &m : object.members)
      if (m.key == key)
        return &m.value;
    return nullptr;
  }

  std::string getString(const JsonValue &value,
                        const Where &where) const {
    expectKind(value, JsonValue::Kind::String, where);
    return value.text;
  }
  bool getBool(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Bool, where);
    return value.boolean;
  }
  int64_t getInt(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Number, where);
    std::optional<int64_t> result = value.asInt64();
    if (!result)
      fail(where, fmt::format("expected a 64-bit integer, got {}",
                              value.text));
    return *result;
  }
  uint64_t getUInt(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Number, where);
    std::optional<uint64_t> result = value.asUInt64();
    if (!result)
      fail(where, fmt::format("expected an unsigned 64-bit integer, got {}",
                              value.text));
    return *result;
  }
  double getDouble(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Number, where);
    double result = 0.0;
    const char *begin = value.text.data();
    const char *end = begin + value.text.size();
    auto [ptr, ec] = std::from_chars(begin, end, result);
    if (ec != std::errc() || ptr != end || !std::isfinite(result))
      fail(where, fmt::format("number {} is out of range", value.text));
    return result;
  }
  // An integer attribute's value, in the range its name allows.
  int64_t getAttrInt(const JsonValue &value, std::string_view name,
                     const Where &where) const {
    const int64_t v = getInt(value, where);
    const auto [low, high] = intAttrRange(name);
    if (v < low || v > high)
      fail(where, fmt::format("{} is out of range [{}, {}]", v, low, high));
    return v;
  }
  ValueId getId(const JsonValue &value, size_t valueCount,
                const Where &where) const {
    int64_t id = getInt(value, where);
    if (id < 0 || uint64_t(id) >= valueCount)
      fail(where, fmt::format("value id {} out of range (the program has {} "
                              "values)",
                              id, valueCount));
    return ValueId(id);
  }

  std::vector<int64_t> getShape(const JsonValue &value, const Where &where,
                                bool allowBatch) const {
    expectKind(value, JsonValue::Kind::Array, where);
    if (value.elements.size() > kMaxRank)
      fail(where, fmt::format("rank {} exceeds the limit {}",
                              value.elements.size(), kMaxRank));
    std::vector<int64_t> shape;
    int batchDims = 0;
    int64_t elements = 1; // of the dimensions but the batch
    for (size_t i = 0; i < value.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}[{}]", where.str(), i); };
      int64_t dim = getInt(value.elements[i], at);
      if (dim == kBatchDim && allowBatch) {
        if (++batchDims > 1)
          fail(where, "more than one batch dimension (-1)");
      } else if (dim < 1 || dim > kMaxDim) {
        fail(at, fmt::format("dimension {} out of range [1, {}]{}", dim,
                             kMaxDim, allowBatch ? " (or -1, the batch)" : ""));
      } else {
        // Dimensions <= 2^31 and the running product <= 2^32: no overflow.
        elements *= dim;
        if (elements > kMaxExampleElements)
          fail(where, fmt::format("{} has more than {} elements{}",
                                  shapeText(jsonInts(value)), kMaxExampleElements,
                                  allowBatch ? " (besides the batch)" : ""));
      }
      shape.push_back(dim);
    }
    return shape;
  }

  DType getDType(const JsonValue &value, const Where &where) const {
    std::string name = getString(value, where);
    if (name == "f32")
      return DType::F32;
    if (name == "i32")
      return DType::I32;
    fail(where, fmt::format("unknown dtype {} (expected f32 or i32)",
                            quoteForMessage(name)));
  }

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

  // --- Programs ----------------------------------------------------------

  Program parseProgram(const JsonValue &value, const std::string &name,
                       const Manifest &manifest) const {
    const std::string where = "manifest.programs." + name;
    checkKeys(value, where, {"values", "inputs", "ops", "outputs", "arena"},
              {"values", "inputs", "ops", "outputs"});
    Program program;

    const JsonValue &values = *member(value, "values");
    expectKind(values, JsonValue::Kind::Array, where + ".values");
    for (size_t i = 0; i < values.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}.values[{}]", where, i); };
      const JsonValue &entry = values.elements[i];
      checkKeys(entry, at, {"dtype", "shape"}, {"dtype", "shape"});
      ProgramValue v;
      v.dtype = getDType(*member(entry, "dtype"), [&] { return at() + ".dtype"; });
      v.shape = getShape(*member(entry, "shape"), [&] { return at() + ".shape"; }, true);
      program.values.push_back(std::move(v));
    }
    const size_t count = program.values.size();
    std::vector<bool> defined(count, false);
    auto define = [&](ValueId id, const Where &at) {
      if (defined[id])
        fail(at, fmt::format("value {} is defined twice", id));
      defined[id] = true;
    };

    const JsonValue &inputs = *member(value, "inputs");
    expectKind(inputs, JsonValue::Kind::Array, where + ".inputs");
    if (inputs.elements.size() != manifest.inputs.size())
      fail(where + ".inputs",
           fmt::format("{} inputs, but the manifest declares {}",
                       inputs.elements.size(), manifest.inputs.size()));
    for (size_t i = 0; i < inputs.elements.size(); ++i) {
      std::string at = fmt::format("{}.inputs[{}]", where, i);
      ValueId id = getId(inputs.elements[i], count, at);
      define(id, at);
      const ManifestInput &input = manifest.inputs[i];
      const ProgramValue &v = program.values[id];
      if (v.dtype != input.dtype || v.shape != input.shape)
        fail(at, fmt::format("value {} is {} {} but input {} is {} {}", id,
                             dtypeKeyword(v.dtype), shapeText(v.shape),
                             quoteForMessage(input.name),
                             dtypeKeyword(input.dtype),
                             shapeText(input.shape)));
      program.inputs.push_back(id);
    }

    const JsonValue &ops = *member(value, "ops");
    expectKind(ops, JsonValue::Kind::Array, where + ".ops");
    for (size_t i = 0; i < ops.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}.ops[{}]", where, i); };
      program.ops.push_back(
          parseOp(ops.elements[i], at, program, defined, manifest));
      for (ValueId id : program.ops.back().results)
        define(id, at);
    }
    for (size_t id = 0; id < count; ++id)
      if (!defined[id])
        fail(where + ".values",
             fmt::format("value {} is never defined", id));

    const JsonValue &outputs = *member(value, "outputs");
    expectKind(outputs, JsonValue::Kind::Array, where + ".outputs");
    std::set<std::string> keys;
    for (size_t i = 0; i < outputs.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}.outputs[{}]", where, i); };
      const JsonValue &entry = outputs.elements[i];
      expectKind(entry, JsonValue::Kind::Object, at);
      ProgramOutput output;
      if (member(entry, "grad")) {
        auto atGrad = [&] { return at() + ".grad"; };
        checkKeys(entry, at, {"grad", "value"}, {"grad", "value"});
        output.grad = getString(*member(entry, "grad"), atGrad);
        if (output.grad.empty())
          fail(atGrad, "empty parameter name");
      } else {
        auto atName = [&] { return at() + ".name"; };
        checkKeys(entry, at, {"name", "value"}, {"name", "value"});
        output.name = getString(*member(entry, "name"), atName);
        if (output.name.empty())
          fail(atName, "empty name");
      }
      output.value = getId(*member(entry, "value"), count, [&] { return at() + ".value"; });
      if (!keys.insert(output.key()).second)
        fail(at, fmt::format("duplicate output {}",
                             quoteForMessage(output.key())));
      program.outputs.push_back(std::move(output));
    }
    if (program.outputs.empty() || program.outputs[0].name != "loss")
      fail(where + ".outputs", "the first output must be \"loss\"");
    const ProgramValue &loss = program.values[program.outputs[0].value];
    if (loss.dtype != DType::F32 || !loss.shape.empty())
      fail(where + ".outputs[0]",
           fmt::format("the loss must be an f32 scalar, got {} {}",
                       dtypeKeyword(loss.dtype), shapeText(loss.shape)));
    if (const JsonValue *arena = member(value, "arena"))
      program.arena = parseArena(*arena, where + ".arena", count);
    return program;
  }

  // A program's "arena" (structure only; the executor checks liveness).
  ProgramArena parseArena(const JsonValue &value, const std::string &where,
                          size_t valueCount) const {
    checkKeys(value, where, {"slots", "value_slot", "report"},
              {"slots", "value_slot", "report"});
    ProgramArena arena;
    const JsonValue &slots = *member(value, "slots");
    expectKind(slots, JsonValue::Kind::Array, where + ".slots");
    for (size_t i = 0; i < slots.elements.size(); ++i) {
      std::string at = fmt::format("{}.slots[{}]", where, i);
      const JsonValue &slot = slots.elements[i];
      expectKind(slot, JsonValue::Kind::Array, at);
      if (slot.elements.size() != 2)
        fail(at, "a slot is [per_batch, fixed]");
      int64_t perBatch = getInt(slot.elements[0], at + "[0]");
      int64_t fixed = getInt(slot.elements[1], at + "[1]");
      // A slot holds values of at most kMaxExampleElements (besides the batch).
      if (perBatch < 0 || fixed < 0 || perBatch > kMaxExampleElements || fixed > kMaxExampleElements)
        fail(at, fmt::format("slot size [{}, {}] out of range", perBatch,
                             fixed));
      arena.slots.push_back({perBatch, fixed});
    }
    const JsonValue &valueSlot = *member(value, "value_slot");
    expectKind(valueSlot, JsonValue::Kind::Array, where + ".value_slot");
    if (valueSlot.elements.size() != valueCount)
      fail(where + ".value_slot",
           fmt::format("{} entries, the program has {} values",
                       valueSlot.elements.size(), valueCount));
    for (size_t v = 0; v < valueCount; ++v) {
      std::string at = fmt::format("{}.value_slot[{}]", where, v);
      int64_t s = getInt(valueSlot.elements[v], at);
      if (s < -1 || s >= int64_t(arena.slots.size()))
        fail(at, fmt::format("slot {} out of range (the plan has {} slots)",
                             s, arena.slots.size()));
      arena.valueSlot.push_back(s);
    }
    const JsonValue &report = *member(value, "report");
    checkKeys(report, where + ".report",
              {"batch", "arena_bytes", "no_reuse_bytes"},
              {"batch", "arena_bytes", "no_reuse_bytes"});
    arena.reportBatch = getInt(*member(report, "batch"), where + ".report.batch");
    arena.arenaBytes =
        getInt(*member(report, "arena_bytes"), where + ".report.arena_bytes");
    arena.noReuseBytes = getInt(*member(report, "no_reuse_bytes"),
                                where + ".report.no_reuse_bytes");
    if (arena.reportBatch < 1 || arena.reportBatch > (int64_t(1) << 20))
      fail(where + ".report.batch",
           fmt::format("batch {} out of range", arena.reportBatch));
    return arena;
  }

  // An op's "kernels" (target cpu): [{"symbol", "range", "grain"}, ...].
  std::vector<ProgramKernel> parseKernels(const JsonValue &value,
                                          const std::string &where,
                                          const Program &program,
                                          const ProgramOp &op) const {
    expectKind(value, JsonValue::Kind::Array, where);
    if (value.elements.empty())
      fail(where, "empty (leave \"kernels\" out instead)");
    bool batched = false; // whether the op's values have the batch dimension
    for (const auto *ids : {&op.operands, &op.results})
      for (ValueId id : *ids)
        for (int64_t d : program.values[id].shape)
          batched = batched || d == kBatchDim;
    std::vector<ProgramKernel> kernels;
    for (size_t i = 0; i < value.elements.size(); ++i) {
      std::string at = fmt::format("{}[{}]", where, i);
      const JsonValue &entry = value.elements[i];
      checkKeys(entry, at, {"symbol", "range", "grain"},
                {"symbol", "range", "grain"});
      ProgramKernel k;
      k.symbol = getString(*member(entry, "symbol"), at + ".symbol");
      bool identifier = !k.symbol.empty() && !std::isdigit(
                                                 static_cast<unsigned char>(k.symbol[0]));
      for (char c : k.symbol)
        identifier = identifier &&
                     (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      if (!identifier)
        fail(at + ".symbol", fmt::format("{} is not a C identifier",
                                         quoteForMessage(k.symbol)));
      k.range = getInt(*member(entry, "range"), at + ".range");
      if (k.range != kBatchDim && (k.range < 1 || k.range > kMaxDim))
        fail(at + ".range",
             fmt::format("must be -1 (the batch) or in [1, {}]", kMaxDim));
      if (k.range == kBatchDim && !batched)
        fail(at + ".range", "is the batch (-1), but no value of the op has "
                            "a batch dimension");
      k.grain = getInt(*member(entry, "grain"), at + ".grain");
      if (k.grain < 1 || k.grain > kMaxDim)
        fail(at + ".grain", fmt::format("must be in [1, {}]", kMaxDim));
      kernels.push_back(std::move(k));
    }
    return kernels;
  }

  ProgramOp parseOp(const JsonValue &entry, const Where &at,
                    const Program &program, const std::vector<bool> &defined,
                    const Manifest &manifest) const {
    checkKeys(entry, at, {"op", "results", "operands", "attrs", "kernels"},
              {"op", "results", "operands", "attrs"});
    ProgramOp op;
    auto atOp = [&] { return at.str() + ".op"; };
    op.op = getString(*member(entry, "op"), atOp);
    std::optional<OpCode> code = findOpCode(op.op);
    if (!code)
      fail(atOp, fmt::format("unknown op {} for target cpu-reference",
                             quoteForMessage(op.op)));
    const OpSchema *schema = &opSchema(*code);
    auto where = [&] { return at.str() + " (" + op.op + ")"; };
    const size_t count = program.values.size();

    const JsonValue &operands = *member(entry, "operands");
    expectKind(operands, JsonValue::Kind::Array, [&] { return where() + ".operands"; });
    for (size_t i = 0; i < operands.elements.size(); ++i) {
      auto atOperand = [&] { return fmt::format("{}.operands[{}]", where(), i); };
      ValueId id = getId(operands.elements[i], count, atOperand);
      if (!defined[id])
        fail(atOperand, fmt::format("value {} is used before it is defined",
                                    id));
      op.operands.push_back(id);
    }
    const int numOperands = int(op.operands.size());
    if (numOperands < schema->minOperands || numOperands > schema->maxOperands)
      fail(where, schema->minOperands == schema->maxOperands
                      ? fmt::format("expected {} operands, got {}",
                                    schema->minOperands, numOperands)
                      : fmt::format("expected {} to {} operands, got {}",
                                    schema->minOperands, schema->maxOperands,
                                    numOperands));
    for (int i = 0; i < numOperands; ++i) {
      DType want = schema->operandTypes[i] == 'i' ? DType::I32 : DType::F32;
      const ProgramValue &v = program.values[op.operands[i]];
      if (v.dtype != want)
        fail(where, fmt::format("operand {} (value {}) must be {}, got {}", i,
                                op.operands[i], dtypeKeyword(want),
                                dtypeKeyword(v.dtype)));
    }

    const JsonValue &results = *member(entry, "results");
    expectKind(results, JsonValue::Kind::Array, [&] { return where() + ".results"; });
    for (size_t i = 0; i < results.elements.size(); ++i) {
      auto atResult = [&] { return fmt::format("{}.results[{}]", where(), i); };
      ValueId id = getId(results.elements[i], count, atResult);
      if (defined[id])
        fail(atResult, fmt::format("value {} is defined twice", id));
      for (ValueId earlier : op.results)
        if (earlier == id)
          fail(atResult, fmt::format("value {} is defined twice", id));
      if (program.values[id].dtype != DType::F32)
        fail(atResult, fmt::format("result value {} must be f32", id));
      op.results.push_back(id);
    }
    const int wantResults = schema->resultCount(numOperands);
    if (int(op.results.size()) != wantResults)
      fail(where, fmt::format("expected {} results, got {}", wantResults,
                              op.results.size()));

    parseAttrs(*member(entry, "attrs"), where, *schema, op);
    if (const JsonValue *kernels = member(entry, "kernels"))
      op.kernels = parseKernels(*kernels, where() + ".kernels", program, op);

    // Ops whose result shape the manifest's own tables fix.
    if (op.is(OpCode::GetParam)) {
      const std::string &name = op.getString("param");
      auto found = paramIndex_.find(name);
      if (found == paramIndex_.end())
        fail(where, fmt::format("unknown parameter {}",
                                quoteForMessage(name)));
      const ManifestParam *param = &manifest.params[found->second];
      const ProgramValue &v = program.values[op.results[0]];
      if (v.shape != param->shape)
        fail(where, fmt::format("result value {} has shape {} but parameter "
                                "{} has shape {}",
                                op.results[0], shapeText(v.shape),
                                quoteForMessage(name),
                                shapeText(param->shape)));
    }
    if (op.is(OpCode::CrossEntropy) || op.is(OpCode::CommutatorNorm)) {
      const ProgramValue &v = program.values[op.results[0]];
      if (!v.shape.empty())
        fail(where, fmt::format("result value {} must be a scalar, got {}",
                                op.results[0], shapeText(v.shape)));
    }
    return op;
  }

  void parseAttrs(const JsonValue &attrs, const Where &where,
                  const OpSchema &schema, ProgramOp &op) const {
    expectKind(attrs, JsonValue::Kind::Object, [&] { return where.str() + ".attrs"; });
    uint64_t seen = 0; // a bit per attribute of the schema
    for (const JsonMember &m : attrs.members) {
      const AttrSchema *spec = nullptr;
      size_t index = 0;
      for (size_t a = 0; a < schema.attrs.size(); ++a)
        if (m.key == schema.attrs[a].name) {
          spec = &schema.attrs[a];
          index = a;
        }
      if (!spec)
        fail(where, fmt::format("unknown attribute {}",
                                quoteForMessage(m.key)));
      if (seen & (uint64_t(1) << index))
        fail(where, fmt::format("duplicate attribute {}",
                                quoteForMessage(m.key)));
      seen |= uint64_t(1) << index;
      auto at = [&] { return where.str() + ".attrs." + m.key; };
      const JsonValue &v = m.value;
      switch (spec->kind) {
      case AttrKind::Int:
        op.attrs[m.key] = getAttrInt(v, m.key, at);
        break;
      case AttrKind::Float:
        op.attrs[m.key] = getDouble(v, at);
        break;
      case AttrKind::Bool:
        op.attrs[m.key] = getBool(v, at);
        break;
      case AttrKind::String:
        op.attrs[m.key] = getString(v, at);
        break;
      case AttrKind::Ints: {
        expectKind(v, JsonValue::Kind::Array, at);
        std::vector<int64_t> ints;
        for (size_t i = 0; i < v.elements.size(); ++i)
          ints.push_back(getAttrInt(v.elements[i], m.key,
                                    [&] { return fmt::format("{}[{}]", at(), i); }));
        op.attrs[m.key] = std::move(ints);
        break;
      }
      case AttrKind::Enum: {
        std::string word = getString(v, at);
        bool known = false;
        for (const char *keyword : spec->keywords)
          known = known || word == keyword;
        if (!known)
          fail(at, fmt::format("unknown keyword {} (expected {})",
                               quoteForMessage(word),
                               fmt::join(spec->keywords, ", ")));
        op.attrs[m.key] = std::move(word);
        break;
      }
      }
    }
    for (size_t a = 0; a < schema.attrs.size(); ++a) {
      const AttrSchema &attr = schema.attrs[a];
      if (seen & (uint64_t(1) << a))
        continue;
      if (attr.required)
        fail(where, fmt::format("missing attribute \"{}\"", attr.name));
      // An absent DefaultValuedAttr has its default, as in the compiler's IR.
      if (attr.defaultValue) {
        if (attr.kind == AttrKind::Int)
          op.attrs[attr.name] = static_cast<int64_t>(*attr.defaultValue);
        else if (attr.kind == AttrKind::Bool)
          op.attrs[attr.name] = *attr.defaultValue != 0.0;
        else
          op.attrs[attr.name] = *attr.defaultValue;
      }
    }
  }

  // --- Outputs across programs --------------------------------------------

  void checkForwardOutputs(const Manifest &manifest) const {
    for (size_t i = 0; i < manifest.forward.outputs.size(); ++i)
      if (manifest.forward.outputs[i].isGrad())
        fail(fmt::format("manifest.programs.forward.outputs[{}]", i),
             "the forward program has no gradient outputs");
  }

  void checkGradientOutputs(const Manifest &manifest) const {
    const std::string where = "manifest.programs.gradients.outputs";
    const Program &program = manifest.gradients;
    std::vector<const ManifestParam *> trainable;
    for (const ManifestParam &param : manifest.params)
      if (!param.frozen)
        trainable.push_back(&param);
    if (program.outputs.size() != trainable.size() + 1)
      fail(where, fmt::format("expected the loss and {} gradients (one per "
                              "trainable parameter), got {} outputs",
                              trainable.size(), program.outputs.size()));
    for (size_t i = 0; i < trainable.size(); ++i) {
      const ProgramOutput &output = program.outputs[i + 1];
      std::string at = fmt::format("{}[{}]", where, i + 1);
      if (output.grad != trainable[i]->name)
        fail(at, fmt::format("expected the gradient of trainable parameter "
                             "{}, got {}",
                             quoteForMessage(trainable[i]->name),
                             output.isGrad()
                                 ? "the gradient of " +
                                       quoteForMessage(output.grad)
                                 : "output " + quoteForMessage(output.name)));
      const ProgramValue &v = program.values[output.value];
      if (v.dtype != DType::F32 || v.shape != trainable[i]->shape)
        fail(at, fmt::format("gradient value {} is {} {} but parameter {} has "
                             "shape {}",
                             output.value, dtypeKeyword(v.dtype),
                             shapeText(v.shape),
                             quoteForMessage(trainable[i]->name),
                             shapeText(trainable[i]->shape)));
    }
  }

  const std::string &path_;
  // The parameters by name (a get_param per parameter: a search each would
  // make loading quadratic).
  std::unordered_map<std::string, size_t> paramIndex_;
};

} // namespace

bool isKnownOp(std::string_view op) { return findOpCode(op).has_value(); }

Manifest parseManifest(std::string_view json, const std::string &path) {
  return ManifestParser(path).parse(json);
}

} // namespace stringrt
