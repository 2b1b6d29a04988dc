// class_token_grad's dx vectorised (compiler/lib/CudaGen/TokenKernels.cpp,
// pe_class_token_grad_x: dx[b, t, :] = dy[b, t + 1, :], 8 elements an
// iteration with 16-byte loads and stores when d % 8 == 0 and dx and dy are
// 16-byte aligned; else one an iteration), in f32, bf16 (__bb) and as
// vit_s_rope's bf16 package launches it (__fb: dx f32, dy bf16), from the
// package of tests/cuda/kernels.pe (STRINGRT_CUDA_TEST_PACKAGE); every test
// skips without it or without a GPU.
//
// For d = 8, 24, 384 (vector) and 390, 7 (scalar: d % 8), 3 samples of 5
// tokens (6 in dy): the aligned launch on the grid of `threads` =
// ceil(n / 8) must give the same bits as the launches with dx or dy one
// element off (the scalar loop on the same threads), no element outside dx
// is written, and dx is dy's tokens 1.. exactly (a copy, widened from bf16
// where dy is bf16).
#include "Bf16Bits.h"
#include "SentinelSession.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace stringrt::cuda {
namespace {

using KA = KernelArg;

class GpuClassTokenGradVector : public ::testing::Test, protected SentinelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(16) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(23);
  }

  // dx's bits (f32 words; bf16 in the high half) of one launch with dx and
  // dy shifted by the given elements; checks the sentinels around dx.
  std::vector<uint32_t> run(const std::string &kernel, bool dxBf16, bool dyBf16,
                            const std::vector<float> &dy, int64_t batch, int64_t tokens,
                            int64_t d, int64_t dxShift, int64_t dyShift) {
    clearBuffers();
    const int64_t n = batch * tokens * d;
    size_t dxOffset = 0, unused = 0;
    uint64_t dx = place({}, n, dxBf16, dxShift, dxOffset);
    uint64_t pdy = place(dy, batch * (tokens + 1) * d, dyBf16, dyShift, unused);
    launch(kernel.c_str(), {KA::pointer(dx), KA::pointer(pdy), KA::integer((n + 7) / 8),
                            KA::integer(n), KA::integer(tokens), KA::integer(d)});
    return readBack(dxOffset, n, dxBf16, dxShift, kernel + " d=" + std::to_string(d));
  }
};

TEST_F(GpuClassTokenGradVector, VectorCopiesHaveTheScalarBitsAndDyTokens) {
  struct Variant {
    const char *kernel;
    bool dx, dy; // bf16 storage
  };
  for (Variant v : {Variant{"pe_class_token_grad_x", false, false},
                    Variant{"pe_class_token_grad_x__bb", true, true},
                    Variant{"pe_class_token_grad_x__fb", false, true}}) {
    ASSERT_NE(package->cuda()->find(v.kernel), nullptr) << v.kernel << " is not in the package";
    for (int64_t d : {8, 24, 384, 390, 7}) {
      const int64_t batch = 3, tokens = 5, n = batch * tokens * d;
      std::vector<float> dy = random(size_t(batch * (tokens + 1) * d));
      if (v.dy)
        for (float &x : dy)
          x = fromBf16(toBf16(x));
      std::string what = std::string(v.kernel) + " d=" + std::to_string(d);
      std::vector<uint32_t> vector = run(v.kernel, v.dx, v.dy, dy, batch, tokens, d, 0, 0);
      EXPECT_EQ(run(v.kernel, v.dx, v.dy, dy, batch, tokens, d, 1, 0), vector)
          << what << ": dx misaligned (the scalar loop)";
      EXPECT_EQ(run(v.kernel, v.dx, v.dy, dy, batch, tokens, d, 0, 1), vector)
          << what << ": dy misaligned (the scalar loop)";
      for (int64_t i = 0; i < n; ++i) {
        int64_t c = i % d, t = (i / d) % tokens, b = i / (d * tokens);
        float want = dy[size_t((b * (tokens + 1) + t + 1) * d + c)];
        uint32_t bits;
        std::memcpy(&bits, &want, 4);
        ASSERT_EQ(vector[size_t(i)], bits) << what << " element " << i;
      }
    }
  }
}

} // namespace
} // namespace stringrt::cuda
