//===- PassEquivalence.cpp - a model with and without a pass --------------===//

#include "PassEquivalence.h"

#include "stringc/Frontend/Frontend.h"
#include "stringc/Transforms/Pipeline.h"
#include "stringrt/Model.h"
#include "stringrt/Package.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <unistd.h>

namespace stringc::test {
namespace {

std::optional<ModelGraph> compileCase(const PassCase &c) {
  std::optional<SourceManager> sources;
  std::string baseDir;
  if (!c.example.empty()) {
    std::string path = std::string(STRINGC_EXAMPLES_DIR) + "/" + c.example;
    std::string error;
    sources = SourceManager::fromFile(path, error);
    if (!sources) {
      ADD_FAILURE() << "cannot read " << path << ": " << error;
      return std::nullopt;
    }
    baseDir = modelBaseDir(path);
  } else {
    sources.emplace("case.pe", c.source);
    baseDir = ".";
  }
  DiagnosticEngine diags(*sources);
  std::optional<ModelGraph> graph = compileModel(*sources, diags, baseDir);
  if (!graph) {
    std::ostringstream printed;
    diags.print(printed);
    ADD_FAILURE() << "the model does not compile:\n" << printed.str();
  }
  return graph;
}

/// Random inputs for every manifest input: floats N(0, 1), ints in [0, 10)
/// (labels and token ids: every example has at least 10 classes or tokens).
struct Inputs {
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<int32_t>> ints;
  std::map<std::string, stringrt::HostTensor> views;
};

void makeInputs(const stringrt::Manifest &manifest, int64_t batch, uint64_t seed, Inputs &inputs) {
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> small(0, 9);
  for (const stringrt::ManifestInput &input : manifest.inputs) {
    std::vector<int64_t> shape = input.shape;
    int64_t count = 1;
    for (int64_t &dim : shape) {
      if (dim < 0)
        dim = batch;
      count *= dim;
    }
    if (input.dtype == stringrt::DType::I32) {
      std::vector<int32_t> &values = inputs.ints[input.name];
      for (int64_t i = 0; i < count; ++i)
        values.push_back(small(random));
      inputs.views[input.name] = stringrt::HostTensor(values.data(), shape);
    } else {
      std::vector<float> &values = inputs.floats[input.name];
      for (int64_t i = 0; i < count; ++i)
        values.push_back(normal(random));
      inputs.views[input.name] = stringrt::HostTensor(values.data(), shape);
    }
  }
}

double relativeError(const std::vector<float> &got, const std::vector<float> &want) {
  if (got.size() != want.size())
    return std::numeric_limits<double>::infinity();
  double error = 0, size = 1e-6;
  for (size_t i = 0; i < got.size(); ++i) {
    error = std::max(error, std::fabs(double(got[i]) - double(want[i])));
    size = std::max(size, std::fabs(double(want[i])));
  }
  return error / size;
}

using Results = std::map<std::string, stringrt::ref::Tensor<float>>;

/// Compiles `graph` to a package with `options` and runs forward and
/// gradients on the initial parameters.
bool runPackage(const ModelGraph &graph, const CompileOptions &options, const PassCase &c,
                Results &forward, Results &gradients) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("stringc-pass-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "model.pkg").string();
  std::ostringstream err;
  if (writeModelPackage(graph, path, "cpu-reference", err, options) != 0) {
    ADD_FAILURE() << "compiling the package failed:\n" << err.str();
    return false;
  }
  try {
    stringrt::Model model(stringrt::Package::load(path), c.kernels);
    std::filesystem::remove_all(dir);
    model.initParameters();
    Inputs inputs;
    makeInputs(model.manifest(), c.batch, c.seed, inputs);
    forward = model.run("forward", inputs.views);
    gradients = model.run("gradients", inputs.views);
  } catch (const std::exception &error) {
    std::filesystem::remove_all(dir);
    ADD_FAILURE() << "running the package failed: " << error.what();
    return false;
  }
  return true;
}

} // namespace

double Comparison::maxError() const { return std::max({lossError, outputError, gradientError}); }

std::string trainIR(const PassCase &c, const CompileOptions &options) {
  std::optional<ModelGraph> graph = compileCase(c);
  if (!graph)
    return "";
  std::ostringstream out, err;
  if (printModelAsMLIR(*graph, out, err, EmitStage::Train, options) != 0) {
    ADD_FAILURE() << "--emit=pe-train failed:\n" << err.str();
    return "";
  }
  return out.str();
}

Comparison comparePass(const PassCase &c) {
  Comparison result;
  const double inf = std::numeric_limits<double>::infinity();
  result.lossError = result.outputError = result.gradientError = inf;

  // A default pass is switched off for the second compilation; an opt-in
  // one (--enable-pass) is switched on for the first. A pass of the CPU
  // target's own runs with that target's passes (on the harness's
  // cpu-reference packages).
  CompileOptions with = c.base, without = c.base;
  if (llvm::is_contained(targetPassNames(), llvm::StringRef(c.pass)))
    with.target = without.target = "cpu";
  // A pass of the CUDA target's own: its pipeline (the package is still a
  // cpu-reference one, run on the CPU).
  if (llvm::is_contained(cudaPassNames(), llvm::StringRef(c.pass)))
    with.target = without.target = "cuda";
  if (llvm::is_contained(optInPassNames(), llvm::StringRef(c.pass))) {
    with.enabledPasses.insert(c.pass);
    without.enabledPasses.erase(c.pass);
  } else {
    without.disabledPasses.insert(c.pass);
  }
  result.irWith = trainIR(c, with);
  result.irWithout = trainIR(c, without);
  result.modulesDiffer = result.irWith != result.irWithout;

  std::optional<ModelGraph> graph = compileCase(c);
  if (!graph)
    return result;
  Results forwardWith, gradientsWith, forwardWithout, gradientsWithout;
  if (!runPackage(*graph, with, c, forwardWith, gradientsWith) ||
      !runPackage(*graph, without, c, forwardWithout, gradientsWithout))
    return result;

  result.lossError = result.outputError = result.gradientError = 0;
  for (auto &[name, want] : forwardWithout) {
    auto found = forwardWith.find(name);
    double error = found == forwardWith.end() ? inf : relativeError(found->second.values, want.values);
    (name == "loss" ? result.lossError : result.outputError) =
        std::max(name == "loss" ? result.lossError : result.outputError, error);
  }
  for (auto &[name, want] : gradientsWithout) {
    if (name.rfind("grad:", 0) != 0)
      continue;
    auto found = gradientsWith.find(name);
    double error = found == gradientsWith.end() ? inf : relativeError(found->second.values, want.values);
    ++result.gradientsCompared;
    double size = 0;
    for (float value : want.values)
      size = std::max(size, std::fabs(double(value)));
    result.gradientErrors[name.substr(5)] = error;
    result.gradientSizes[name.substr(5)] = size;
    if (error >= result.gradientError) {
      result.gradientError = error;
      result.worstGradient = name.substr(5);
    }
  }
  if (gradientsWith.size() != gradientsWithout.size())
    result.gradientError = inf;
  return result;
}

} // namespace stringc::test
