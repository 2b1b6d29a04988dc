#include "TestPackages.h"

#include "stringrt/Safetensors.h"

namespace stringrt::test {
namespace {

// The values both programs start with: x, label, w, b, logits, loss.
std::string forwardValues(const std::string &d, const std::string &c) {
  return R"({"dtype": "f32", "shape": [-1, )" + d + R"(]}, {"dtype": "i32", "shape": [-1]},
             {"dtype": "f32", "shape": [)" + d + ", " + c + R"(]}, {"dtype": "f32", "shape": [)" + c + R"(]},
             {"dtype": "f32", "shape": [-1, )" + c + R"(]}, {"dtype": "f32", "shape": []})";
}

// The ops both programs start with, up to the loss.
const char *kForwardOps =
    R"(    {"op": "pe.get_param", "results": [2], "operands": [], "attrs": {"param": "w"}},
    {"op": "pe.get_param", "results": [3], "operands": [], "attrs": {"param": "b"}},
    {"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}},
    {"op": "pe.cross_entropy", "results": [5], "operands": [4, 1], "attrs": {}})";

} // namespace

std::string linearForwardProgram(int features, int classes) {
  return R"({
  "values": [)" + forwardValues(std::to_string(features), std::to_string(classes)) +
         R"(],
  "inputs": [0, 1],
  "ops": [
)" + kForwardOps + R"(
  ],
  "outputs": [{"name": "loss", "value": 5}, {"name": "logits", "value": 4}]
})";
}

std::string linearGradientsProgram(int features, int classes, bool biasGrad) {
  std::string d = std::to_string(features), c = std::to_string(classes);
  return R"({
  "values": [)" + forwardValues(d, c) + R"(,
             {"dtype": "f32", "shape": []}, {"dtype": "f32", "shape": [-1, )" + c + R"(]},
             {"dtype": "f32", "shape": [)" + d + ", " + c + "]}" +
         (biasGrad ? R"(, {"dtype": "f32", "shape": [)" + c + "]}" : "") + R"(],
  "inputs": [0, 1],
  "ops": [
)" + kForwardOps + R"(,
    {"op": "arith.constant", "results": [6], "operands": [], "attrs": {"value": 1}},
    {"op": "pe.cross_entropy_grad", "results": [7], "operands": [4, 1, 6], "attrs": {}},
    {"op": "pe.linear_grad_weight", "results": [8], "operands": [0, 7], "attrs": {}})" +
         (biasGrad ? R"(,
    {"op": "pe.sum_to", "results": [9], "operands": [7], "attrs": {}})"
                   : "") +
         R"(
  ],
  "outputs": [{"name": "loss", "value": 5}, {"grad": "w", "value": 8})" +
         (biasGrad ? R"(,
              {"grad": "b", "value": 9})"
                   : "") +
         R"(]
})";
}

std::string tinyLinearManifest(const std::string &forwardProgram, const std::string &optimizer) {
  return std::string(R"({
  "model": "tiny",
  "inputs": [{"name": "image", "dtype": "f32", "shape": [-1, 4]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [{"name": "w", "shape": [4, 3], "frozen": false, "init": "zeros"},
             {"name": "b", "shape": [3], "frozen": false, "init": "zeros"}],
  "optimizer": {"kind": ")") +
         optimizer + R"(", "lr": 0.002, "beta1": 0.9, "beta2": 0.999,
                "eps": 1e-8, "weight_decay": 0.05, "momentum": 0.0,
                "clip_norm": 1.0, "schedule": "constant",
                "warmup_steps": 0, "min_lr": 0.0},
  "programs": {"forward": )" +
         forwardProgram + R"(, "gradients": )" + linearGradientsProgram(4, 3) + "}}";
}

void writePackageFile(const std::string &path, const std::string &manifest,
                      const std::map<std::string, std::string> &overrides) {
  std::map<std::string, std::string> metadata = {{"format", "stringc-package"},
                                                 {"version", "1"},
                                                 {"target", "cpu-reference"},
                                                 {"manifest", manifest}};
  for (const auto &[key, value] : overrides) {
    if (value.empty())
      metadata.erase(key);
    else
      metadata[key] = value;
  }
  writeSafetensors(path, {}, metadata);
}

} // namespace stringrt::test
