//===- OpKernelsTest.cpp - each generated kernel against the reference ----===//
//
// One pe module whose @forward returns every op kind the CPU code generator
// supports, in every view it builds (same shapes, a trailing-suffix operand
// on either side, a scalar operand, static and batched shapes, rank 1 and
// 3, both gelu forms, layer norm on batched and static rows, of 8 floats
// and of 21: two rounds of MemrefKernelBuilder::sum's eight partial sums and a
// tail). It is compiled
// to a "cpu" package and run with the compiled kernels and with the
// reference kernels on the same inputs. add/sub/mul/scale/relu/relu_grad
// and sum_to must agree bit for bit (the same float operations, sum_to's
// columns in double in row order); gelu (polynomial erf,
// tanh, exp) and layer norm (vectorised sums) to float rounding.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

using namespace stringc::codegen::test;

namespace {

constexpr const char *kOps = R"mlir(
module @ops {
  pe.parameter @b : tensor<8xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 1 : i64}
  pe.parameter @c : tensor<3x8xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 2 : i64}
  pe.parameter @s : tensor<f32> frozen {init = "constant", value = 1.5 : f64}
  pe.parameter @w : tensor<5x8xf32> frozen {init = "normal", mean = 0.5 : f64, std = 2.0 : f64, seed = 3 : i64}
  pe.parameter @g : tensor<8xf32> frozen {init = "normal", mean = 1.0 : f64, std = 0.5 : f64, seed = 4 : i64}
  pe.parameter @g21 : tensor<21xf32> frozen {init = "normal", mean = 1.0 : f64, std = 0.5 : f64, seed = 5 : i64}
  pe.parameter @b21 : tensor<21xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 6 : i64}
  pe.optimizer {kind = "sgd"}
  func.func @forward(%x: tensor<?x3x8xf32> {pe.input = "x"}, %y: tensor<?x3x8xf32> {pe.input = "y"},
                     %z: tensor<?xf32> {pe.input = "z"}, %u: tensor<?x2x21xf32> {pe.input = "u"},
                     %v: tensor<?x2x21xf32> {pe.input = "v"})
      -> (tensor<f32> {pe.output = "loss"},
          tensor<?x3x8xf32> {pe.output = "add"}, tensor<?x3x8xf32> {pe.output = "add_suffix"},
          tensor<?x3x8xf32> {pe.output = "sub_lhs_suffix"}, tensor<?x3x8xf32> {pe.output = "mul_scalar"},
          tensor<5x8xf32> {pe.output = "add_static"}, tensor<?x3x8xf32> {pe.output = "scale"},
          tensor<?x3x8xf32> {pe.output = "gelu"}, tensor<?x3x8xf32> {pe.output = "gelu_tanh"},
          tensor<?x3x8xf32> {pe.output = "gelu_grad"}, tensor<?x3x8xf32> {pe.output = "gelu_grad_tanh"},
          tensor<?x3x8xf32> {pe.output = "relu"}, tensor<?x3x8xf32> {pe.output = "relu_grad"},
          tensor<?xf32> {pe.output = "relu_rank1"}, tensor<8xf32> {pe.output = "mul_rank1_static"},
          tensor<?x3x8xf32> {pe.output = "layer_norm"}, tensor<5x8xf32> {pe.output = "layer_norm_static"},
          tensor<?x3x8xf32> {pe.output = "ln_dx"}, tensor<8xf32> {pe.output = "ln_dgamma"},
          tensor<8xf32> {pe.output = "ln_dbeta"}, tensor<8xf32> {pe.output = "sum_to"},
          tensor<3x8xf32> {pe.output = "sum_to_rows"},
          tensor<?x2x21xf32> {pe.output = "layer_norm_21"}, tensor<?x2x21xf32> {pe.output = "ln21_dx"},
          tensor<21xf32> {pe.output = "ln21_dgamma"}, tensor<21xf32> {pe.output = "ln21_dbeta"},
          tensor<?x3x8xf32> {pe.output = "ln_acc_dx"}, tensor<8xf32> {pe.output = "ln_acc_dgamma"},
          tensor<8xf32> {pe.output = "ln_acc_dbeta"}, tensor<?x3x8xf32> {pe.output = "ln_add_dx"},
          tensor<?x2x21xf32> {pe.output = "ln21_acc_dx"}, tensor<21xf32> {pe.output = "ln21_acc_dgamma"},
          tensor<?x2x21xf32> {pe.output = "ln21_add_dx"}) {
    %b = pe.get_param @b : tensor<8xf32>
    %c = pe.get_param @c : tensor<3x8xf32>
    %s = pe.get_param @s : tensor<f32>
    %w = pe.get_param @w : tensor<5x8xf32>
    %g = pe.get_param @g : tensor<8xf32>
    %g21 = pe.get_param @g21 : tensor<21xf32>
    %b21 = pe.get_param @b21 : tensor<21xf32>
    %0 = pe.add %x, %y : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %1 = pe.add %x, %b : tensor<?x3x8xf32>, tensor<8xf32> -> tensor<?x3x8xf32>
    %2 = pe.sub %c, %x : tensor<3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %3 = pe.mul %x, %s : tensor<?x3x8xf32>, tensor<f32> -> tensor<?x3x8xf32>
    %4 = pe.add %w, %b : tensor<5x8xf32>, tensor<8xf32> -> tensor<5x8xf32>
    %5 = pe.scale %x factor(3.000000e-01) bias(-1.250000e+00) : tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %6 = pe.gelu %x : tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %7 = pe.gelu %x approximate(true) : tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %8 = pe.gelu_grad %x, %y : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %9 = pe.gelu_grad %x, %y approximate(true) : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %10 = pe.relu %x : tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %11 = pe.relu_grad %x, %y : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %12 = pe.relu %z : tensor<?xf32> -> tensor<?xf32>
    %13 = pe.mul %b, %g : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %14 = pe.layer_norm %x, %g, %b : tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<?x3x8xf32>
    %15 = pe.layer_norm %w, %g, %b epsilon(1.000000e-03) : tensor<5x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<5x8xf32>
    %16:3 = pe.layer_norm_grad %x, %g, %y : tensor<?x3x8xf32>, tensor<8xf32>, tensor<?x3x8xf32> -> (tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %17 = pe.sum_to %x : tensor<?x3x8xf32> -> tensor<8xf32>
    %18 = pe.sum_to %y : tensor<?x3x8xf32> -> tensor<3x8xf32>
    %19 = pe.layer_norm %u, %g21, %b21 : tensor<?x2x21xf32>, tensor<21xf32>, tensor<21xf32> -> tensor<?x2x21xf32>
    %20:3 = pe.layer_norm_grad %u, %g21, %v : tensor<?x2x21xf32>, tensor<21xf32>, tensor<?x2x21xf32> -> (tensor<?x2x21xf32>, tensor<21xf32>, tensor<21xf32>)
    // pe-fuse-residual's layer_norm_grad_acc beside the add it replaces.
    %21:3 = pe.layer_norm_grad_acc %0, %x, %g, %y : tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<8xf32>, tensor<?x3x8xf32> -> (tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %22 = pe.add %0, %16#0 : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %23:3 = pe.layer_norm_grad_acc %v, %u, %g21, %v : tensor<?x2x21xf32>, tensor<?x2x21xf32>, tensor<21xf32>, tensor<?x2x21xf32> -> (tensor<?x2x21xf32>, tensor<21xf32>, tensor<21xf32>)
    %24 = pe.add %20#0, %v : tensor<?x2x21xf32>, tensor<?x2x21xf32> -> tensor<?x2x21xf32>
    %loss = pe.mean %0 : tensor<?x3x8xf32> -> tensor<f32>
    return %loss, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16#0, %16#1, %16#2, %17, %18,
           %19, %20#0, %20#1, %20#2, %21#0, %21#1, %21#2, %22, %23#0, %23#1, %24
        : tensor<f32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>,
          tensor<5x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>,
          tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<?xf32>, tensor<8xf32>,
          tensor<?x3x8xf32>, tensor<5x8xf32>, tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32>,
          tensor<8xf32>, tensor<3x8xf32>,
          tensor<?x2x21xf32>, tensor<?x2x21xf32>, tensor<21xf32>, tensor<21xf32>,
          tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x3x8xf32>,
          tensor<?x2x21xf32>, tensor<21xf32>, tensor<?x2x21xf32>
  }
  func.func @gradients(%x: tensor<?x3x8xf32> {pe.input = "x"}, %y: tensor<?x3x8xf32> {pe.input = "y"},
                       %z: tensor<?xf32> {pe.input = "z"}, %u: tensor<?x2x21xf32> {pe.input = "u"},
                       %v: tensor<?x2x21xf32> {pe.input = "v"}) -> (tensor<f32> {pe.output = "loss"}) {
    %loss = pe.mean %x : tensor<?x3x8xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";

/// The outputs that must agree bit for bit (the same float operations).
bool exact(const std::string &name) {
  for (const char *e : {"add", "add_suffix", "sub_lhs_suffix", "mul_scalar", "add_static", "scale",
                        "relu", "relu_grad", "relu_rank1", "mul_rank1_static", "sum_to",
                        "sum_to_rows"})
    if (name == e)
      return true;
  return false;
}

class OpKernels : public ::testing::Test {
protected:
  void SetUp() override {
    std::string path = dir.file("ops.pkg");
    std::string error = writeCpuPackage(kOps, path);
    ASSERT_EQ(error, "");
    package.emplace(stringrt::Package::load(path));
  }
  ScratchDir dir;
  std::optional<stringrt::Package> package;
};

TEST_F(OpKernels, EveryOpIsCompiled) {
  ASSERT_TRUE(package->hasKernels());
  EXPECT_EQ(package->target(), "cpu");
  // Every compute op of @forward names a kernel (pe.mean and get_param do not).
  for (const stringrt::ProgramOp &op : package->manifest().forward.ops) {
    bool supported = op.op != "pe.mean" && op.op != "pe.get_param";
    EXPECT_EQ(!op.kernels.empty(), supported) << op.op;
  }
  // layer_norm_grad(_acc) is two kernels (rows, then parameter columns).
  for (const stringrt::ProgramOp &op : package->manifest().forward.ops)
    if (op.op == "pe.layer_norm_grad" || op.op == "pe.layer_norm_grad_acc")
      ASSERT_EQ(op.kernels.size(), 2u);
}

// layer_norm_grad_acc adds the prior as its dx kernel stores each element:
// the bits of layer_norm_grad's kernel followed by the add's, and its dgamma
// and dbeta those of layer_norm_grad (D = 8, one vector a row, and D = 21,
// vectors and a remainder).
TEST_F(OpKernels, LayerNormGradAccIsBitForBitTheGradientThenTheAdd) {
  stringrt::Model compiled(*package);
  compiled.initParameters();
  for (int64_t batch : {1, 7}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Batch in = randomBatch(package->manifest(), batch, 23 + uint32_t(batch), 2.0f);
    auto out = compiled.run("forward", in.views);
    EXPECT_EQ(out.at("ln_acc_dx").values, out.at("ln_add_dx").values);
    EXPECT_EQ(out.at("ln_acc_dgamma").values, out.at("ln_dgamma").values);
    EXPECT_EQ(out.at("ln_acc_dbeta").values, out.at("ln_dbeta").values);
    EXPECT_EQ(out.at("ln21_acc_dx").values, out.at("ln21_add_dx").values);
    EXPECT_EQ(out.at("ln21_acc_dgamma").values, out.at("ln21_dgamma").values);
    EXPECT_NE(out.at("ln_acc_dx").values, out.at("ln_dx").values); // the prior is not zero
  }
}

TEST_F(OpKernels, CompiledMatchesReference) {
  stringrt::Model compiled(*package);
  EXPECT_EQ(compiled.kernels(), stringrt::KernelSet::Compiled); // the default with kernels
  stringrt::Model reference(*package, stringrt::KernelSet::Reference);
  compiled.initParameters();
  reference.initParameters();
  for (int64_t batch : {1, 7}) {
    // Scale 3: gelu's tails and relu's zeros both show.
    Batch in = randomBatch(package->manifest(), batch, 11 + uint32_t(batch), 3.0f);
    SCOPED_TRACE("batch " + std::to_string(batch));
    expectOutputsMatch(compiled.run("forward", in.views), reference.run("forward", in.views),
                       exact, 2e-6);
  }
}

TEST_F(OpKernels, GeluIsAccurateOnADenseGrid) {
  // gelu and gelu_grad (dy = 1) at 48000 points of [-12, 12] against the
  // formulas in double: KernelMath.cpp's erf (within 3.4e-7) and exp.
  Batch in = randomBatch(package->manifest(), 2000, 3);
  std::vector<float> &x = in.f32.at("x");
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(-12.0 + 24.0 * double(i) / double(x.size() - 1));
  std::fill(in.f32.at("y").begin(), in.f32.at("y").end(), 1.0f);
  stringrt::Model compiled(*package);
  compiled.initParameters();
  auto out = compiled.run("forward", in.views);
  const std::vector<float> &gelu = out.at("gelu").values, &grad = out.at("gelu_grad").values;
  ASSERT_EQ(gelu.size(), x.size());
  double worstGelu = 0, worstGrad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    worstGelu = std::max(worstGelu, std::fabs(gelu[i] - v * cdf) / (1 + std::fabs(v)));
    worstGrad = std::max(worstGrad, std::fabs(grad[i] - (cdf + v * pdf)) / (1 + std::fabs(v)));
  }
  EXPECT_LT(worstGelu, 3e-7);
  EXPECT_LT(worstGrad, 3e-7);
}

TEST_F(OpKernels, ResultsDoNotDependOnTheThreadCount) {
  // A batch big enough that the kernels split over threads.
  expectThreadCountIndependent(*package, randomBatch(package->manifest(), 3000, 5));
}

TEST(OpKernelsPlan, SharedKernelsAndUnsupportedShapes) {
  // Two identical adds share a kernel; a different scale factor does not.
  const char *text = R"mlir(
module @share {
  pe.optimizer {kind = "sgd"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %0 = pe.add %x, %x : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %1 = pe.add %0, %x : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %2 = pe.scale %1 factor(2.000000e+00) : tensor<?x4xf32> -> tensor<?x4xf32>
    %3 = pe.scale %2 factor(2.000000e+00) bias(1.000000e-30) : tensor<?x4xf32> -> tensor<?x4xf32>
    %loss = pe.mean %3 : tensor<?x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @gradients(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %0 = pe.add %x, %x : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %loss = pe.mean %0 : tensor<?x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";
  ScratchDir dir;
  ASSERT_EQ(writeCpuPackage(text, dir.file("share.pkg")), "");
  stringrt::Package package = stringrt::Package::load(dir.file("share.pkg"));
  const auto &ops = package.manifest().forward.ops;
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[0].kernels[0].symbol, ops[1].kernels[0].symbol);
  EXPECT_NE(ops[2].kernels[0].symbol, ops[3].kernels[0].symbol);
  EXPECT_EQ(package.manifest().gradients.ops[0].kernels[0].symbol, ops[0].kernels[0].symbol);
  EXPECT_EQ(ops[0].kernels[0].range, -1);
  EXPECT_TRUE(ops[4].kernels.empty()); // pe.mean: the runtime's kernel
}

} // namespace
