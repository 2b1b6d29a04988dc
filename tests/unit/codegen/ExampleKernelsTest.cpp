//===- ExampleKernelsTest.cpp - example models on the compiled kernels ----===//
//
// Each example is compiled to a "cpu" package (stringc --target=cpu) and its
// forward outputs, loss and every gradient computed with the compiled
// kernels and with the reference kernels, on the same parameters and batch.
// They must agree to float rounding: the kernels differ from the reference
// only in the order of float sums and in the polynomial erf/tanh/exp, and
// the rest of the graph runs on the fast kernels (~1e-5 relative to the
// reference per op, docs/package.md).
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "../compiler/TestHelpers.h"
#include "stringc/Driver/Driver.h"

using namespace stringc::codegen::test;

namespace {

class ExampleKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleKernels, CompiledMatchesReference) {
  std::optional<stringc::ModelGraph> graph = stringc::test::compileExample(GetParam());
  ASSERT_TRUE(graph);
  ScratchDir dir;
  std::string path = dir.file("model.pkg");
  std::ostringstream err;
  ASSERT_EQ(stringc::writeModelPackage(*graph, path, stringc::kCpuTarget, err), 0) << err.str();
  stringrt::Package package = stringrt::Package::load(path);
  ASSERT_TRUE(package.hasKernels());
  size_t withKernels = 0;
  for (const auto *program : {&package.manifest().forward, &package.manifest().gradients})
    for (const stringrt::ProgramOp &op : program->ops)
      withKernels += !op.kernels.empty();
  EXPECT_GT(withKernels, 0u) << "no op of " << GetParam() << " runs on a generated kernel";

  stringrt::Model compiled(package, stringrt::KernelSet::Compiled);
  stringrt::Model reference(package, stringrt::KernelSet::Reference);
  compiled.initParameters();
  reference.parameters() = compiled.parameters();
  Batch batch = randomBatch(package.manifest(), 4, 7);

  for (const char *program : {"forward", "gradients"}) {
    auto got = compiled.run(program, batch.views);
    auto want = reference.run(program, batch.views);
    ASSERT_EQ(got.size(), want.size());
    for (const auto &[name, tensor] : want) {
      SCOPED_TRACE(std::string(program) + " output " + name);
      ASSERT_EQ(got.at(name).shape, tensor.shape);
      EXPECT_LT(relativeError(got.at(name).values, tensor.values), 2e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleKernels,
                         ::testing::Values("vit_rope.pe", "gpt_rope_skip.pe", "vit_cayley.pe",
                                           "gpt_sinusoidal_skip.pe", "vit_reflection.pe",
                                           "gpt_rope_causal.pe", "vit_generators.pe",
                                           "vit_polar.pe", "vit_sparse_cayley.pe",
                                           "vit_string.pe", "vit_ape.pe", "vit_nope.pe"),
                         [](const auto &info) {
                           std::string name = info.param.substr(0, info.param.size() - 3);
                           return name;
                         });

} // namespace
