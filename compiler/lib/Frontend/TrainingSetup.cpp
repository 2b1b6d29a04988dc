//===- TrainingSetup.cpp - optimizer, schedule and data statements --------===//

#include "AnalyzerState.h"
#include "Builtins.h"

#include "stringrt/Augment.h"

#include <fmt/format.h>

namespace stringc::sema {

using namespace ast;

namespace {
/// The callee and (possibly empty) arguments of `optimizer adamw(...)` or
/// `schedule constant`; nullopt after reporting that `expr` is not a call.
struct ConfigCall {
  std::string name;
  SourceRange nameRange;
  const CallExpr *call = nullptr; // null for a bare name
};

std::optional<ConfigCall> readConfigCall(Analyzer &a, const Expr &expr, const char *statement,
                                         const char *example) {
  if (const auto *call = expr.as<CallExpr>())
    return ConfigCall{call->callee, call->calleeRange, call};
  if (const auto *name = expr.as<NameExpr>())
    return ConfigCall{name->name, name->range, nullptr};
  a.fail(expr.range, fmt::format("'{}' expects a call such as {}", statement, example));
  return std::nullopt;
}

/// Binds a configuration call's arguments; a bare name binds none.
std::optional<CallArgs> bindConfig(Analyzer &a, const ConfigCall &config, const std::vector<ArgSpec> &specs,
                                   const Expr &expr) {
  if (config.call)
    return bindArguments(a, *config.call, config.name, specs);
  for (const ArgSpec &spec : specs)
    if (spec.required) {
      a.fail(expr.range, fmt::format("{}: missing argument '{}'", config.name, spec.name));
      return std::nullopt;
    }
  // A bare name is a call without arguments; fabricate the empty binding.
  static const CallExpr empty(SourceRange{}, "", SourceRange{}, {});
  return CallArgs(empty, config.name, specs);
}

/// Reports `name` outside [lo, hi) / [lo, hi] and returns false.
bool checkRange(Analyzer &a, const CallArgs &args, size_t i, double lo, double hi, bool hiOpen,
                const char *interval) {
  if (!args.has(i))
    return true;
  double v = args[i].number();
  if (v >= lo && (hiOpen ? v < hi : v <= hi))
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be in {}, found {}", args.function, args.specs[i].name,
                                    interval, formatNumber(args[i])));
  return false;
}

constexpr double kInf = 1e308;
// What an optimizer or schedule leaves out (the package format's defaults).
constexpr const stringrt::ManifestOptimizer &kDefaults = stringrt::kOptimizerDefaults;
} // namespace

void Analyzer::execOptimizer(const OptimizerStmt &stmt) {
  if (optimizer_) {
    diags_.error(stmt.keywordRange, "a model has one 'optimizer'",
                 {DiagnosticEngine::note(optimizer_->keywordRange, "the first 'optimizer' is here")});
    return;
  }
  optimizer_ = &stmt;
  if (!stmt.value)
    return;
  std::optional<ConfigCall> config = readConfigCall(*this, *stmt.value, "optimizer", "adamw(lr = 1e-3)");
  if (!config)
    return;
  GraphOptimizer &opt = graph_.optimizer;
  opt.loc = sources_.location(stmt.keywordRange.begin);
  std::vector<ArgSpec> specs = {floatArg("lr", true), floatArg("weight_decay"), floatArg("clip")};
  if (config->name == "adamw") {
    specs.push_back(floatArg("beta1"));
    specs.push_back(floatArg("beta2"));
    specs.push_back(floatArg("eps"));
  } else if (config->name == "sgd") {
    specs.push_back(floatArg("momentum"));
  } else {
    fail(config->nameRange, fmt::format("unknown optimizer '{}' (expected adamw or sgd)", config->name));
    return;
  }
  const size_t kEma = specs.size(); // ema = d: an EMA of the weights
  specs.push_back(floatArg("ema"));
  std::optional<CallArgs> args = bindConfig(*this, *config, specs, *stmt.value);
  if (!args)
    return;
  opt.kind = config->name;
  opt.lr = args->floatOr(0, kDefaults.lr);
  opt.weightDecay = args->floatOr(1, kDefaults.weightDecay);
  opt.clipNorm = args->floatOr(2, kDefaults.clipNorm);
  requirePositive(*this, *args, 0);
  checkRange(*this, *args, 1, 0, kInf, false, "[0, inf)");
  checkRange(*this, *args, 2, 0, kInf, false, "[0, inf) (0 turns clipping off)");
  if (opt.kind == "adamw") {
    opt.beta1 = args->floatOr(3, kDefaults.beta1);
    opt.beta2 = args->floatOr(4, kDefaults.beta2);
    opt.eps = args->floatOr(5, kDefaults.eps);
    checkRange(*this, *args, 3, 0, 1, true, "[0, 1)");
    checkRange(*this, *args, 4, 0, 1, true, "[0, 1)");
    requirePositive(*this, *args, 5);
  } else {
    opt.momentum = args->floatOr(3, kDefaults.momentum);
    checkRange(*this, *args, 3, 0, 1, true, "[0, 1)");
  }
  opt.emaDecay = args->floatOr(kEma, kDefaults.emaDecay);
  checkRange(*this, *args, kEma, 0, 1, true, "[0, 1) (0 keeps no EMA)");
}

void Analyzer::execSchedule(const ScheduleStmt &stmt) {
  if (schedule_) {
    diags_.error(stmt.keywordRange, "a model has at most one 'schedule'",
                 {DiagnosticEngine::note(schedule_->keywordRange, "the first 'schedule' is here")});
    return;
  }
  schedule_ = &stmt;
  if (!stmt.value)
    return;
  std::optional<ConfigCall> config =
      readConfigCall(*this, *stmt.value, "schedule", "warmup_cosine(warmup = 100, min_lr = 1e-5)");
  if (!config)
    return;
  std::vector<ArgSpec> specs;
  if (config->name == "warmup_cosine") {
    specs = {intArg("warmup"), floatArg("min_lr")};
  } else if (config->name != "constant") {
    fail(config->nameRange,
         fmt::format("unknown schedule '{}' (expected constant or warmup_cosine)", config->name));
    return;
  }
  std::optional<CallArgs> args = bindConfig(*this, *config, specs, *stmt.value);
  if (!args)
    return;
  GraphOptimizer &opt = graph_.optimizer;
  opt.schedule = config->name;
  if (config->name == "warmup_cosine") {
    opt.warmupSteps = args->intOr(0, kDefaults.warmupSteps);
    opt.minLr = args->floatOr(1, kDefaults.minLr);
    checkRange(*this, *args, 0, 0, kInf, false, "[0, inf)");
    if (checkRange(*this, *args, 1, 0, kInf, false, "[0, lr]") && args->has(1))
      minLrRange_ = args->range(1);
  }
}

void Analyzer::execData(const DataStmt &stmt) {
  if (data_) {
    diags_.error(stmt.keywordRange, "a model has at most one 'data' statement",
                 {DiagnosticEngine::note(data_->keywordRange, "the first 'data' is here")});
    return;
  }
  data_ = &stmt;
  if (!stmt.value)
    return;
  std::optional<ConfigCall> config =
      readConfigCall(*this, *stmt.value, "data", "idx(\"/usr/share/datasets/fashion-mnist\")");
  if (!config)
    return;
  std::vector<ArgSpec> specs = {ArgSpec{"path", ArgKind::String, true, true, "path"}};
  enum { kCrop = 1, kFlip, kErase }; // idx's augmentation arguments
  if (config->name == "text") {
    specs.push_back(intArg("context", true));
  } else if (config->name == "idx") {
    specs.push_back(intArg("crop"));
    specs.push_back(floatArg("flip"));
    specs.push_back(floatArg("erase"));
  } else {
    fail(config->nameRange, fmt::format("unknown data source '{}' (expected idx or text)", config->name));
    return;
  }
  std::optional<CallArgs> args = bindConfig(*this, *config, specs, *stmt.value);
  if (!args)
    return;
  if ((*args)[0].text.empty()) {
    fail(args->range(0), fmt::format("{}: the path is empty", config->name));
    return;
  }
  GraphDataset dataset;
  dataset.kind = config->name;
  dataset.path = resolvePath((*args)[0].text);
  dataset.loc = sources_.location(stmt.keywordRange.begin);
  if (dataset.kind == "text") {
    dataset.contextLength = (*args)[1].intValue;
    if (dataset.contextLength <= 0) {
      fail(args->range(1), fmt::format("text: context must be a positive integer, found {}",
                                       dataset.contextLength));
      return;
    }
  } else {
    // The runtime's bound (checkAugmentPolicy), so every package loads.
    bool valid = checkRange(*this, *args, kCrop, 0, double(stringrt::kMaxCropPadding), false,
                            fmt::format("[0, {}]", stringrt::kMaxCropPadding).c_str());
    valid &= checkRange(*this, *args, kFlip, 0, 1, false, "[0, 1]");
    valid &= checkRange(*this, *args, kErase, 0, 1, false, "[0, 1]");
    if (!valid)
      return;
    dataset.cropPadding = args->intOr(kCrop, 0);
    dataset.flipProbability = args->floatOr(kFlip, 0.0);
    dataset.eraseProbability = args->floatOr(kErase, 0.0);
  }
  graph_.dataset = std::move(dataset);
}

} // namespace stringc::sema
