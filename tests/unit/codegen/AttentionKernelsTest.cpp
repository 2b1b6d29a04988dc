//===- AttentionKernelsTest.cpp - generated attention against reference ---===//
//
// pe.attention / attention_grad (masks none, causal, skip) and
// pe.rope_attention / rope_attention_grad (none, causal) on odd and larger
// token counts (T = 7, 50), one to four heads, batch 1 and 3, compiled to a
// "cpu" package and run with the generated kernels and with the reference
// kernels (double accumulation) on the same inputs. The generated kernels
// accumulate in float (FMA, reassociated row sums) and use MLIR's
// polynomial exp, so they agree to float rounding: within 5e-6 of each
// tensor's largest magnitude (docs/codegen.md); skip masks copy rows and
// agree bit for bit. The rope table is a random parameter, not a rotation,
// so a transposed or sign-swapped rotation cannot pass.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "stringrt/cpu/ThreadPool.h"

using namespace stringc::codegen::test;

namespace {

constexpr const char *kAttention = R"mlir(
module @attn {
  pe.parameter @t7 : tensor<7x6x2xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 1 : i64}
  pe.parameter @t50 : tensor<50x16x2xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 2 : i64}
  pe.optimizer {kind = "sgd"}
  func.func @forward(%q7: tensor<?x7x12xf32> {pe.input = "q7"}, %k7: tensor<?x7x12xf32> {pe.input = "k7"},
                     %v7: tensor<?x7x12xf32> {pe.input = "v7"}, %d7: tensor<?x7x12xf32> {pe.input = "d7"},
                     %q50: tensor<?x50x32xf32> {pe.input = "q50"}, %k50: tensor<?x50x32xf32> {pe.input = "k50"},
                     %v50: tensor<?x50x32xf32> {pe.input = "v50"}, %d50: tensor<?x50x32xf32> {pe.input = "d50"})
      -> (tensor<f32> {pe.output = "loss"},
          tensor<?x7x12xf32> {pe.output = "a7_none"}, tensor<?x7x12xf32> {pe.output = "a7_causal"},
          tensor<?x7x12xf32> {pe.output = "a7_skip"},
          tensor<?x7x12xf32> {pe.output = "g7_none_dq"}, tensor<?x7x12xf32> {pe.output = "g7_none_dk"},
          tensor<?x7x12xf32> {pe.output = "g7_none_dv"},
          tensor<?x7x12xf32> {pe.output = "g7_causal_dq"}, tensor<?x7x12xf32> {pe.output = "g7_causal_dk"},
          tensor<?x7x12xf32> {pe.output = "g7_causal_dv"},
          tensor<?x7x12xf32> {pe.output = "g7_skip_dq"}, tensor<?x7x12xf32> {pe.output = "g7_skip_dk"},
          tensor<?x7x12xf32> {pe.output = "g7_skip_dv"},
          tensor<?x7x12xf32> {pe.output = "r7_none"}, tensor<?x7x12xf32> {pe.output = "r7_causal"},
          tensor<?x7x12xf32> {pe.output = "rg7_none_dq"}, tensor<?x7x12xf32> {pe.output = "rg7_none_dk"},
          tensor<?x7x12xf32> {pe.output = "rg7_none_dv"},
          tensor<?x7x12xf32> {pe.output = "rg7_causal_dq"}, tensor<?x7x12xf32> {pe.output = "rg7_causal_dk"},
          tensor<?x7x12xf32> {pe.output = "rg7_causal_dv"},
          tensor<?x50x32xf32> {pe.output = "a50_none"}, tensor<?x50x32xf32> {pe.output = "a50_causal"},
          tensor<?x50x32xf32> {pe.output = "g50_causal_dq"}, tensor<?x50x32xf32> {pe.output = "g50_causal_dk"},
          tensor<?x50x32xf32> {pe.output = "g50_causal_dv"},
          tensor<?x50x32xf32> {pe.output = "r50_none"}, tensor<?x50x32xf32> {pe.output = "r50_causal"},
          tensor<?x50x32xf32> {pe.output = "rg50_none_dq"}, tensor<?x50x32xf32> {pe.output = "rg50_none_dk"},
          tensor<?x50x32xf32> {pe.output = "rg50_none_dv"},
          tensor<?x50x32xf32> {pe.output = "rg50_causal_dq"}, tensor<?x50x32xf32> {pe.output = "rg50_causal_dk"},
          tensor<?x50x32xf32> {pe.output = "rg50_causal_dv"},
          tensor<?x2x7xf32> {pe.output = "l7_none"}, tensor<?x3x7xf32> {pe.output = "l7_causal"},
          tensor<?x3x7xf32> {pe.output = "lr7_causal"}, tensor<?x4x50xf32> {pe.output = "l50_causal"},
          tensor<?x4x50xf32> {pe.output = "lr50_none"}) {
    %t7 = pe.get_param @t7 : tensor<7x6x2xf32>
    %t50 = pe.get_param @t50 : tensor<50x16x2xf32>
    %a0, %l0 = pe.attention %q7, %k7, %v7 heads(2) scale(4.000000e-01) mask(none) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32> -> tensor<?x7x12xf32>, tensor<?x2x7xf32>
    %a1, %l1 = pe.attention %q7, %k7, %v7 heads(3) scale(5.000000e-01) mask(causal) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32> -> tensor<?x7x12xf32>, tensor<?x3x7xf32>
    %a2 = pe.attention %q7, %k7, %v7 heads(2) scale(4.000000e-01) mask(skip) skip_base(1) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32> -> tensor<?x7x12xf32>
    %g0:3 = pe.attention_grad %q7, %k7, %v7, %a0, %l0, %d7 heads(2) scale(4.000000e-01) mask(none) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x2x7xf32>, tensor<?x7x12xf32> -> (tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>)
    %g1:3 = pe.attention_grad %q7, %k7, %v7, %a1, %l1, %d7 heads(3) scale(5.000000e-01) mask(causal) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x3x7xf32>, tensor<?x7x12xf32> -> (tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>)
    %g2:3 = pe.attention_grad %q7, %k7, %v7, %a0, %l0, %d7 heads(2) scale(4.000000e-01) mask(skip) skip_base(1) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x2x7xf32>, tensor<?x7x12xf32> -> (tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>)
    %r0, %lr0 = pe.rope_attention %q7, %k7, %v7, %t7 heads(2) scale(4.000000e-01) mask(none) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<7x6x2xf32> -> tensor<?x7x12xf32>, tensor<?x2x7xf32>
    %r1, %lr1 = pe.rope_attention %q7, %k7, %v7, %t7 heads(3) scale(5.000000e-01) mask(causal) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<7x6x2xf32> -> tensor<?x7x12xf32>, tensor<?x3x7xf32>
    %rg0:3 = pe.rope_attention_grad %q7, %k7, %v7, %t7, %r0, %lr0, %d7 heads(2) scale(4.000000e-01) mask(none) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<7x6x2xf32>, tensor<?x7x12xf32>, tensor<?x2x7xf32>, tensor<?x7x12xf32> -> (tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>)
    %rg1:3 = pe.rope_attention_grad %q7, %k7, %v7, %t7, %r1, %lr1, %d7 heads(3) scale(5.000000e-01) mask(causal) : tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<7x6x2xf32>, tensor<?x7x12xf32>, tensor<?x3x7xf32>, tensor<?x7x12xf32> -> (tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>)
    %b0 = pe.attention %q50, %k50, %v50 heads(4) scale(3.535530e-01) mask(none) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32> -> tensor<?x50x32xf32>
    %b1 = pe.attention %q50, %k50, %v50 heads(1) scale(1.767770e-01) mask(causal) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32> -> tensor<?x50x32xf32>
    %b2, %lb2 = pe.attention %q50, %k50, %v50 heads(4) scale(3.535530e-01) mask(causal) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32> -> tensor<?x50x32xf32>, tensor<?x4x50xf32>
    %h1:3 = pe.attention_grad %q50, %k50, %v50, %b2, %lb2, %d50 heads(4) scale(3.535530e-01) mask(causal) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x4x50xf32>, tensor<?x50x32xf32> -> (tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>)
    %s0, %ls0 = pe.rope_attention %q50, %k50, %v50, %t50 heads(4) scale(3.535530e-01) mask(none) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<50x16x2xf32> -> tensor<?x50x32xf32>, tensor<?x4x50xf32>
    %s1, %ls1 = pe.rope_attention %q50, %k50, %v50, %t50 heads(2) scale(2.500000e-01) mask(causal) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<50x16x2xf32> -> tensor<?x50x32xf32>, tensor<?x2x50xf32>
    %sg0:3 = pe.rope_attention_grad %q50, %k50, %v50, %t50, %s0, %ls0, %d50 heads(4) scale(3.535530e-01) mask(none) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<50x16x2xf32>, tensor<?x50x32xf32>, tensor<?x4x50xf32>, tensor<?x50x32xf32> -> (tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>)
    %sg1:3 = pe.rope_attention_grad %q50, %k50, %v50, %t50, %s1, %ls1, %d50 heads(2) scale(2.500000e-01) mask(causal) : tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<50x16x2xf32>, tensor<?x50x32xf32>, tensor<?x2x50xf32>, tensor<?x50x32xf32> -> (tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>)
    %loss = pe.mean %a0 : tensor<?x7x12xf32> -> tensor<f32>
    return %loss, %a0, %a1, %a2, %g0#0, %g0#1, %g0#2, %g1#0, %g1#1, %g1#2, %g2#0, %g2#1, %g2#2,
           %r0, %r1, %rg0#0, %rg0#1, %rg0#2, %rg1#0, %rg1#1, %rg1#2,
           %b0, %b1, %h1#0, %h1#1, %h1#2, %s0, %s1, %sg0#0, %sg0#1, %sg0#2, %sg1#0, %sg1#1, %sg1#2,
           %l0, %l1, %lr1, %lb2, %ls0
        : tensor<f32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x7x12xf32>, tensor<?x7x12xf32>, tensor<?x7x12xf32>,
          tensor<?x50x32xf32>, tensor<?x50x32xf32>,
          tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>,
          tensor<?x50x32xf32>, tensor<?x50x32xf32>,
          tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>,
          tensor<?x50x32xf32>, tensor<?x50x32xf32>, tensor<?x50x32xf32>,
          tensor<?x2x7xf32>, tensor<?x3x7xf32>, tensor<?x3x7xf32>, tensor<?x4x50xf32>,
          tensor<?x4x50xf32>
  }
  func.func @gradients(%q7: tensor<?x7x12xf32> {pe.input = "q7"}, %k7: tensor<?x7x12xf32> {pe.input = "k7"},
                       %v7: tensor<?x7x12xf32> {pe.input = "v7"}, %d7: tensor<?x7x12xf32> {pe.input = "d7"},
                       %q50: tensor<?x50x32xf32> {pe.input = "q50"}, %k50: tensor<?x50x32xf32> {pe.input = "k50"},
                       %v50: tensor<?x50x32xf32> {pe.input = "v50"}, %d50: tensor<?x50x32xf32> {pe.input = "d50"})
      -> (tensor<f32> {pe.output = "loss"}) {
    %loss = pe.mean %q7 : tensor<?x7x12xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";

bool isSkip(const std::string &name) { return name.find("skip") != std::string::npos; }

class AttentionKernels : public ::testing::Test {
protected:
  void SetUp() override {
    std::string path = dir.file("attn.pkg");
    ASSERT_EQ(writeCpuPackage(kAttention, path), "");
    package.emplace(stringrt::Package::load(path));
  }
  ScratchDir dir;
  std::optional<stringrt::Package> package;
};

TEST_F(AttentionKernels, EveryAttentionOpIsCompiled) {
  ASSERT_TRUE(package->hasKernels());
  for (const stringrt::ProgramOp &op : package->manifest().forward.ops) {
    bool attention = op.op.find("attention") != std::string::npos;
    EXPECT_EQ(op.kernels.size(), attention ? 1u : 0u) << op.op;
    if (attention)
      EXPECT_EQ(op.kernels[0].range, -1) << op.op; // the batch
  }
}

TEST_F(AttentionKernels, CompiledMatchesReference) {
  stringrt::Model compiled(*package);
  ASSERT_EQ(compiled.kernels(), stringrt::KernelSet::Compiled);
  stringrt::Model reference(*package, stringrt::KernelSet::Reference);
  compiled.initParameters();
  reference.parameters() = compiled.parameters();
  for (int64_t batch : {1, 3}) {
    // Scale 2: peaked softmax rows (scores of a few tens), where exp's
    // approximation and the max subtraction matter.
    for (float scale : {1.0f, 2.0f}) {
      Batch in = randomBatch(package->manifest(), batch, 17 + uint32_t(batch), scale);
      SCOPED_TRACE("batch " + std::to_string(batch) + ", scale " + std::to_string(scale));
      expectOutputsMatch(compiled.run("forward", in.views), reference.run("forward", in.views),
                         isSkip, 5e-6);
    }
  }
}

TEST_F(AttentionKernels, ResultsDoNotDependOnTheThreadCount) {
  expectThreadCountIndependent(*package, randomBatch(package->manifest(), 9, 5));
}

TEST(AttentionKernelsPlan, DeclinedCases) {
  // Relative attention, and a backward whose [T, T] scratch would not fit
  // the kernel's stack budget, stay on the runtime's kernels; the forward of
  // the same long sequence (one row of scores at a time) does not.
  const char *text = R"mlir(
module @declined {
  pe.parameter @rel : tensor<4x4x2x2xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 1 : i64}
  pe.optimizer {kind = "sgd"}
  func.func @forward(%x: tensor<?x4x4xf32> {pe.input = "x"}, %l: tensor<?x300x8xf32> {pe.input = "l"})
      -> (tensor<f32> {pe.output = "loss"}, tensor<?x4x4xf32> {pe.output = "rel"},
          tensor<?x300x8xf32> {pe.output = "long"}, tensor<?x300x8xf32> {pe.output = "long_dq"}) {
    %rel = pe.get_param @rel : tensor<4x4x2x2xf32>
    %0 = pe.attention %x, %x, %x, %rel heads(2) scale(5.000000e-01) mask(none) : tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<4x4x2x2xf32> -> tensor<?x4x4xf32>
    %1, %lse = pe.attention %l, %l, %l heads(2) scale(5.000000e-01) mask(none) : tensor<?x300x8xf32>, tensor<?x300x8xf32>, tensor<?x300x8xf32> -> tensor<?x300x8xf32>, tensor<?x2x300xf32>
    %2:3 = pe.attention_grad %l, %l, %l, %1, %lse, %l heads(2) scale(5.000000e-01) mask(none) : tensor<?x300x8xf32>, tensor<?x300x8xf32>, tensor<?x300x8xf32>, tensor<?x300x8xf32>, tensor<?x2x300xf32>, tensor<?x300x8xf32> -> (tensor<?x300x8xf32>, tensor<?x300x8xf32>, tensor<?x300x8xf32>)
    %loss = pe.mean %x : tensor<?x4x4xf32> -> tensor<f32>
    return %loss, %0, %1, %2#0 : tensor<f32>, tensor<?x4x4xf32>, tensor<?x300x8xf32>, tensor<?x300x8xf32>
  }
  func.func @gradients(%x: tensor<?x4x4xf32> {pe.input = "x"}, %l: tensor<?x300x8xf32> {pe.input = "l"})
      -> (tensor<f32> {pe.output = "loss"}) {
    %loss = pe.mean %x : tensor<?x4x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";
  ScratchDir dir;
  ASSERT_EQ(writeCpuPackage(text, dir.file("declined.pkg")), "");
  stringrt::Package package = stringrt::Package::load(dir.file("declined.pkg"));
  const auto &ops = package.manifest().forward.ops;
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_TRUE(ops[1].kernels.empty());  // rel
  EXPECT_FALSE(ops[2].kernels.empty()); // long forward
  EXPECT_TRUE(ops[3].kernels.empty());  // long backward: 300 x 300 floats of scratch
}

} // namespace
