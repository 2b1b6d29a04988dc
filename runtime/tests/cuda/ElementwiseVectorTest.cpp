// The vectorised elementwise kernels (compiler/lib/CudaGen/ElementwiseKernels.cpp:
// 8 elements a thread with 16-byte loads and stores when every pointer is
// 16-byte aligned, the tail and misaligned launches one element at a time)
// in f32, bf16 and mixed storage, from the package of tests/cuda/kernels.pe
// (STRINGRT_CUDA_TEST_PACKAGE); every test skips without it or without a GPU.
//
// For n = 1, 7, 8, 9 and 4099: the aligned launch (vector loop and tail) must
// give the same bits as the launches that take the scalar loop (every pointer
// one element off, or only the last input), and as an aligned launch on one
// block (the grid-stride loop); no element outside [0, n) is written; and
// the result is the reference kernel's: exactly for add, sub, mul, relu and
// relu_grad (one rounding of one f32 operation), within 2e-6 (f32) or one
// bf16 rounding for scale and the GELUs (libdevice against the host's libm).
#include "GpuKernelSession.h"
#include "Bf16Bits.h"
#include "OpCall.h"
#include "SentinelBuffers.h"

#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace stringrt::cuda {
namespace {

using KA = KernelArg;
using ref::TensorRef;

float fromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// A kernel: its inputs and the reference (f32 inputs -> f32 output).
struct Case {
  const char *kernel;
  int inputs;
  bool scale; // pe_scale: factor and bias follow n
  std::function<void(const std::vector<std::vector<float>> &, std::vector<float> &)> reference;
  double tolerance; // f32 output; 0: exact
};

constexpr float kFactor = 0.3f, kBias = -1.25f;

std::vector<Case> cases() {
  auto binary = [](void (*op)(TensorRef<const float>, TensorRef<const float>, TensorRef<float>)) {
    return [op](const std::vector<std::vector<float>> &x, std::vector<float> &y) {
      int64_t n = int64_t(y.size());
      op({x[0].data(), {n}}, {x[1].data(), {n}}, {y.data(), {n}});
    };
  };
  std::vector<Case> all = {
      {"pe_add", 2, false, binary(ref::add<float>), 0},
      {"pe_sub", 2, false, binary(ref::sub<float>), 0},
      {"pe_mul", 2, false, binary(ref::mul<float>), 0},
      // relu's kernels are its op file's own: run through its registration.
      {"pe_relu", 1, false,
       [](const auto &x, auto &y) {
         int64_t n = int64_t(y.size());
         y = stringrt::test::OpCall{OpCode::Relu, {ref::Tensor<float>({n}, x[0])}, {{n}}}
                 .reference()[0]
                 .values;
       },
       0},
      {"pe_relu_grad", 2, false,
       [](const auto &x, auto &y) {
         int64_t n = int64_t(y.size());
         y = stringrt::test::OpCall{OpCode::ReluGrad,
                          {ref::Tensor<float>({n}, x[0]), ref::Tensor<float>({n}, x[1])},
                          {{n}}}
                 .reference()[0]
                 .values;
       },
       0},
      {"pe_scale", 1, true,
       [](const auto &x, auto &y) {
         int64_t n = int64_t(y.size());
         ref::scale<float>({x[0].data(), {n}}, kFactor, kBias, {y.data(), {n}});
       },
       1e-7}};
  for (bool approximate : {false, true}) {
    std::string suffix = approximate ? "_tanh" : "";
    all.push_back({approximate ? "pe_gelu_tanh" : "pe_gelu", 1, false,
                   [approximate](const auto &x, auto &y) {
                     int64_t n = int64_t(y.size());
                     ref::gelu<float>({x[0].data(), {n}}, approximate, {y.data(), {n}});
                   },
                   2e-6});
    all.push_back({approximate ? "pe_gelu_grad_tanh" : "pe_gelu_grad", 2, false,
                   [approximate](const auto &x, auto &y) {
                     int64_t n = int64_t(y.size());
                     ref::geluGrad<float>({x[0].data(), {n}}, {x[1].data(), {n}}, approximate,
                                          {y.data(), {n}});
                   },
                   2e-6});
  }
  return all;
}

class GpuElementwiseVector : public ::testing::Test, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(16) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(11);
  }

  // One launch of `kernel` (storage `bf16` per pointer: out, inputs) on
  // `inputs` (f32 values, exact in their storage type) over n elements, each
  // pointer `shift[p]` elements past a 256-byte boundary, with `threads` as
  // its grid argument; returns the output's bits over [0, n) and checks that
  // the 8 elements before and after it keep the sentinel.
  std::vector<uint32_t> run(const Case &c, const std::string &kernel, const std::vector<bool> &bf16,
                            const std::vector<std::vector<float>> &inputs, int64_t n,
                            const std::vector<int64_t> &shift, int64_t threads) {
    clearBuffers();
    const int64_t pad = 8; // sentinel elements on either side of the output
    std::vector<KA> args;
    size_t outOffset = 0;
    for (size_t p = 0; p < bf16.size(); ++p) {
      const int64_t bytes = bf16[p] ? 2 : 4;
      std::vector<uint8_t> raw = sentinelPadded(p > 0 ? inputs[p - 1] : std::vector<float>(), n,
                                                bf16[p], pad + shift[p], n + 2 * pad);
      // The buffer starts on a 256-byte boundary, its element 0 pad + shift
      // elements in (shift 0: 16 or 32 bytes, 16-byte aligned).
      uint64_t base = putBytes(raw);
      if (p == 0)
        outOffset = offsets.at(base);
      args.push_back(KA::pointer(base + uint64_t((pad + shift[p]) * bytes)));
    }
    args.push_back(KA::integer(threads));
    args.push_back(KA::integer(n));
    if (c.scale) {
      args.push_back(KA::real(kFactor));
      args.push_back(KA::real(kBias));
    }
    launch(kernel.c_str(), args);
    device->synchronize("test");
    const int64_t bytes = bf16[0] ? 2 : 4, first = pad + shift[0];
    std::vector<uint32_t> out;
    std::vector<uint8_t> raw = arena->downloadVector<uint8_t>(outOffset, size_t((n + 2 * pad) * bytes));
    auto word = [&](int64_t i) { return storedBits(raw, bf16[0], i); };
    const uint32_t sentinel = sentinelBits(bf16[0]);
    for (int64_t i = first - pad; i < first; ++i)
      EXPECT_EQ(word(i), sentinel) << kernel << " n=" << n << ": written before element 0";
    for (int64_t i = first + n; i < first + n + pad - shift[0]; ++i)
      EXPECT_EQ(word(i), sentinel) << kernel << " n=" << n << ": written after element n-1";
    for (int64_t i = first; i < first + n; ++i)
      out.push_back(word(i));
    return out;
  }
};

TEST_F(GpuElementwiseVector, VectorLoopHasTheScalarLoopsBitsAndTheReferences) {
  // Storage variants: f32, all bf16, and the mixed ones of tests/cuda/kernels.variants.
  const std::vector<std::string> mixed = {"pe_add__bfb", "pe_gelu_grad__fbf"};
  for (const Case &c : cases()) {
    std::vector<std::string> variants = {c.kernel, std::string(c.kernel) + "__" +
                                                       std::string(size_t(c.inputs + 1), 'b')};
    for (const std::string &m : mixed)
      if (m.rfind(std::string(c.kernel) + "__", 0) == 0)
        variants.push_back(m);
    for (const std::string &kernel : variants) {
      ASSERT_NE(package->cuda()->find(kernel), nullptr) << kernel << " is not in the package";
      std::vector<bool> bf16(size_t(c.inputs + 1), false);
      size_t split = kernel.find("__");
      if (split != std::string::npos)
        for (size_t p = 0; p < bf16.size(); ++p)
          bf16[p] = kernel[split + 2 + p] == 'b';
      for (int64_t n : {1, 7, 8, 9, 4099}) {
        std::vector<std::vector<float>> inputs;
        for (int i = 0; i < c.inputs; ++i) {
          std::vector<float> x = random(size_t(n));
          if (i == 0 && n > 8) { // the special values, in the vector loop
            x[0] = 0.0f;
            x[1] = -0.0f;
            x[2] = NAN;
          }
          if (bf16[size_t(i + 1)])
            for (float &v : x)
              v = fromBf16(toBf16(v));
          inputs.push_back(std::move(x));
        }
        const std::vector<int64_t> aligned(bf16.size(), 0);
        std::vector<int64_t> allOff(bf16.size(), 1), lastOff(bf16.size(), 0);
        lastOff.back() = 1;
        const int64_t threads = (n + 7) / 8;
        std::string what = kernel + " n=" + std::to_string(n);
        std::vector<uint32_t> vector = run(c, kernel, bf16, inputs, n, aligned, threads);
        EXPECT_EQ(run(c, kernel, bf16, inputs, n, allOff, threads), vector)
            << what << ": every pointer misaligned (the scalar loop)";
        EXPECT_EQ(run(c, kernel, bf16, inputs, n, lastOff, threads), vector)
            << what << ": the last input misaligned (the scalar loop)";
        EXPECT_EQ(run(c, kernel, bf16, inputs, n, aligned, 1), vector)
            << what << ": one block (the grid-stride loop)";

        std::vector<float> want(static_cast<size_t>(n));
        c.reference(inputs, want);
        for (int64_t i = 0; i < n; ++i) {
          float got = fromBits(vector[size_t(i)]), w = want[size_t(i)];
          if (bf16[0]) // one rounding of the f32 result
            w = fromBf16(toBf16(w));
          if (std::isnan(w)) {
            EXPECT_TRUE(std::isnan(got)) << what << " element " << i;
            continue;
          }
          double tolerance = bf16[0] && c.tolerance > 0 ? std::ldexp(1.0, -8) : c.tolerance;
          if (tolerance == 0)
            EXPECT_EQ(got, w) << what << " element " << i;
          else
            EXPECT_LE(std::fabs(double(got) - double(w)), tolerance * (1 + std::fabs(double(w))))
                << what << " element " << i << ": " << got << " vs " << w;
        }
      }
    }
  }
}

} // namespace
} // namespace stringrt::cuda
