//===- ConstantOverridesTest.cpp - stringc -D NAME=VALUE ------------------===//

#include "TestHelpers.h"

#include "stringc/Frontend/ConstantOverrides.h"

using namespace stringc;
using namespace stringc::test;

namespace {

/// A small image model whose image size and patch are constants.
const char *kModel = R"(model m
const image = 28
const patch = 4
const grid = image / patch
const D = 16
input img: f32[B, 1, image, image]
input label: i32[B]
param w: [patch * patch, D] = zeros
param b: [D] = zeros
param head: [D, 10] = zeros
block enc(x) {
  const patch = 99
  return x
}
let x = enc(patch_embed(img, w, b, patch = patch))
let p = grid_positions(rows = grid, cols = grid)
output logits = linear(mean(x, axis = 1), head)
loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)";

ConstantOverride given(const std::string &arg) {
  std::string error;
  std::optional<ConstantOverride> parsed = parseConstantOverride(arg, error);
  if (!parsed)
    throw std::runtime_error(error);
  return *parsed;
}

Compiled compileWith(const std::string &text, std::vector<ConstantOverride> overrides) {
  Compiled result;
  result.sources = std::make_unique<SourceManager>("test.pe", text);
  result.diags = std::make_unique<DiagnosticEngine>(*result.sources);
  result.graph = compileModel(*result.sources, *result.diags, ".", overrides);
  return result;
}

std::variant<int64_t, double> constant(const ModelGraph &graph, const std::string &name) {
  for (const GraphConstant &c : graph.constants)
    if (c.name == name)
      return c.value;
  throw std::runtime_error("no constant " + name);
}

TEST(ConstantOverrides, ParsesNumbersAsTheLanguageWritesThem) {
  ConstantOverride i = given("image=40");
  EXPECT_EQ(i.name, "image");
  EXPECT_FALSE(i.isFloat);
  EXPECT_EQ(i.intValue, 40);
  ConstantOverride f = given("lr_2=1e-3");
  EXPECT_TRUE(f.isFloat);
  EXPECT_DOUBLE_EQ(f.floatValue, 1e-3);
  EXPECT_EQ(f.text, "1e-3");
  EXPECT_EQ(given("x=-2").intValue, -2);
  EXPECT_DOUBLE_EQ(given("x=0.25").floatValue, 0.25);
  EXPECT_TRUE(given("x=4.0").isFloat); // a float, as `const x = 4.0` is

  for (const char *bad : {"image", "=3", "1x=3", "a-b=3", "x=", "x=abc", "x=1.", "x=.5", "x=1e",
                          "x=--1", "x=4 ", "x=0x10", "x=1e999", "x=99999999999999999999"}) {
    std::string error;
    EXPECT_FALSE(parseConstantOverride(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  std::string error;
  parseConstantOverride("x=abc", error);
  EXPECT_EQ(error, "-D x=abc: the value must be a number such as 64, -2, 0.02 or 1e-3, got 'abc'");
}

TEST(ConstantOverrides, DerivedConstantsAndShapesFollow) {
  Compiled plain = compileWith(kModel, {});
  ASSERT_TRUE(plain.graph) << plain.printed();
  EXPECT_EQ(std::get<int64_t>(constant(*plain.graph, "grid")), 7);
  EXPECT_EQ(plain.graph->inputs[0].type.dims, (std::vector<int64_t>{kBatchDim, 1, 28, 28}));

  Compiled bigger = compileWith(kModel, {given("image=40")});
  ASSERT_TRUE(bigger.graph) << bigger.printed();
  EXPECT_EQ(std::get<int64_t>(constant(*bigger.graph, "image")), 40);
  EXPECT_EQ(std::get<int64_t>(constant(*bigger.graph, "grid")), 10);
  EXPECT_EQ(bigger.graph->inputs[0].type.dims, (std::vector<int64_t>{kBatchDim, 1, 40, 40}));
  // The block's own `patch` is not the top-level one: only that one changes.
  Compiled patch2 = compileWith(kModel, {given("patch=2")});
  ASSERT_TRUE(patch2.graph) << patch2.printed();
  EXPECT_EQ(patch2.graph->params[0].type.dims, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(std::get<int64_t>(constant(*patch2.graph, "grid")), 14);
}

TEST(ConstantOverrides, AnUnknownNameIsAnError) {
  Compiled c = compileWith(kModel, {given("image=40"), given("imgae=40")});
  EXPECT_FALSE(c.graph);
  EXPECT_EQ(c.errors(), (std::vector<std::string>{
                            "1:7: -D imgae=40: model 'm' has no top-level constant 'imgae' (its "
                            "constants: image, patch, grid, D)"}));
}

TEST(ConstantOverrides, AValueThatBreaksAShapeIsNotedAtTheConstantsLine) {
  // 28 is no multiple of 5: patch_embed refuses it, and the error carries
  // a note at `const patch`'s line with both values.
  Compiled c = compileWith(kModel, {given("patch=5")});
  ASSERT_FALSE(c.graph);
  ASSERT_EQ(c.diags->diagnostics().size(), 1u) << c.printed();
  std::string printed = c.printed();
  EXPECT_NE(printed.find("test.pe:3:7: note: 'patch' is 5 here, set by -D patch=5 (the file gives 4)\n"
                         "const patch = 4\n"
                         "      ^~~~~\n"),
            std::string::npos)
      << printed;
  // A float where an integer is needed fails as `const patch = 4.0` would.
  Compiled f = compileWith(kModel, {given("patch=4.0")});
  ASSERT_FALSE(f.graph);
  EXPECT_NE(f.printed().find("note: 'patch' is 4.0 here, set by -D patch=4.0"), std::string::npos)
      << f.printed();
  // A non-positive dimension is the input's error, noted likewise.
  Compiled zero = compileWith(kModel, {given("image=-4")});
  ASSERT_FALSE(zero.graph);
  EXPECT_NE(zero.printed().find("test.pe:2:7: note: 'image' is -4 here"), std::string::npos)
      << zero.printed();
}

} // namespace
