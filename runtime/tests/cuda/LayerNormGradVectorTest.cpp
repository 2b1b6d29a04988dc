// The vectorised layer-norm backward (compiler/lib/CudaGen/NormKernels.cpp,
// pe_layer_norm_grad_fused, pe_layer_norm_grad_acc_fused and their bf16
// variants __bbb and __bbbb: gamma and each round's rows of x and dy staged
// in shared memory with 16-byte loads, dx written with 16-byte stores, when
// D % 8 == 0 and dx, x, gamma, dy (and prior) are 16-byte aligned; else the
// scalar rows), from the package of tests/cuda/kernels.pe
// (STRINGRT_CUDA_TEST_PACKAGE); every test skips without it or without a GPU.
//
// For D = 8, 24, 384, 1000, 1024 (vector rows) and 390 (scalar: D % 8), 37
// rows in 5 chunks (8, 8, 8, 8 and 5 rows: a last round of one row) and in
// 50 (one row each, 13 chunks empty): the aligned launch must give the same
// bits of dx and of every chunk's partial sums of dgamma and dbeta as the
// launches that take the scalar path (dx, x, dy, gamma or prior one element
// off): the sums' order is the scalar kernel's; no element outside dx and
// the partials is written; and dx, dgamma and dbeta (the partials added)
// are the reference's within the fused kernel's tolerances (bf16: one
// rounding of dx more).
#include "Bf16Bits.h"
#include "SentinelSession.h"

#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace stringrt::cuda {
namespace {

using KA = KernelArg;

// Element shifts of the buffers of one launch (0: 16-byte aligned).
struct Shifts {
  int64_t dx = 0, prior = 0, x = 0, gamma = 0, dy = 0;
};

// What one launch wrote: dx's bits (f32 words; bf16 in the high half) and
// the partials' (f32).
struct GradBits {
  std::vector<uint32_t> dx, partials;
};

class GpuLayerNormGradVector : public ::testing::Test, protected SentinelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(16) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(17);
  }

  GradBits run(const std::string &kernel, bool bf16, bool accumulate,
               const std::vector<float> &prior, const std::vector<float> &x,
               const std::vector<float> &gamma, const std::vector<float> &dy, int64_t rows,
               int64_t d, int64_t chunks, Shifts shift) {
    clearBuffers();
    const int64_t n = rows * d, cols = 2 * d;
    size_t dxOffset = 0, partialsOffset = 0, unused = 0;
    uint64_t pdx = place({}, n, bf16, shift.dx, dxOffset);
    uint64_t partials = place({}, chunks * cols, false, 0, partialsOffset);
    uint64_t pprior = accumulate ? place(prior, n, bf16, shift.prior, unused) : 0;
    uint64_t px = place(x, n, bf16, shift.x, unused);
    uint64_t pg = place(gamma, d, false, shift.gamma, unused);
    uint64_t pdy = place(dy, n, bf16, shift.dy, unused);
    std::vector<KA> args = {KA::pointer(pdx), KA::pointer(partials)};
    if (accumulate)
      args.push_back(KA::pointer(pprior));
    args.insert(args.end(), {KA::pointer(px), KA::pointer(pg), KA::pointer(pdy), KA::integer(rows),
                             KA::integer(d), KA::integer(chunks), KA::real(1e-5f)});
    launchGrid(kernel.c_str(), args, {chunks, 1, 1});
    std::string what = kernel + " D=" + std::to_string(d) + " chunks=" + std::to_string(chunks);
    GradBits bits;
    bits.dx = readBack(dxOffset, n, bf16, shift.dx, what + " dx");
    bits.partials = readBack(partialsOffset, chunks * cols, false, 0, what + " partials");
    return bits;
  }
};

float asFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST_F(GpuLayerNormGradVector, VectorRowsHaveTheScalarBitsAndTheReferences) {
  for (bool accumulate : {false, true}) {
    for (bool bf16 : {false, true}) {
      std::string kernel = accumulate ? "pe_layer_norm_grad_acc_fused" : "pe_layer_norm_grad_fused";
      if (bf16)
        kernel += accumulate ? "__bbbb" : "__bbb"; // dx, [prior,] x, dy
      ASSERT_NE(package->cuda()->find(kernel), nullptr) << kernel << " is not in the package";
      for (int64_t d : {8, 24, 384, 390, 1000, 1024}) {
        for (int64_t chunks : {5, 50}) {
          const int64_t rows = 37, n = rows * d;
          std::vector<float> x = random(size_t(n)), gamma = random(size_t(d)),
                             dy = random(size_t(n)), prior = random(size_t(n));
          for (float &v : x) // an offset tests the two-pass variance
            v += 100.0f;
          if (bf16)
            for (std::vector<float> *t : {&x, &dy, &prior})
              for (float &v : *t)
                v = fromBf16(toBf16(v));
          std::string what = kernel + " D=" + std::to_string(d) +
                             " chunks=" + std::to_string(chunks);
          auto launch = [&](Shifts s) {
            return run(kernel, bf16, accumulate, prior, x, gamma, dy, rows, d, chunks, s);
          };
          GradBits vector = launch({});
          std::vector<std::pair<const char *, Shifts>> scalar = {
              {"dx", {1, 0, 0, 0, 0}},
              {"x", {0, 0, 1, 0, 0}},
              {"gamma", {0, 0, 0, 1, 0}},
              {"dy", {0, 0, 0, 0, 1}}};
          if (accumulate)
            scalar.push_back({"prior", {0, 1, 0, 0, 0}});
          for (const auto &[which, s] : scalar) {
            GradBits other = launch(s);
            EXPECT_EQ(other.dx, vector.dx) << what << ": dx, with " << which << " misaligned";
            EXPECT_EQ(other.partials, vector.partials)
                << what << ": partials, with " << which << " misaligned";
          }

          std::vector<float> wdx(static_cast<size_t>(n)), wdg(static_cast<size_t>(d)),
              wdb(static_cast<size_t>(d));
          ref::layerNormGrad<float>({x.data(), {rows, d}}, {gamma.data(), {d}},
                                    {dy.data(), {rows, d}}, 1e-5, {wdx.data(), {rows, d}},
                                    {wdg.data(), {d}}, {wdb.data(), {d}});
          if (accumulate)
            for (int64_t i = 0; i < n; ++i)
              wdx[size_t(i)] += prior[size_t(i)];
          for (int64_t i = 0; i < n; ++i) {
            double w = wdx[size_t(i)];
            // f32: the fused kernel's dx tolerance; bf16: one rounding more.
            double tolerance =
                1e-3 * (1 + std::fabs(w)) + (bf16 ? std::ldexp(std::fabs(w), -8) : 0);
            ASSERT_LE(std::fabs(double(asFloat(vector.dx[size_t(i)])) - w), tolerance)
                << what << " dx element " << i;
          }
          for (int64_t c = 0; c < d; ++c) { // the chunks' partials added in chunk order
            float dgamma = 0, dbeta = 0;
            for (int64_t g = 0; g < chunks; ++g) {
              dgamma += asFloat(vector.partials[size_t(g * 2 * d + c)]);
              dbeta += asFloat(vector.partials[size_t(g * 2 * d + d + c)]);
            }
            // the tolerances of GpuKernels.LayerNormBackwardInOnePass
            double wg = wdg[size_t(c)], wb = wdb[size_t(c)];
            ASSERT_LE(std::fabs(double(dgamma) - wg), 1e-4 * (1 + std::fabs(wg)))
                << what << " dgamma column " << c;
            ASSERT_LE(std::fabs(double(dbeta) - wb), 1e-5 * (1 + std::fabs(wb)))
                << what << " dbeta column " << c;
          }
        }
      }
    }
  }
}

} // namespace
} // namespace stringrt::cuda
