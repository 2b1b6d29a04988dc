// The kernels stringc generates (compiler/lib/CudaGen), run on the GPU and
// compared with the runtime's reference kernels. The package comes from the
// environment: STRINGRT_CUDA_TEST_PACKAGE names a package compiled with
// `stringc tests/cuda/kernels.pe --target=cuda` (tests/cuda/CMakeLists.txt and
// scripts/gpu_verify.sh set it). Loading and checking the kernel table needs
// no GPU; each launch test skips without one.
#include "GpuKernelSession.h"
#include "OpCall.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/StepBinding.h"
#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace stringrt::cuda {
namespace {

#define REQUIRE_PACKAGE()                                                                          \
  do {                                                                                             \
    std::string why;                                                                               \
    if (kernelPackagePath(&why).empty())                                                           \
      GTEST_SKIP() << why;                                                                         \
  } while (0)

TEST(CompiledPackage, HasEveryKernelWithBinaries) {
  REQUIRE_PACKAGE();
  Package package = Package::load(kernelPackagePath());
  ASSERT_NE(package.cuda(), nullptr);
  const CudaSection &cuda = *package.cuda();
  for (const char *name :
       {"pe_add", "pe_add_br", "pe_sub", "pe_mul_bl", "pe_mul_br", "pe_scale", "pe_gelu",
        "pe_gelu_tanh", "pe_gelu_grad", "pe_gelu_grad_tanh", "pe_relu", "pe_relu_grad",
        "pe_layer_norm", "pe_layer_norm_grad_fused",
        "pe_colsum_finish_pair", "pe_adamw", "pe_dropout",
        "pe_sumsq_partials", "pe_optimizer_scalars"}) {
    const CudaKernel *k = cuda.find(name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_FALSE(k->cubin.empty()) << name;
    EXPECT_NE(k->ptx.find(".target " + cuda.arch), std::string::npos) << name;
    // The tanh GELU cannot be written in a .pe file: generated, never used.
    // (The package is bf16: an op may launch a bf16 variant, NAME__bf...,
    // instead of the kernel itself.)
    bool tanh = std::string(name).find("tanh") != std::string::npos;
    bool used = !k->uses.empty();
    for (const CudaKernel &variant : cuda.kernels)
      used = used || (variant.name.rfind(std::string(name) + "__", 0) == 0 && !variant.uses.empty());
    EXPECT_EQ(!used, tanh) << name;
  }
  // Every compute op of kernels.pe has GPU steps, so the device executor
  // would take the package.
  EXPECT_GT(cuda.opsWithKernel, 0);
  EXPECT_EQ(cuda.opsWithKernel, cuda.ops);
  for (const char *program : {"forward", "gradients"}) {
    ASSERT_NE(cuda.stepsOf(program), nullptr) << program;
    EXPECT_TRUE(uncoveredOps(cuda, package.manifest().program(program), program).empty())
        << program;
  }
}

// A device, the package's kernels on it, and an arena of float buffers.
class GpuKernels : public ::testing::Test, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(64) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(42);
  }
};

using ref::TensorRef;
using KA = KernelArg;

TEST_F(GpuKernels, BinaryOpsWithBroadcasting) {
  const int64_t B = 3, T = 5, D = 7, n = B * T * D;
  std::vector<float> full = random(n), other = random(n), suffix = random(T * D);
  struct Case {
    const char *kernel;
    const std::vector<float> *lhs, *rhs;
    void (*reference)(TensorRef<const float>, TensorRef<const float>, TensorRef<float>);
  };
  auto shape = [&](const std::vector<float> *v) {
    return v->size() == size_t(n) ? std::vector<int64_t>{B, T, D} : std::vector<int64_t>{T, D};
  };
  const Case cases[] = {{"pe_add", &full, &other, ref::add<float>},
                        {"pe_add_br", &full, &suffix, ref::add<float>},
                        {"pe_sub", &full, &other, ref::sub<float>},
                        {"pe_mul_bl", &suffix, &full, ref::mul<float>},
                        {"pe_mul_br", &full, &suffix, ref::mul<float>}};
  for (const Case &c : cases) {
    uint64_t out = zeros(n), lhs = put(*c.lhs), rhs = put(*c.rhs);
    // Same shapes: the vectorised kernel (out, lhs, rhs, threads, n).
    std::vector<KA> args = {KA::pointer(out), KA::pointer(lhs), KA::pointer(rhs)};
    if (c.lhs->size() == c.rhs->size())
      args.insert(args.end(), {KA::integer((n + 7) / 8), KA::integer(n)});
    else
      args.insert(args.end(), {KA::integer(n), KA::integer(int64_t(c.lhs->size())),
                               KA::integer(int64_t(c.rhs->size()))});
    kernels->launch(c.kernel, args, c.kernel);
    std::vector<float> want(n);
    c.reference({c.lhs->data(), shape(c.lhs)}, {c.rhs->data(), shape(c.rhs)},
                {want.data(), {B, T, D}});
    expectClose(get(out, n), want, 0, c.kernel); // exact: one f32 operation
  }
}

TEST_F(GpuKernels, UnaryOpsAndGradients) {
  const int64_t n = 4099; // not a multiple of the block
  std::vector<float> x = random(n), dy = random(n);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = NAN;
  uint64_t dx = put(x), ddy = put(dy);
  auto run = [&](const char *kernel, std::vector<KA> extra, bool withDy) {
    uint64_t out = zeros(n);
    std::vector<KA> args = {KA::pointer(out), KA::pointer(dx)};
    if (withDy)
      args.push_back(KA::pointer(ddy));
    args.push_back(KA::integer((n + 7) / 8)); // threads: 8 elements each
    args.push_back(KA::integer(n));
    for (const KA &a : extra)
      args.push_back(a);
    kernels->launch(kernel, args, kernel);
    return get(out, n);
  };
  std::vector<float> want(n);
  TensorRef<const float> X{x.data(), {n}}, DY{dy.data(), {n}};
  TensorRef<float> W{want.data(), {n}};
  auto finite = [&](std::vector<float> v) { // NaN at 2 compared separately
    EXPECT_TRUE(std::isnan(v[2]));
    v[2] = want[2] = 0;
    return v;
  };

  // relu's kernels are its op file's own: run through its registration
  // (into want's storage, which W views).
  using stringrt::test::OpCall;
  const ref::Tensor<float> xT({n}, x), dyT({n}, dy);
  auto reference = [&](const OpCall &op) {
    const std::vector<float> got = op.reference()[0].values;
    std::copy(got.begin(), got.end(), want.begin());
  };
  reference({OpCode::Relu, {xT}, {{n}}});
  expectClose(finite(run("pe_relu", {}, false)), want, 0, "relu");
  reference({OpCode::ReluGrad, {xT, dyT}, {{n}}});
  std::vector<float> reluGrad = run("pe_relu_grad", {}, true);
  EXPECT_EQ(reluGrad[2], 0.0f); // NaN > 0 is false: no gradient
  expectClose(reluGrad, want, 0, "relu_grad");
  ref::scale<float>(X, 0.25, -1.5, W);
  expectClose(finite(run("pe_scale", {KA::real(0.25f), KA::real(-1.5f)}, false)), want, 1e-7,
              "scale");
  for (bool approximate : {false, true}) {
    std::string suffix = approximate ? "_tanh" : "";
    ref::gelu<float>(X, approximate, W);
    expectClose(finite(run(("pe_gelu" + suffix).c_str(), {}, false)), want, 2e-6, "gelu");
    ref::geluGrad<float>(X, DY, approximate, W);
    expectClose(finite(run(("pe_gelu_grad" + suffix).c_str(), {}, true)), want, 2e-6,
                "gelu_grad");
  }
}

TEST_F(GpuKernels, LayerNormForwardAndBackward) {
  for (int64_t D : {1, 31, 64, 65, 200, 384, 385, 1000}) {
    const int64_t rows = 37, n = rows * D;
    std::vector<float> x = random(n), gamma = random(D), beta = random(D), dy = random(n);
    for (int64_t r = 0; r < rows; ++r) // offsets test the two-pass variance
      for (int64_t d = 0; d < D; ++d)
        x[r * D + d] += 100.0f;
    uint64_t gx = put(x), gg = put(gamma), gb = put(beta), gdy = put(dy);
    uint64_t y = zeros(n), dx = zeros(n), stats = zeros(2 * rows), dg = zeros(D), db = zeros(D);
    const float eps = 1e-5f;
    kernels->launch("pe_layer_norm",
                    {KA::pointer(y), KA::pointer(gx), KA::pointer(gg), KA::pointer(gb),
                     KA::integer(rows), KA::integer(D), KA::real(eps)},
                    "layer_norm");
    kernels->launch("pe_layer_norm_grad_rows",
                    {KA::pointer(dx), KA::pointer(stats), KA::pointer(gx), KA::pointer(gg),
                     KA::pointer(gdy), KA::integer(rows), KA::integer(D), KA::real(eps)},
                    "layer_norm_grad rows");
    // dgamma and dbeta as lowered: partial sums over chunks of rows (here
    // 5, the last one short), the last block of each group of 32 columns
    // (kColumnBlock) adding them, in one launch.
    const int64_t chunks = 5, groups = (2 * D + 31) / 32;
    uint64_t partials = zeros(chunks * 2 * D), tickets = zeros(size_t(groups));
    const std::array<int64_t, 3> grid = {groups, chunks, 1};
    kernels->launch("pe_layer_norm_grad_partials",
                    {KA::pointer(partials), KA::pointer(gx), KA::pointer(gdy), KA::pointer(stats),
                     KA::integer(rows), KA::integer(2 * D), KA::integer(chunks), KA::integer(D),
                     KA::pointer(tickets), KA::pointer(dg), KA::pointer(db), KA::integer(D)},
                    "layer_norm_grad partials", &grid);
    std::vector<float> wy(n), wdx(n), wdg(D), wdb(D);
    ref::layerNorm<float>({x.data(), {rows, D}}, {gamma.data(), {D}}, {beta.data(), {D}}, eps,
                          {wy.data(), {rows, D}});
    ref::layerNormGrad<float>({x.data(), {rows, D}}, {gamma.data(), {D}}, {dy.data(), {rows, D}},
                              eps, {wdx.data(), {rows, D}}, {wdg.data(), {D}}, {wdb.data(), {D}});
    expectClose(get(y, n), wy, 1e-4, "layer_norm");
    expectClose(get(dx, n), wdx, 1e-3, "layer_norm_grad dx");
    expectClose(get(dg, D), wdg, 1e-4, "layer_norm_grad dgamma");
    expectClose(get(db, D), wdb, 1e-5, "layer_norm_grad dbeta");
  }
}

// layer_norm_grad (and _acc, dx = prior + ...) in one pass per chunk of rows
// (pe_layer_norm_grad[_acc]_fused, D <= 1024): dx and the chunks' partial
// sums of dgamma and dbeta, added by pe_colsum_finish_pair, against the
// reference; chunks of several rows per warp, of one row, and empty ones.
TEST_F(GpuKernels, LayerNormBackwardInOnePass) {
  for (int64_t D : {1, 31, 64, 65, 200, 384, 385, 1000, 1024}) {
    for (int64_t chunks : {1, 3, 37, 50}) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE("D " + std::to_string(D) + ", chunks " + std::to_string(chunks) +
                     (accumulate ? ", acc" : ""));
        const int64_t rows = 37, n = rows * D;
        std::vector<float> x = random(n), gamma = random(D), dy = random(n), prior = random(n);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t d = 0; d < D; ++d)
            x[r * D + d] += 100.0f;
        uint64_t gx = put(x), gg = put(gamma), gdy = put(dy), gprior = put(prior);
        uint64_t dx = zeros(n), dg = zeros(D), db = zeros(D);
        uint64_t partials = put(std::vector<float>(size_t(chunks * 2 * D), 7.0f)); // all written
        const float eps = 1e-5f;
        std::vector<KA> args = {KA::pointer(dx), KA::pointer(partials)};
        if (accumulate)
          args.push_back(KA::pointer(gprior));
        args.insert(args.end(), {KA::pointer(gx), KA::pointer(gg), KA::pointer(gdy),
                                 KA::integer(rows), KA::integer(D), KA::integer(chunks),
                                 KA::real(eps)});
        const std::array<int64_t, 3> grid = {chunks, 1, 1};
        kernels->launch(accumulate ? "pe_layer_norm_grad_acc_fused" : "pe_layer_norm_grad_fused",
                        args, "layer_norm_grad fused", &grid);
        kernels->launch("pe_colsum_finish_pair",
                        {KA::pointer(dg), KA::pointer(db), KA::pointer(partials),
                         KA::integer(2 * D), KA::integer(chunks), KA::integer(D)},
                        "layer_norm_grad finish");
        std::vector<float> wdx(n), wdg(D), wdb(D);
        ref::layerNormGrad<float>({x.data(), {rows, D}}, {gamma.data(), {D}},
                                  {dy.data(), {rows, D}}, eps, {wdx.data(), {rows, D}},
                                  {wdg.data(), {D}}, {wdb.data(), {D}});
        if (accumulate)
          for (int64_t i = 0; i < n; ++i)
            wdx[size_t(i)] += prior[size_t(i)];
        expectClose(get(dx, n), wdx, 1e-3, "layer_norm_grad dx");
        expectClose(get(dg, D), wdg, 1e-4, "layer_norm_grad dgamma");
        expectClose(get(db, D), wdb, 1e-5, "layer_norm_grad dbeta");
      }
    }
  }
}

// The optimizer kernels (pe_adamw, pe_sgd, pe_optimizer_scalars): DeviceOptimizerTest.cpp.

TEST_F(GpuKernels, SquaredNormPartials) {
  const int64_t n = 100003;
  std::vector<float> g = random(n);
  uint64_t gg = put(g), partials = zeros(1024);
  kernels->launch("pe_sumsq_partials", {KA::pointer(partials), KA::pointer(gg), KA::integer(n)},
                  "gradient norm");
  std::vector<float> got = get(partials, 1024);
  double sum = 0, want = 0;
  for (float x : got)
    sum += x;
  for (float x : g)
    want += double(x) * x;
  EXPECT_NEAR(sum, want, 1e-5 * want);
}

// pe_dropout draws the reference's masks bit for bit (DropoutMask.h): the
// key read from the step key buffer, the threshold ceil(p 2^24) and the
// scale float(1 / (1 - p)) as the lowering passes them (DropoutKernels.cpp),
// on samples of 21 elements (not a multiple of four), with an offset first
// sample and a seed whose high word matters.
TEST_F(GpuKernels, DropoutDrawsTheReferencesMasksBitForBit) {
  const int64_t B = 5, T = 3, D = 7, perSample = T * D, n = B * perSample;
  const int64_t groupsPerSample = (perSample + 3) / 4, stream = 6;
  const StepKey key{(uint64_t(1) << 33) + 5, 17, 3};
  const std::vector<int32_t> keyWords = {int32_t(uint32_t(key.seed)),
                                         int32_t(uint32_t(key.seed >> 32)), int32_t(key.step),
                                         int32_t(key.firstSample)};
  std::vector<float> x = random(n);
  const uint64_t dx = put(x), dkey = putInts(keyWords);
  for (double p : {0.0, 0.1, 0.5, 0.9}) {
    for (bool perSampleMask : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << (perSampleMask ? " drop-path" : ""));
      const uint64_t out = output(n);
      launch("pe_dropout",
             {KA::pointer(out), KA::pointer(dx), KA::pointer(dkey),
              KA::integer(B * groupsPerSample), KA::integer(perSample),
              KA::integer(groupsPerSample), KA::integer(stream),
              KA::integer(int64_t(std::ceil(p * 16777216.0))),
              KA::integer(perSampleMask ? 1 : 0), KA::real(float(1.0 / (1.0 - p)))});
      std::vector<float> want(n);
      ref::dropout<float>({x.data(), {B, T, D}}, p, perSampleMask, stream, key,
                          {want.data(), {B, T, D}});
      std::vector<float> got = get(out, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[size_t(i)], want[size_t(i)]) << "element " << i;
    }
  }
}

TEST_F(GpuKernels, LaunchErrorsNameTheKernelAndStep) {
  try {
    kernels->launch("pe_relu", {KA::pointer(0)}, "step 7 forward op 3");
    FAIL();
  } catch (const Error &error) {
    std::string what = error.what();
    EXPECT_NE(what.find("step 7 forward op 3"), std::string::npos) << what;
    EXPECT_NE(what.find("pe_relu"), std::string::npos) << what;
  }
}

} // namespace
} // namespace stringrt::cuda
