//===- TokenRopeLossKernelsTest.cpp - rope, token and loss kernels ---------===//
//
// The kernels of RopeGen.cpp, TokenGen.cpp and LossGen.cpp
// against the reference kernels, on one pe module whose @forward returns
// each op in the views the generator builds: rope_apply (batched and static,
// inverse, an odd number of pairs) and its table gradient; token_embed and token_embed_grad with i32 ids (a vocabulary of
// 37 rows: three blocks of token_embed_grad's split, the last partial);
// class_token, class_token_grad, select_token (first, middle and last
// index) and select_token_grad; cross_entropy_grad with i32 labels. The
// ids and labels include both boundaries, 0 and the bound - 1. The copies
// and the sums in double in the reference's order (rope_apply_grad_table,
// token_embed_grad, class_token_grad's dcls) must agree bit for bit;
// rope_apply (float, as the fast kernel) and cross_entropy_grad (float exp
// polynomial and sums, as the fast kernel) to float rounding. Batches 1 and 7, and
// a large batch on 1 and 3 threads.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

using namespace stringc::codegen::test;

namespace {

constexpr int32_t kVocab = 37, kClasses = 11;

constexpr const char *kOps = R"mlir(
module @ops {
  pe.parameter @tab : tensor<6x5x2xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 1 : i64}
  pe.parameter @emb : tensor<37x7xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 2 : i64}
  pe.parameter @cls : tensor<7xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 3 : i64}
  pe.parameter @dy : tensor<f32> frozen {init = "constant", value = 1.75 : f64}
  pe.parameter @w : tensor<3x6x10xf32> frozen {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 4 : i64}
  pe.optimizer {kind = "sgd"}
  func.func @forward(%x: tensor<?x6x10xf32> {pe.input = "x"}, %y: tensor<?x6x10xf32> {pe.input = "y"},
                     %ids: tensor<?x5xi32> {pe.input = "ids"}, %e: tensor<?x5x7xf32> {pe.input = "e"},
                     %t: tensor<?x4x7xf32> {pe.input = "t"}, %s: tensor<?x7xf32> {pe.input = "s"},
                     %logits: tensor<?x5x11xf32> {pe.input = "logits"}, %labels: tensor<?x5xi32> {pe.input = "labels"})
      -> (tensor<f32> {pe.output = "loss"},
          tensor<?x6x10xf32> {pe.output = "rope"}, tensor<?x6x10xf32> {pe.output = "rope_inverse"},
          tensor<3x6x10xf32> {pe.output = "rope_static"},
          tensor<6x5x2xf32> {pe.output = "rope_dtable"}, tensor<6x5x2xf32> {pe.output = "rope_dtable_inverse"},
          tensor<6x5x2xf32> {pe.output = "rope_dtable_static"},
          tensor<?x5x7xf32> {pe.output = "token_embed"}, tensor<37x7xf32> {pe.output = "token_embed_grad"},
          tensor<?x5x7xf32> {pe.output = "class_token"}, tensor<?x4x7xf32> {pe.output = "class_token_dx"},
          tensor<7xf32> {pe.output = "class_token_dcls"}, tensor<?x7xf32> {pe.output = "select_first"},
          tensor<?x7xf32> {pe.output = "select_middle"}, tensor<?x7xf32> {pe.output = "select_last"},
          tensor<?x5x7xf32> {pe.output = "select_grad"}, tensor<?x5x11xf32> {pe.output = "ce_grad"}) {
    %tab = pe.get_param @tab : tensor<6x5x2xf32>
    %emb = pe.get_param @emb : tensor<37x7xf32>
    %cls = pe.get_param @cls : tensor<7xf32>
    %dy = pe.get_param @dy : tensor<f32>
    %w = pe.get_param @w : tensor<3x6x10xf32>
    %0 = pe.rope_apply %x, %tab : tensor<?x6x10xf32>, tensor<6x5x2xf32> -> tensor<?x6x10xf32>
    %1 = pe.rope_apply %x, %tab inverse(true) : tensor<?x6x10xf32>, tensor<6x5x2xf32> -> tensor<?x6x10xf32>
    %3 = pe.rope_apply %w, %tab : tensor<3x6x10xf32>, tensor<6x5x2xf32> -> tensor<3x6x10xf32>
    %4 = pe.rope_apply_grad_table %x, %y : tensor<?x6x10xf32>, tensor<?x6x10xf32> -> tensor<6x5x2xf32>
    %5 = pe.rope_apply_grad_table %x, %y inverse(true) : tensor<?x6x10xf32>, tensor<?x6x10xf32> -> tensor<6x5x2xf32>
    %6 = pe.rope_apply_grad_table %w, %w : tensor<3x6x10xf32>, tensor<3x6x10xf32> -> tensor<6x5x2xf32>
    %7 = pe.token_embed %ids, %emb : tensor<?x5xi32>, tensor<37x7xf32> -> tensor<?x5x7xf32>
    %8 = pe.token_embed_grad %ids, %e : tensor<?x5xi32>, tensor<?x5x7xf32> -> tensor<37x7xf32>
    %9 = pe.class_token %t, %cls : tensor<?x4x7xf32>, tensor<7xf32> -> tensor<?x5x7xf32>
    %10:2 = pe.class_token_grad %e : tensor<?x5x7xf32> -> (tensor<?x4x7xf32>, tensor<7xf32>)
    %11 = pe.select_token %e index(0) : tensor<?x5x7xf32> -> tensor<?x7xf32>
    %12 = pe.select_token %e index(2) : tensor<?x5x7xf32> -> tensor<?x7xf32>
    %13 = pe.select_token %e index(4) : tensor<?x5x7xf32> -> tensor<?x7xf32>
    %14 = pe.select_token_grad %s index(4) : tensor<?x7xf32> -> tensor<?x5x7xf32>
    %15 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?x5x11xf32>, tensor<?x5xi32>, tensor<f32> -> tensor<?x5x11xf32>
    %loss = pe.mean %x : tensor<?x6x10xf32> -> tensor<f32>
    return %loss, %0, %1, %3, %4, %5, %6, %7, %8, %9, %10#0, %10#1, %11, %12, %13, %14, %15
        : tensor<f32>, tensor<?x6x10xf32>, tensor<?x6x10xf32>, tensor<3x6x10xf32>,
          tensor<6x5x2xf32>, tensor<6x5x2xf32>, tensor<6x5x2xf32>, tensor<?x5x7xf32>, tensor<37x7xf32>,
          tensor<?x5x7xf32>, tensor<?x4x7xf32>, tensor<7xf32>, tensor<?x7xf32>, tensor<?x7xf32>,
          tensor<?x7xf32>, tensor<?x5x7xf32>, tensor<?x5x11xf32>
  }
  func.func @gradients(%x: tensor<?x6x10xf32> {pe.input = "x"}, %y: tensor<?x6x10xf32> {pe.input = "y"},
                       %ids: tensor<?x5xi32> {pe.input = "ids"}, %e: tensor<?x5x7xf32> {pe.input = "e"},
                       %t: tensor<?x4x7xf32> {pe.input = "t"}, %s: tensor<?x7xf32> {pe.input = "s"},
                       %logits: tensor<?x5x11xf32> {pe.input = "logits"}, %labels: tensor<?x5xi32> {pe.input = "labels"})
      -> (tensor<f32> {pe.output = "loss"}) {
    %loss = pe.mean %x : tensor<?x6x10xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";

/// Random i32 inputs in [0, bound) for ids and labels, with both boundaries
/// (the first element 0, the last bound - 1).
void fillIndices(Batch &batch, const std::string &name, int32_t bound, uint32_t seed) {
  std::vector<int32_t> &v = batch.i32.at(name);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> ints(0, bound - 1);
  for (int32_t &id : v)
    id = ints(rng);
  v.front() = 0;
  v.back() = bound - 1;
}

Batch inputs(const stringrt::Manifest &manifest, int64_t batch, uint32_t seed) {
  Batch in = randomBatch(manifest, batch, seed, 2.0f);
  fillIndices(in, "ids", kVocab, seed + 100);
  fillIndices(in, "labels", kClasses, seed + 200);
  return in;
}

class TokenRopeLossKernels : public ::testing::Test {
protected:
  void SetUp() override {
    std::string path = dir.file("ops.pkg");
    ASSERT_EQ(writeCpuPackage(kOps, path), "");
    package.emplace(stringrt::Package::load(path));
  }
  ScratchDir dir;
  std::optional<stringrt::Package> package;
};

TEST_F(TokenRopeLossKernels, EveryOpIsCompiled) {
  for (const stringrt::ProgramOp &op : package->manifest().forward.ops) {
    bool supported = op.op != "pe.mean" && op.op != "pe.get_param";
    EXPECT_EQ(!op.kernels.empty(), supported) << op.op;
    if (op.op == "pe.class_token_grad")
      EXPECT_EQ(op.kernels.size(), 2u); // _dx over the batch, _dcls over the columns
    if (op.op == "pe.token_embed_grad") {
      ASSERT_EQ(op.kernels.size(), 1u);
      EXPECT_EQ(op.kernels[0].range, 3); // blocks of 16 of the 37 table rows
    }
    if (op.op == "pe.rope_apply_grad_table")
      EXPECT_EQ(op.kernels[0].range, 6); // the tokens
  }
}

TEST_F(TokenRopeLossKernels, CompiledMatchesReference) {
  stringrt::Model compiled(*package);
  ASSERT_EQ(compiled.kernels(), stringrt::KernelSet::Compiled);
  stringrt::Model reference(*package, stringrt::KernelSet::Reference);
  compiled.initParameters();
  reference.initParameters();
  for (int64_t batch : {1, 7}) {
    Batch in = inputs(package->manifest(), batch, 21 + uint32_t(batch));
    SCOPED_TRACE("batch " + std::to_string(batch));
    // Float arithmetic in ce_grad and rope_apply; copies and double sums elsewhere.
    auto exact = [](const std::string &name) {
      return !(name == "ce_grad" ||
               (name.rfind("rope", 0) == 0 && name.rfind("rope_dtable", 0) != 0));
    };
    expectOutputsMatch(compiled.run("forward", in.views), reference.run("forward", in.views),
                       exact, 2e-6);
  }
}

TEST_F(TokenRopeLossKernels, ResultsDoNotDependOnTheThreadCount) {
  expectThreadCountIndependent(*package, inputs(package->manifest(), 2000, 5));
}

TEST_F(TokenRopeLossKernels, OutOfRangeIndicesAreRefused) {
  // The kernels address memory with the ids and labels: the executor checks
  // them first, as the reference kernels do.
  stringrt::Model model(*package, stringrt::KernelSet::Compiled);
  model.initParameters();
  for (const auto &[name, bad] : {std::pair<std::string, int32_t>{"ids", kVocab},
                                  {"ids", -1}, {"labels", kClasses}}) {
    Batch in = inputs(package->manifest(), 3, 9);
    in.i32.at(name)[4] = bad;
    try {
      model.run("forward", in.views);
      ADD_FAILURE() << name << " " << bad << " was not refused";
    } catch (const stringrt::Error &e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad) + " at flat index 4"),
                std::string::npos)
          << e.what();
    }
  }
}

} // namespace
