// Package::load and the manifest's validation (docs/package.md) on
// hand-written packages: a valid tiny one, then one malformed case per check.
#include "stringrt/Package.h"

#include "TestFiles.h"
#include "TestPackages.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

namespace stringrt {
namespace {

using test::failsWith;
using test::linearForwardProgram;
using test::linearGradientsProgram;
using test::TempDir;
using test::writeFile;
using test::writePackageFile;

// A valid manifest: a linear classifier, logits = x w + b, loss =
// cross_entropy(logits, label), and its gradients program. `frozen` is a
// frozen parameter no op reads.
std::string validManifest() {
  return std::string(R"({
  "model": "tiny",
  "inputs": [{"name": "image", "dtype": "f32", "shape": [-1, 4]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [
    {"name": "w", "shape": [4, 3], "frozen": false, "init": "normal",
     "mean": 0.0, "std": 0.02, "seed": 18446744073709551615},
    {"name": "b", "shape": [3], "frozen": false, "init": "zeros"},
    {"name": "frozen", "shape": [2, 2], "frozen": true, "init": "load",
     "file": "/abs/w.safetensors", "tensor": "wq"}
  ],
  "optimizer": {"kind": "adamw", "lr": 0.002, "beta1": 0.9, "beta2": 0.999,
                "eps": 1e-8, "weight_decay": 0.05, "momentum": 0.0,
                "clip_norm": 1.0, "schedule": "warmup_cosine",
                "warmup_steps": 200, "min_lr": 1e-5},
  "dataset": {"kind": "idx", "path": "/data/fashion-mnist", "context_length": 0},
  "programs": {"forward": )") +
         linearForwardProgram(4, 3) + R"(, "gradients": )" + linearGradientsProgram(4, 3) +
         "}}";
}

// `text` with the first occurrence of `from` replaced (which must exist).
std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' to replace";
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

class PackageTest : public ::testing::Test {
protected:
  // An override with an empty value removes that metadata key.
  std::string write(const std::string &manifest,
                    const std::map<std::string, std::string> &overrides = {}) {
    std::string path = dir.file("model.pkg");
    writePackageFile(path, manifest, overrides);
    return path;
  }

  // The package with `manifest` fails to load with all `fragments`.
  ::testing::AssertionResult rejects(const std::string &manifest,
                                     const std::vector<std::string> &fragments) {
    std::string path = write(manifest);
    return failsWith([&] { Package::load(path); }, path, fragments);
  }

  TempDir dir;
};

TEST_F(PackageTest, LoadsValidPackage) {
  std::string path = write(validManifest());
  Package package = Package::load(path);
  EXPECT_EQ(package.path(), path);
  EXPECT_EQ(package.target(), "cpu-reference");
  const Manifest &m = package.manifest();
  EXPECT_EQ(m.model, "tiny");
  ASSERT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.inputs[0].name, "image");
  EXPECT_EQ(m.inputs[0].dtype, DType::F32);
  EXPECT_EQ(m.inputs[0].shape, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(m.inputs[1].dtype, DType::I32);

  ASSERT_EQ(m.params.size(), 3u);
  EXPECT_EQ(m.params[0].init, ParamInit::Normal);
  EXPECT_DOUBLE_EQ(m.params[0].std, 0.02);
  EXPECT_EQ(m.params[0].seed, 18446744073709551615ull);
  EXPECT_EQ(m.params[0].numel(), 12);
  EXPECT_EQ(m.params[1].init, ParamInit::Zeros);
  EXPECT_TRUE(m.params[2].frozen);
  EXPECT_EQ(m.params[2].init, ParamInit::Load);
  EXPECT_EQ(m.params[2].file, "/abs/w.safetensors");
  EXPECT_EQ(m.params[2].tensor, "wq");
  EXPECT_EQ(m.findParam("b"), &m.params[1]);
  EXPECT_EQ(m.findParam("nope"), nullptr);

  EXPECT_EQ(m.optimizer.kind, OptimizerKind::AdamW);
  EXPECT_EQ(m.optimizer.schedule, LrSchedule::WarmupCosine);
  EXPECT_EQ(m.optimizer.warmupSteps, 200);
  EXPECT_DOUBLE_EQ(m.optimizer.weightDecay, 0.05);
  EXPECT_DOUBLE_EQ(m.optimizer.minLr, 1e-5);
  ASSERT_TRUE(m.dataset.has_value());
  EXPECT_EQ(m.dataset->kind, DatasetKind::Idx);

  EXPECT_EQ(m.forward.values.size(), 6u);
  EXPECT_EQ(m.forward.inputs, (std::vector<ValueId>{0, 1}));
  ASSERT_EQ(m.forward.ops.size(), 4u);
  EXPECT_EQ(m.forward.ops[2].op, "pe.linear");
  EXPECT_EQ(m.forward.ops[2].operands, (std::vector<ValueId>{0, 2, 3}));
  EXPECT_EQ(m.forward.ops[0].getString("param"), "w");
  ASSERT_EQ(m.forward.outputs.size(), 2u);
  EXPECT_EQ(m.forward.outputs[1].key(), "logits");

  const Program &g = m.program("gradients");
  EXPECT_EQ(&g, &m.gradients);
  // `1` is an integer in the JSON but `value` is a float attribute.
  EXPECT_DOUBLE_EQ(g.ops[4].getFloat("value"), 1.0);
  EXPECT_THROW(g.ops[4].getInt("value"), Error);
  ASSERT_EQ(g.outputs.size(), 3u);
  EXPECT_EQ(g.outputs[1].key(), "grad:w");
  EXPECT_EQ(g.outputs[2].grad, "b");
  EXPECT_THROW(m.program("backward"), Error);
  EXPECT_TRUE(isKnownOp("pe.attention_grad"));
  EXPECT_FALSE(isKnownOp("pe.parameter"));
}

// validManifest() with ops of attributes of every kind: bool, optional int,
// float, int array, enum.
std::string everyKindManifest() {
  std::string m = validManifest();
  m = replaced(m, R"({"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}})",
               R"({"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}},
    {"op": "pe.gelu", "results": [6], "operands": [4], "attrs": {"approximate": true}},
    {"op": "pe.mean", "results": [7], "operands": [4], "attrs": {"axis": 1}},
    {"op": "pe.sparse_skew", "results": [8], "operands": [7], "attrs":
       {"dim": 4, "fraction": 0.5, "seed": 7, "support": [1, 2, 5]}},
    {"op": "pe.attention", "results": [9], "operands": [10, 10, 10], "attrs":
       {"heads": 2, "scale": 0.25, "mask": "skip", "skip_base": 3}})");
  m = replaced(m, R"({"dtype": "f32", "shape": [-1, 3]}, {"dtype": "f32", "shape": []}],
  "inputs")",
               R"({"dtype": "f32", "shape": [-1, 3]}, {"dtype": "f32", "shape": []},
             {"dtype": "f32", "shape": [-1, 3]}, {"dtype": "f32", "shape": [-1]},
             {"dtype": "f32", "shape": [6]}, {"dtype": "f32", "shape": [-1, 3]},
             {"dtype": "f32", "shape": [-1, 3]}],
  "inputs")");
  // Value 10 must be defined before the attention uses it: use value 4.
  m = replaced(m, R"("operands": [10, 10, 10])", R"("operands": [4, 4, 4])");
  m = replaced(m, R"({"name": "loss", "value": 5}, {"name": "logits", "value": 4}])",
               R"({"name": "loss", "value": 5}, {"name": "logits", "value": 4},
              {"name": "extra", "value": 10}])");
  m = replaced(m, R"({"op": "pe.cross_entropy", "results": [5], "operands": [4, 1], "attrs": {}}
  ],)",
               R"({"op": "pe.cross_entropy", "results": [5], "operands": [4, 1], "attrs": {}},
    {"op": "pe.relu", "results": [10], "operands": [9], "attrs": {}}
  ],)");
  return m;
}

TEST_F(PackageTest, AttributesOfEveryKind) {
  std::string m = everyKindManifest();
  std::string path = write(m);
  Package package = Package::load(path);
  const Program &f = package.manifest().forward;
  ASSERT_EQ(f.ops.size(), 9u);
  EXPECT_TRUE(f.ops[3].getBool("approximate"));
  EXPECT_EQ(f.ops[4].getOptionalInt("axis"), std::optional<int64_t>(1));
  EXPECT_EQ(f.ops[5].getInts("support"), (std::vector<int64_t>{1, 2, 5}));
  EXPECT_DOUBLE_EQ(f.ops[5].getFloat("fraction"), 0.5);
  EXPECT_EQ(f.ops[6].getString("mask"), "skip");
  EXPECT_EQ(f.ops[6].getInt("heads"), 2);
  EXPECT_EQ(f.ops[6].getOptionalInt("skip_base"), std::optional<int64_t>(3));
  EXPECT_EQ(f.ops[2].getOptionalInt("axis"), std::nullopt);
}

TEST_F(PackageTest, RejectsIntegerAttributesOutOfRange) {
  // Sizes in [1, 2^31], indices in [0, 2^31], an axis within the rank limit;
  // a seed may be any 64-bit integer.
  const std::string m = everyKindManifest();
  EXPECT_TRUE(rejects(replaced(m, R"("heads": 2)", R"("heads": 0)"),
                      {"ops[6] (pe.attention).attrs.heads: 0 is out of range [1, 2147483648]"}));
  EXPECT_TRUE(rejects(replaced(m, R"("skip_base": 3)", R"("skip_base": 9223372036854775807)"),
                      {"attrs.skip_base: 9223372036854775807 is out of range [0, 2147483648]"}));
  EXPECT_TRUE(rejects(replaced(m, R"("support": [1, 2, 5])", R"("support": [1, -2, 5])"),
                      {"attrs.support[1]: -2 is out of range [0, 2147483648]"}));
  EXPECT_TRUE(rejects(replaced(m, R"("axis": 1)", R"("axis": 9)"),
                      {"attrs.axis: 9 is out of range [0, 8]"}));
  EXPECT_TRUE(rejects(replaced(m, R"("heads": 2)", R"("heads": 99999999999999999999)"),
                      {"attrs.heads: expected a 64-bit integer, got 99999999999999999999"}));
  EXPECT_NO_THROW(Package::load(write(replaced(m, R"("seed": 7)", R"("seed": -9223372036854775808)"))));
}

TEST_F(PackageTest, DatasetIsOptional) {
  std::string m = replaced(
      validManifest(),
      R"("dataset": {"kind": "idx", "path": "/data/fashion-mnist", "context_length": 0},)",
      "");
  EXPECT_FALSE(Package::load(write(m)).manifest().dataset.has_value());
}

TEST_F(PackageTest, RejectsWrongVersion) {
  // Versions 1 to 3 are read (2 adds ops' kernels and target cpu, 3 arena
  // plans in bytes: ArenaPlanTest).
  EXPECT_NO_THROW(Package::load(write(validManifest(), {{"version", "2"}})));
  EXPECT_NO_THROW(Package::load(write(validManifest(), {{"version", "3"}})));
  std::string path = write(validManifest(), {{"version", "4"}});
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"unsupported package version \"4\" (this runtime reads versions 1 to 3"}));
  // Target cpu needs version 2 (tests/unit/codegen has the rest of cpu).
  std::string cpu = write(validManifest(), {{"target", "cpu"}});
  EXPECT_TRUE(failsWith([&] { Package::load(cpu); }, cpu,
                        {"target \"cpu\" needs package version 2"}));
}

TEST_F(PackageTest, RejectsWrongTarget) {
  std::string path = write(validManifest(), {{"target", "tpu"}});
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"unsupported target \"tpu\""}));
  // A cuda package needs its kernel table (CudaPackageTest.cpp has the rest).
  std::string cuda = write(validManifest(), {{"target", "cuda"}});
  EXPECT_TRUE(failsWith([&] { Package::load(cuda); }, cuda, {"no \"cuda\" in the metadata"}));
}

TEST_F(PackageTest, RejectsWrongFormatAndMissingMetadata) {
  std::string path = write(validManifest(), {{"format", "other"}});
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"not a stringc package", "\"other\""}));
  path = write(validManifest(), {{"manifest", ""}});
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"no \"manifest\" in the metadata"}));
  path = write(validManifest(), {{"extra", "x"}});
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"unknown metadata key \"extra\""}));
}

TEST_F(PackageTest, RejectsNonPackageFiles) {
  std::string path = dir.file("junk.pkg");
  writeFile(path, "not a safetensors file at all");
  EXPECT_THROW(Package::load(path), Error);
  EXPECT_TRUE(failsWith([&] { Package::load(dir.file("missing.pkg")); },
                        dir.file("missing.pkg"), {}));
  // A safetensors file with tensors but no metadata.
  float value = 1.0f;
  writeSafetensors(path, {{"t", DType::F32, {1}, &value}});
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"not a stringc package"}));
}

TEST_F(PackageTest, RejectsBadJson) {
  EXPECT_TRUE(rejects("{\"model\": ", {"manifest is not valid JSON"}));
  EXPECT_TRUE(rejects("[1, 2]", {"manifest: expected object, got array"}));
}

TEST_F(PackageTest, RejectsWrongJsonTypes) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("model": "tiny")",
                               R"("model": 3)"),
                      {"manifest.model: expected string, got number"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("frozen": false)",
                               R"("frozen": 0)"),
                      {"manifest.params[0].frozen: expected boolean"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("warmup_steps": 200)",
                               R"("warmup_steps": 2.5)"),
                      {"warmup_steps: expected a 64-bit integer, got 2.5"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("model": "tiny")",
                               R"("model": "tiny", "model": "x")"),
                      {"duplicate key \"model\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("model": "tiny")",
                               R"("modle": "tiny")"),
                      {"unknown key \"modle\""}));
}

TEST_F(PackageTest, RejectsValueIdOutOfRange) {
  EXPECT_TRUE(rejects(
      replaced(validManifest(), R"("operands": [0, 2, 3])",
               R"("operands": [0, 2, 6])"),
      {"programs.forward.ops[2] (pe.linear).operands[2]",
       "value id 6 out of range (the program has 6 values)"}));
  EXPECT_TRUE(rejects(
      replaced(validManifest(), R"({"name": "logits", "value": 4})",
               R"({"name": "logits", "value": -1})"),
      {"value id -1 out of range"}));
}

TEST_F(PackageTest, RejectsUseBeforeDefinition) {
  EXPECT_TRUE(rejects(
      replaced(validManifest(), R"("operands": [4, 1], "attrs": {}})",
               R"("operands": [5, 1], "attrs": {}})"),
      {"programs.forward.ops[3] (pe.cross_entropy).operands[0]",
       "value 5 is used before it is defined"}));
}

TEST_F(PackageTest, RejectsDoubleAndMissingDefinitions) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("results": [3])",
                               R"("results": [2])"),
                      {"value 2 is defined twice"}));
  // Value 3 is then defined by nothing.
  EXPECT_TRUE(rejects(
      replaced(validManifest(),
               R"({"op": "pe.get_param", "results": [3], "operands": [], "attrs": {"param": "b"}},
    {"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}})",
               R"({"op": "pe.linear", "results": [4], "operands": [0, 2], "attrs": {}})"),
      {"value 3 is never defined"}));
}

TEST_F(PackageTest, RejectsUnknownOp) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("op": "pe.linear")",
                               R"("op": "pe.conv2d")"),
                      {"programs.forward.ops[2].op",
                       "unknown op \"pe.conv2d\" for target cpu-reference"}));
}

TEST_F(PackageTest, RejectsWrongOperandCount) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("operands": [0, 2, 3])",
                               R"("operands": [0])"),
                      {"ops[2] (pe.linear)", "expected 2 to 3 operands, got 1"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("operands": [4, 1], "attrs")",
                               R"("operands": [4, 1, 1], "attrs")"),
                      {"(pe.cross_entropy)", "expected 2 operands, got 3"}));
}

TEST_F(PackageTest, RejectsWrongResultCount) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("results": [4])",
                               R"("results": [])"),
                      {"(pe.linear)", "expected 1 results, got 0"}));
}

TEST_F(PackageTest, RejectsWrongOperandType) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("operands": [4, 1], "attrs")",
                               R"("operands": [4, 0], "attrs")"),
                      {"(pe.cross_entropy)",
                       "operand 1 (value 0) must be i32, got f32"}));
}

TEST_F(PackageTest, RejectsMissingAttribute) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("attrs": {"param": "w"})",
                               R"("attrs": {})"),
                      {"ops[0] (pe.get_param)", "missing attribute \"param\""}));
}

TEST_F(PackageTest, AnAbsentDefaultValuedAttributeGetsItsOdsDefault) {
  // pe.layer_norm's epsilon is DefaultValuedAttr<F64Attr, "1.0e-5"> in the
  // dialect: the generated schema gives it to a manifest that leaves it out.
  const std::string linear =
      R"({"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}})";
  Manifest manifest = parseManifest(
      replaced(validManifest(), linear,
               R"({"op": "pe.layer_norm", "results": [4], "operands": [0, 2, 3], "attrs": {}})"),
      "m.json");
  const ProgramOp &norm = manifest.forward.ops[2];
  ASSERT_EQ(norm.op, "pe.layer_norm");
  EXPECT_EQ(norm.getFloat("epsilon"), 1e-5);
  // An OptionalAttr stays absent.
  Manifest attention = parseManifest(
      replaced(validManifest(), linear,
               R"({"op": "pe.attention", "results": [4], "operands": [0, 0, 0], "attrs": )"
               R"({"heads": 1, "scale": 0.5, "mask": "none"}})"),
      "m.json");
  EXPECT_FALSE(attention.forward.ops[2].has("skip_base"));
}

TEST_F(PackageTest, RejectsWrongAttributeType) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("attrs": {"param": "w"})",
                               R"("attrs": {"param": 1})"),
                      {"(pe.get_param).attrs.param: expected string, got number"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("attrs": {"value": 1})",
                               R"("attrs": {"value": true})"),
                      {"(arith.constant).attrs.value: expected number, got boolean"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("attrs": {"value": 1})",
                               R"("attrs": {"value": 1, "scale": 2})"),
                      {"(arith.constant)", "unknown attribute \"scale\""}));
}

TEST_F(PackageTest, RejectsUnknownEnumKeyword) {
  std::string m = replaced(
      validManifest(), R"({"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}})",
      R"({"op": "pe.attention", "results": [4], "operands": [0, 0, 0], "attrs":
          {"heads": 1, "scale": 1.0, "mask": "diagonal"}})");
  EXPECT_TRUE(rejects(m, {"(pe.attention).attrs.mask",
                          "unknown keyword \"diagonal\" (expected none, causal, skip)"}));
}

TEST_F(PackageTest, RejectsGradOutputsNotMatchingParams) {
  // Missing the gradient of b.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"grad": "w", "value": 8},
              {"grad": "b", "value": 9}])",
                               R"({"grad": "w", "value": 8}])"),
                      {"programs.gradients.outputs",
                       "expected the loss and 2 gradients", "got 2 outputs"}));
  // Wrong order.
  std::string m = replaced(validManifest(), R"({"grad": "w", "value": 8})",
                           R"({"grad": "b", "value": 9})");
  m = replaced(m, R"({"grad": "b", "value": 9}])", R"({"grad": "w", "value": 8}])");
  EXPECT_TRUE(rejects(m, {"outputs[1]",
                          "expected the gradient of trainable parameter \"w\", "
                          "got the gradient of \"b\""}));
  // A frozen parameter's gradient is not an output.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("frozen": true)",
                               R"("frozen": false)"),
                      {"expected the loss and 3 gradients"}));
  // Gradients in the forward program.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"name": "logits", "value": 4})",
                               R"({"grad": "w", "value": 2})"),
                      {"forward.outputs[1]", "no gradient outputs"}));
}

TEST_F(PackageTest, RejectsShapeMismatch) {
  // The gradient of w with the shape of b.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"grad": "w", "value": 8})",
                               R"({"grad": "w", "value": 3})"),
                      {"gradients.outputs[1]",
                       "gradient value 3 is f32 [3] but parameter \"w\" has "
                       "shape [4, 3]"}));
  // get_param's result against the parameter table.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"dtype": "f32", "shape": [4, 3]})",
                               R"({"dtype": "f32", "shape": [3, 4]})"),
                      {"ops[0] (pe.get_param)",
                       "result value 2 has shape [3, 4] but parameter \"w\" has "
                       "shape [4, 3]"}));
  // A program input against the manifest's inputs.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"dtype": "f32", "shape": [-1, 4]})",
                               R"({"dtype": "f32", "shape": [-1, 5]})"),
                      {"programs.forward.inputs[0]",
                       "value 0 is f32 [-1, 5] but input \"image\" is f32 [-1, 4]"}));
  // The loss must be a scalar.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"name": "loss", "value": 5})",
                               R"({"name": "loss", "value": 4})"),
                      {"the loss must be an f32 scalar, got f32 [-1, 3]"}));
  // Bad dimensions.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("shape": [4, 3], "frozen")",
                               R"("shape": [4, 0], "frozen")"),
                      {"manifest.params[0].shape[1]", "dimension 0 out of range"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("shape": [4, 3], "frozen")",
                               R"("shape": [-1, 3], "frozen")"),
                      {"manifest.params[0].shape[0]", "dimension -1 out of range"}));
  // A shape of more than 2^32 elements (its product would overflow with a
  // batch), and parameters of more than 2^32 in all.
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("shape": [4, 3], "frozen")",
                               R"("shape": [2147483648, 2147483648], "frozen")"),
                      {"manifest.params[0].shape: [2147483648, 2147483648] has more than "
                       "4294967296 elements"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"({"dtype": "f32", "shape": [-1, 4]})",
                               R"({"dtype": "f32", "shape": [-1, 65536, 65536, 2]})"),
                      {"manifest.programs.forward.values[0].shape: [-1, 65536, 65536, 2] has "
                       "more than 4294967296 elements (besides the batch)"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("shape": [4, 3], "frozen")",
                               R"("shape": [65536, 65536], "frozen")"),
                      {"the parameters exceed"}));
}

TEST_F(PackageTest, RejectsBadParameters) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("name": "b")",
                               R"("name": "w")"),
                      {"manifest.params[1].name", "duplicate parameter \"w\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("attrs": {"param": "w"})",
                               R"("attrs": {"param": "v"})"),
                      {"(pe.get_param)", "unknown parameter \"v\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("std": 0.02)",
                               R"("std": 0.0)"),
                      {"manifest.params[0].std: must be > 0"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("std": 0.02, )", ""),
                      {"manifest.params[0]: missing key \"std\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("init": "zeros")",
                               R"("init": "zeros", "value": 1.0)"),
                      {"manifest.params[1]: unknown key \"value\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("init": "zeros")",
                               R"("init": "xavier")"),
                      {"unknown initializer \"xavier\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("seed": 18446744073709551615)",
                               R"("seed": 18446744073709551616)"),
                      {"expected an unsigned 64-bit integer"}));
}

TEST_F(PackageTest, RejectsBadOptimizerAndDataset) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("kind": "adamw")",
                               R"("kind": "lion")"),
                      {"manifest.optimizer.kind", "unknown optimizer \"lion\""}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("lr": 0.002)",
                               R"("lr": 0)"),
                      {"manifest.optimizer.lr: must be > 0"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("lr": 0.002)",
                               R"("lr": 1e999)"),
                      {"manifest.optimizer.lr: number 1e999 is out of range"}));
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("kind": "idx")",
                               R"("kind": "text")"),
                      {"manifest.dataset.context_length", "text dataset"}));
}

TEST_F(PackageTest, RejectsUnknownDType) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"("dtype": "i32")",
                               R"("dtype": "i64")"),
                      {"manifest.inputs[1].dtype", "unknown dtype \"i64\""}));
}

TEST_F(PackageTest, RejectsMissingProgram) {
  EXPECT_TRUE(rejects(replaced(validManifest(), R"(, "gradients": )",
                               R"(, "backward": )"),
                      {"manifest.programs", "unknown key \"backward\""}));
}

// --- The writer, beside the reader ---------------------------------------

// `manifest` read, written, read and written again: the two texts agree
// (the written form is a fixed point), and the manifest read back from the
// written text is the one read from `manifest`.
void expectRoundTrip(const std::string &manifest) {
  Manifest first = parseManifest(manifest, "m.json");
  std::string written = writeManifestJson(first);
  Manifest second = parseManifest(written, "written.json");
  EXPECT_EQ(writeManifestJson(second), written);
  // Field by field, on what the text could lose: names, numbers, shapes, ops.
  EXPECT_EQ(second.model, first.model);
  ASSERT_EQ(second.params.size(), first.params.size());
  for (size_t i = 0; i < first.params.size(); ++i) {
    EXPECT_EQ(second.params[i].name, first.params[i].name);
    EXPECT_EQ(second.params[i].init, first.params[i].init);
    EXPECT_EQ(second.params[i].seed, first.params[i].seed);
    EXPECT_EQ(second.params[i].std, first.params[i].std);
    EXPECT_EQ(second.params[i].file, first.params[i].file);
  }
  EXPECT_EQ(second.optimizer.lr, first.optimizer.lr);
  EXPECT_EQ(second.optimizer.minLr, first.optimizer.minLr);
  EXPECT_EQ(second.optimizer.emaDecay, first.optimizer.emaDecay);
  EXPECT_EQ(second.optimizer.schedule, first.optimizer.schedule);
  EXPECT_EQ(second.dataset.has_value(), first.dataset.has_value());
  if (first.dataset) {
    EXPECT_EQ(second.dataset->path, first.dataset->path);
    EXPECT_EQ(second.dataset->augment.cropPadding, first.dataset->augment.cropPadding);
    EXPECT_EQ(second.dataset->augment.flipProbability, first.dataset->augment.flipProbability);
  }
  for (const char *name : {"forward", "gradients"}) {
    const Program &a = first.program(name), &b = second.program(name);
    ASSERT_EQ(b.values.size(), a.values.size());
    for (size_t v = 0; v < a.values.size(); ++v)
      EXPECT_EQ(b.values[v].shape, a.values[v].shape);
    EXPECT_EQ(b.inputs, a.inputs);
    ASSERT_EQ(b.ops.size(), a.ops.size());
    for (size_t o = 0; o < a.ops.size(); ++o) {
      EXPECT_EQ(b.ops[o].op, a.ops[o].op);
      EXPECT_EQ(b.ops[o].operands, a.ops[o].operands);
      EXPECT_EQ(b.ops[o].results, a.ops[o].results);
      EXPECT_EQ(b.ops[o].attrs, a.ops[o].attrs) << name << " op " << o;
    }
    ASSERT_EQ(b.outputs.size(), a.outputs.size());
    for (size_t i = 0; i < a.outputs.size(); ++i)
      EXPECT_EQ(b.outputs[i].key(), a.outputs[i].key());
  }
}

TEST_F(PackageTest, TheWriterIsTheReadersInverse) {
  expectRoundTrip(validManifest());
  expectRoundTrip(everyKindManifest());
  // The optional members: an EMA, augmentation, no dataset, a seed beyond
  // int64 (kept exact), numbers that need every digit.
  std::string optional = replaced(validManifest(), R"("min_lr": 1e-5)",
                                  R"("min_lr": 1.0000000000000002e-05, "ema_decay": 0.999)");
  optional = replaced(optional, R"("context_length": 0})",
                      R"("context_length": 0, "augment": {"crop_padding": 4, "flip": 0.5, "erase": 0.25}})");
  expectRoundTrip(optional);
  expectRoundTrip(replaced(
      validManifest(),
      R"("dataset": {"kind": "idx", "path": "/data/fashion-mnist", "context_length": 0},)", ""));
}

TEST_F(PackageTest, TheWriterWritesDefaultsAndOnlyThePresentOptionals) {
  const std::string linear =
      R"({"op": "pe.linear", "results": [4], "operands": [0, 2, 3], "attrs": {}})";
  std::string text = writeManifestJson(parseManifest(
      replaced(validManifest(), linear,
               R"({"op": "pe.layer_norm", "results": [4], "operands": [0, 2, 3], "attrs": {}})"),
      "m.json"));
  // The schema's default is written; the integer-valued float stays a float.
  EXPECT_NE(text.find(R"("op":"pe.layer_norm","results":[4],"operands":[0,2,3],)"
                      R"("attrs":{"epsilon":1e-05}})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("attrs":{"value":1.0})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("seed":18446744073709551615)"), std::string::npos) << text;
  // No EMA, no augmentation, no arena, no kernels: none written.
  for (const char *absent : {"ema_decay", "augment", "arena", "kernels"})
    EXPECT_EQ(text.find(absent), std::string::npos) << absent;
}

TEST_F(PackageTest, WritePackageIsTheInverseOfLoad) {
  PackageContents contents;
  contents.manifest = parseManifest(everyKindManifest(), "m.json");
  std::string path = dir.file("written.pkg");
  writePackage(path, contents);
  Package package = Package::load(path);
  EXPECT_EQ(package.target(), kReferenceTarget);
  EXPECT_EQ(writeManifestJson(package.manifest()), writeManifestJson(contents.manifest));
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("format"), kPackageFormat);
  EXPECT_EQ(file.metadata().at("version"), std::to_string(kPackageVersion));
  EXPECT_TRUE(file.tensors().empty());
  // Writing what was loaded gives the same bytes.
  contents.manifest = package.manifest();
  writePackage(dir.file("again.pkg"), contents);
  EXPECT_EQ(test::readFile(dir.file("again.pkg")), test::readFile(path));
}

TEST_F(PackageTest, WritePackageRefusesWhatTheFormatCannotHold) {
  PackageContents contents;
  contents.manifest = parseManifest(validManifest(), "m.json");
  const std::string path = dir.file("refused.pkg");
  writeFile(path, "an earlier file");
  auto refuses = [&](const PackageContents &c, const std::string &fragment) {
    try {
      writePackage(path, c);
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_EQ(test::readFile(path), "an earlier file") << "the earlier file is kept";
      return;
    }
    ADD_FAILURE() << "no error: " << fragment;
  };
  PackageContents cpu = contents;
  cpu.target = kCpuTarget;
  refuses(cpu, "needs the compiled kernels' shared object");
  PackageContents reference = contents;
  reference.kernelObject = "ELF";
  refuses(reference, "carries no compiled CPU kernels");
  PackageContents cuda = contents;
  cuda.target = kCudaTarget;
  refuses(cuda, "needs its GPU kernels");
  PackageContents unknown = contents;
  unknown.target = "tpu";
  refuses(unknown, "unknown target \"tpu\"");
  PackageContents infinite = contents;
  infinite.manifest.optimizer.lr = std::numeric_limits<double>::infinity();
  refuses(infinite, "not finite");
  PackageContents notUtf8 = contents;
  notUtf8.manifest.model = "bad \xff name";
  refuses(notUtf8, "not valid UTF-8");
}

} // namespace
} // namespace stringrt
