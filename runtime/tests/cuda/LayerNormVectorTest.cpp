// The vectorised layer norm (compiler/lib/CudaGen/NormKernels.cpp,
// pe_layer_norm and pe_layer_norm__bb: rows staged in shared memory with
// 16-byte loads, y written with 16-byte stores, when D % 8 == 0, D <= 1024
// and y, x, gamma and beta are 16-byte aligned; else the scalar kernel),
// from the package of tests/cuda/kernels.pe (STRINGRT_CUDA_TEST_PACKAGE);
// every test skips without it or without a GPU.
//
// For D = 8, 24, 384, 390 (scalar: D % 8) and 1032 (scalar: wider than the
// staged rows), 9 rows (a block of four rows short): the aligned launch must
// give the same bits as the launches that take the scalar path (y, x or
// gamma one element off): the sums' order is the scalar kernel's; no element
// outside the rows is written; and y is the reference's within 1e-4 (f32)
// or one bf16 rounding more (bf16).
#include "Bf16Bits.h"
#include "SentinelSession.h"

#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace stringrt::cuda {
namespace {

using KA = KernelArg;


class GpuLayerNormVector : public ::testing::Test, protected SentinelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(16) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(13);
  }

  // y's bits (f32 words; bf16 in the high half) of one launch with y, x,
  // gamma shifted by shift[0..2]; checks the sentinels around y.
  std::vector<uint32_t> run(const std::string &kernel, bool bf16, const std::vector<float> &x,
                            const std::vector<float> &gamma, const std::vector<float> &beta,
                            int64_t rows, int64_t d, std::array<int64_t, 3> shift) {
    clearBuffers();
    const int64_t n = rows * d;
    size_t yOffset = 0, unused = 0;
    uint64_t y = place({}, n, bf16, shift[0], yOffset);
    uint64_t px = place(x, n, bf16, shift[1], unused);
    uint64_t pg = place(gamma, d, false, shift[2], unused);
    uint64_t pb = place(beta, d, false, 0, unused);
    launch(kernel.c_str(), {KA::pointer(y), KA::pointer(px), KA::pointer(pg), KA::pointer(pb),
                            KA::integer(rows), KA::integer(d), KA::real(1e-5f)});
    return readBack(yOffset, n, bf16, shift[0], kernel + " D=" + std::to_string(d));
  }
};

TEST_F(GpuLayerNormVector, VectorRowsHaveTheScalarBitsAndTheReferences) {
  for (bool bf16 : {false, true}) {
    const std::string kernel = bf16 ? "pe_layer_norm__bb" : "pe_layer_norm";
    ASSERT_NE(package->cuda()->find(kernel), nullptr) << kernel << " is not in the package";
    for (int64_t d : {8, 24, 384, 390, 1032}) {
      const int64_t rows = 9, n = rows * d;
      std::vector<float> x = random(size_t(n)), gamma = random(size_t(d)),
                         beta = random(size_t(d));
      for (float &v : x) { // an offset tests the two-pass variance
        v += 100.0f;
        if (bf16)
          v = fromBf16(toBf16(v));
      }
      std::string what = kernel + " D=" + std::to_string(d);
      std::vector<uint32_t> vector = run(kernel, bf16, x, gamma, beta, rows, d, {0, 0, 0});
      EXPECT_EQ(run(kernel, bf16, x, gamma, beta, rows, d, {1, 0, 0}), vector)
          << what << ": y misaligned (the scalar rows)";
      EXPECT_EQ(run(kernel, bf16, x, gamma, beta, rows, d, {0, 1, 0}), vector)
          << what << ": x misaligned (the scalar rows)";
      EXPECT_EQ(run(kernel, bf16, x, gamma, beta, rows, d, {0, 0, 1}), vector)
          << what << ": gamma misaligned (the scalar rows)";

      std::vector<float> want(static_cast<size_t>(n));
      ref::layerNorm<float>({x.data(), {rows, d}}, {gamma.data(), {d}}, {beta.data(), {d}}, 1e-5,
                            {want.data(), {rows, d}});
      for (int64_t i = 0; i < n; ++i) {
        float got;
        std::memcpy(&got, &vector[size_t(i)], 4);
        double w = want[size_t(i)];
        // f32: the existing layer_norm tolerance; bf16: one rounding more.
        double tolerance = 1e-4 * (1 + std::fabs(w)) + (bf16 ? std::ldexp(std::fabs(w), -8) : 0);
        EXPECT_LE(std::fabs(double(got) - w), tolerance) << what << " element " << i;
      }
    }
  }
}

} // namespace
} // namespace stringrt::cuda
