//===- InitializerAnalysis.cpp - a parameter's initializer, incl. load(...) -===//

#include "AnalyzerState.h"
#include "Builtins.h"

#include "stringc/Frontend/Determinism.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace stringc::sema {

using namespace ast;

/// Each safetensors file is opened (its header read and validated) once per
/// compilation, however many parameters load from it.
struct Analyzer::LoadCache {
  struct Entry {
    std::optional<stringrt::SafetensorsFile> file;
    std::string error; // why it could not be opened
  };
  std::map<std::string, Entry> files;
};

namespace {
const char *const kInitializers = "normal, uniform, zeros, ones, constant or load";

std::vector<ArgSpec> initializerSpecs(const std::string &name) {
  if (name == "normal")
    return {floatArg("mean"), floatArg("std"), intArg("seed")};
  if (name == "uniform")
    return {floatArg("low"), floatArg("high"), intArg("seed")};
  if (name == "constant")
    return {ArgSpec{"value", ArgKind::Float, true, true, "value"}};
  if (name == "load")
    return {ArgSpec{"file", ArgKind::String, true, true, "file"},
            ArgSpec{"tensor", ArgKind::String, true, true, "tensor"}};
  return {}; // zeros, ones
}

bool isInitializer(const std::string &name) {
  for (const char *known : {"normal", "uniform", "zeros", "ones", "constant", "load"})
    if (name == known)
      return true;
  return false;
}

/// The explicit seed, or the one derived from the parameter's full name.
std::optional<int64_t> seedOf(Analyzer &a, const CallArgs *args, size_t index, const GraphParam &param) {
  if (!args || !args->has(index))
    return derivedSeed(param.name);
  int64_t seed = (*args)[index].intValue;
  if (seed < 0) {
    a.fail(args->range(index), fmt::format("{}: seed must be a non-negative integer, found {}", args->function,
                                           seed));
    return std::nullopt;
  }
  return seed;
}

std::string listTensors(const stringrt::SafetensorsFile &file) {
  constexpr size_t kShown = 8;
  std::string out;
  const auto &tensors = file.tensors();
  for (size_t i = 0; i < tensors.size() && i < kShown; ++i)
    out += (i > 0 ? ", " : "") + tensors[i].name;
  if (tensors.size() > kShown)
    out += fmt::format(", ... ({} in all)", tensors.size());
  return tensors.empty() ? "it has no tensors" : "it has " + out;
}
} // namespace

bool Analyzer::evalInitializer(const Expr &init, GraphParam &param, bool shapeKnown) {
  const auto *call = init.as<CallExpr>();
  const auto *bare = init.as<NameExpr>();
  std::string name = call ? call->callee : bare ? bare->name : "";
  if (name.empty()) {
    diags_.error(init.range, fmt::format("expected an initializer ({})", kInitializers));
    return false;
  }
  if (!isInitializer(name)) {
    diags_.error(call ? call->calleeRange : init.range,
                 fmt::format("unknown initializer '{}' (expected {})", name, kInitializers));
    return false;
  }
  param.init = name;
  std::vector<ArgSpec> specs = initializerSpecs(name);
  std::optional<CallArgs> args =
      call ? bindArguments(*this, *call, name, specs) : std::optional<CallArgs>();
  if (call && !args)
    return false;
  if (!call) {
    for (const ArgSpec &spec : specs)
      if (spec.required) {
        diags_.error(init.range, fmt::format("{}: missing argument '{}'", name, spec.name));
        return false;
      }
  }
  const CallArgs *a = args ? &*args : nullptr;
  auto number = [&](size_t i, double fallback) { return a ? a->floatOr(i, fallback) : fallback; };

  if (name == "normal") {
    double mean = number(0, 0.0), std = number(1, 1.0);
    if (std <= 0) {
      diags_.error(a->range(1), fmt::format("normal: std must be positive, found {}", std));
      return false;
    }
    std::optional<int64_t> seed = seedOf(*this, a, 2, param);
    if (!seed)
      return false;
    param.initAttrs = {{"mean", mean}, {"std", std}, {"seed", *seed}};
  } else if (name == "uniform") {
    double low = number(0, -1.0), high = number(1, 1.0);
    if (!(low < high)) {
      diags_.error(a->range(a->has(1) ? 1 : 0),
                   fmt::format("uniform: low ({}) must be less than high ({})", low, high));
      return false;
    }
    std::optional<int64_t> seed = seedOf(*this, a, 2, param);
    if (!seed)
      return false;
    param.initAttrs = {{"low", low}, {"high", high}, {"seed", *seed}};
  } else if (name == "constant") {
    param.initAttrs = {{"value", number(0, 0.0)}};
  } else if (name == "load") {
    const std::string &file = (*a)[0].text;
    const std::string &tensor = (*a)[1].text;
    std::string path = resolvePath(file);
    param.initAttrs = {{"file", path}, {"tensor", tensor}};
    if (!loadCache_)
      loadCache_ = std::make_shared<LoadCache>();
    auto [it, fresh] = loadCache_->files.try_emplace(path);
    LoadCache::Entry &entry = it->second;
    if (fresh) {
      try {
        entry.file = stringrt::SafetensorsFile::open(path);
      } catch (const stringrt::Error &error) {
        std::string what = error.what();
        if (!error.path().empty() && what.rfind(error.path() + ": ", 0) == 0)
          what = what.substr(error.path().size() + 2);
        entry.error = what;
      }
    }
    if (!entry.file) {
      diags_.error(a->range(0), fmt::format("load: cannot read '{}' ({}): {}", file, path, entry.error));
      return false;
    }
    const stringrt::TensorInfo *info = entry.file->find(tensor);
    if (!info) {
      diags_.error(a->range(1), fmt::format("load: '{}' has no tensor '{}' ({})", file, tensor,
                                            listTensors(*entry.file)));
      return false;
    }
    if (info->dtype != stringrt::DType::F32) {
      diags_.error(a->range(1), fmt::format("load: tensor '{}' in '{}' has dtype {}; parameters are F32",
                                            tensor, file, stringrt::dtypeName(info->dtype)));
      return false;
    }
    if (shapeKnown && info->shape != param.type.dims) {
      diags_.error(init.range, fmt::format("load: tensor '{}' in '{}' has shape {} but parameter '{}' is "
                                           "declared {}",
                                           tensor, file, formatShape(info->shape), param.name,
                                           formatShape(param.type.dims)));
      return false;
    }
  }
  return true;
}

} // namespace stringc::sema
