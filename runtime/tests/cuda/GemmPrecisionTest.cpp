// The GEMM's precisions and its bias epilogue (CudaBackend.h, Gemm) on a GPU
// (skipped without one; run by the emulator in CI) against a host GEMM in
// double.
//
// Tolerances: each product a*b of inputs rounded to a p-bit significand has
// relative error <= 2 u (u = 2^-p: 2^-8 for bf16, 2^-11 for TF32, 2^-24 for
// f32), and an f32 sum of K terms adds <= K 2^-24 relative to sum |a b|:
//   |got - want| <= (2 u + K 2^-24) sum_k |a_k b_k| + 1e-6.
// So that a precision cannot silently be another one, on the emulator (which
// rounds exactly as the compute type says) the bf16 and TF32 results must
// also differ from the exact f32 ones by more than the f32 bound somewhere
// (random data: by ~1e-3 / ~1e-4). Real cuBLAS may pick any kernel at least
// as precise as the compute type allows, so a GPU checks the bound only.
#include "stringrt/Error.h"
#include "stringrt/cuda/CudaBackend.h"
#include "Bf16Bits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace stringrt::cuda {
namespace {

double unitRoundoff(GemmPrecision precision) {
  switch (precision) {
  case GemmPrecision::Fp32: return std::ldexp(1.0, -24);
  case GemmPrecision::Tf32: return std::ldexp(1.0, -11);
  case GemmPrecision::Bf16: return std::ldexp(1.0, -8);
  }
  return 1.0;
}

// Row-major op(A) op(B) (+ bias on every row) in double, and sum |a b| per
// element for the bound.
struct HostGemm {
  std::vector<double> value, magnitude;
};
HostGemm hostGemm(bool ta, bool tb, int M, int N, int K, const std::vector<float> &A,
                  const std::vector<float> &B, const std::vector<float> *bias = nullptr) {
  HostGemm h{std::vector<double>(size_t(M) * N), std::vector<double>(size_t(M) * N)};
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = bias ? double((*bias)[size_t(j)]) : 0.0, mag = 0;
      for (int k = 0; k < K; ++k) {
        double p = double(ta ? A[size_t(k) * M + i] : A[size_t(i) * K + k]) *
                   double(tb ? B[size_t(j) * K + k] : B[size_t(k) * N + j]);
        acc += p;
        mag += std::fabs(p);
      }
      h.value[size_t(i) * N + j] = acc;
      h.magnitude[size_t(i) * N + j] = mag;
    }
  return h;
}

std::vector<float> randomVector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

// Checks `got` against the host within `precision`'s bound; returns the
// largest |got - want| over the f32 bound's scale (> 1: outside the f32 bound).
double expectWithinBound(const std::vector<float> &got, const HostGemm &want, int K,
                         GemmPrecision precision, const std::string &what) {
  double u = unitRoundoff(precision), f32Term = K * std::ldexp(1.0, -24);
  double beyondF32 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double error = std::fabs(double(got[i]) - want.value[i]);
    double bound = (2 * u + f32Term) * want.magnitude[i] + 1e-6;
    EXPECT_LE(error, bound) << what << " (" << gemmPrecisionName(precision) << ") at " << i
                            << ": got " << got[i] << ", want " << want.value[i];
    if (error > bound)
      return beyondF32;
    double f32Bound = (2 * std::ldexp(1.0, -24) + f32Term) * want.magnitude[i] + 1e-6;
    beyondF32 = std::max(beyondF32, error / f32Bound);
  }
  return beyondF32;
}

class GpuGemmPrecision : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why = unavailableReason();
    if (!why.empty())
      GTEST_SKIP() << "no CUDA device: " << why;
    device = Device::open();
    gemm = std::make_unique<Gemm>(device);
    emulated = device->name().find("emulator") != std::string::npos;
  }
  bool emulated = false;
  std::shared_ptr<Device> device;
  std::unique_ptr<Gemm> gemm;
};

TEST_F(GpuGemmPrecision, EveryPrecisionMatchesTheHostWithinItsRounding) {
  const int M = 37, N = 53, K = 29;
  std::vector<float> A = randomVector(size_t(M) * K, 7), B = randomVector(size_t(K) * N, 8);
  Arena arena(device, (A.size() + B.size() + size_t(M) * N) * 4);
  size_t a = 0, b = A.size() * 4, c = b + B.size() * 4;
  arena.uploadVector(a, A);
  arena.uploadVector(b, B);
  for (GemmPrecision precision : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        gemm->run(ta, tb, M, N, K, 1.0f, arena.at(a, A.size() * 4), arena.at(b, B.size() * 4),
                  0.0f, arena.at(c, size_t(M) * N * 4), "gemm test", precision);
        device->synchronize("gemm test");
        std::vector<float> got = arena.downloadVector<float>(c, size_t(M) * N);
        double beyond = expectWithinBound(got, hostGemm(ta, tb, M, N, K, A, B), K, precision,
                                          "transA " + std::to_string(ta) + " transB " +
                                              std::to_string(tb));
        if (emulated && precision != GemmPrecision::Fp32)
          EXPECT_GT(beyond, 1.0) << gemmPrecisionName(precision)
                                 << " GEMM is as exact as f32: its inputs were not rounded";
      }
}

TEST_F(GpuGemmPrecision, StridedBatchedHonoursThePrecision) {
  const int M = 9, N = 17, K = 33, count = 3;
  std::vector<float> A = randomVector(size_t(M) * K * count, 11),
                     B = randomVector(size_t(K) * N * count, 12);
  Arena arena(device, (A.size() + B.size() + size_t(M) * N * count) * 4);
  size_t b = A.size() * 4, c = b + B.size() * 4;
  arena.uploadVector(0, A);
  arena.uploadVector(b, B);
  for (GemmPrecision precision : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16}) {
    gemm->runStridedBatched(false, true, M, N, K, 1.0f, arena.at(0, A.size() * 4), M * K,
                            arena.at(b, B.size() * 4), K * N, 0.0f,
                            arena.at(c, size_t(M) * N * count * 4), M * N, count,
                            "batched gemm test", precision);
    device->synchronize("batched gemm test");
    std::vector<float> got = arena.downloadVector<float>(c, size_t(M) * N * count);
    double beyond = 0;
    for (int i = 0; i < count; ++i) {
      std::vector<float> Ai(A.begin() + i * M * K, A.begin() + (i + 1) * M * K),
          Bi(B.begin() + i * K * N, B.begin() + (i + 1) * K * N),
          gi(got.begin() + i * M * N, got.begin() + (i + 1) * M * N);
      beyond = std::max(beyond, expectWithinBound(gi, hostGemm(false, true, M, N, K, Ai, Bi), K,
                                                  precision, "batch " + std::to_string(i)));
    }
    if (emulated && precision != GemmPrecision::Fp32)
      EXPECT_GT(beyond, 1.0) << gemmPrecisionName(precision) << " batched GEMM is exact";
  }
}

TEST_F(GpuGemmPrecision, BiasEpilogueAddsTheBiasToEveryRow) {
  std::string unavailable = gemm->biasEpilogueUnavailable();
  if (!unavailable.empty())
    GTEST_SKIP() << unavailable;
  const int M = 21, N = 40, K = 19;
  std::vector<float> A = randomVector(size_t(M) * K, 21), B = randomVector(size_t(K) * N, 22),
                     bias = randomVector(size_t(N), 23);
  // The bias 16-byte aligned at `biasAt`, and once more 4 bytes further.
  size_t b = A.size() * 4, biasAt = (b + B.size() * 4 + 255) / 256 * 256,
         c = biasAt + 512 + size_t(N) * 4 + 256;
  Arena arena(device, c + size_t(M) * N * 4);
  arena.uploadVector(0, A);
  arena.uploadVector(b, B);
  arena.uploadVector(biasAt, bias);
  arena.uploadVector(biasAt + 512 + 4, bias);
  for (GemmPrecision precision : {GemmPrecision::Fp32, GemmPrecision::Bf16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        std::string what = std::string("bias epilogue ") + gemmPrecisionName(precision) +
                           " transA " + std::to_string(ta) + " transB " + std::to_string(tb);
        ASSERT_TRUE(gemm->runWithBias(ta, tb, M, N, K, 1.0f, arena.at(0, A.size() * 4),
                                      arena.at(b, B.size() * 4), arena.at(biasAt, size_t(N) * 4),
                                      arena.at(c, size_t(M) * N * 4), what, precision))
            << what << ": cuBLASLt declined an aligned f32 GEMM";
        device->synchronize(what);
        std::vector<float> got = arena.downloadVector<float>(c, size_t(M) * N);
        expectWithinBound(got, hostGemm(ta, tb, M, N, K, A, B, &bias), K, precision, what);
      }
  // A bias only 4-byte aligned: declined, and nothing is written.
  std::vector<float> sentinel(size_t(M) * N, 12345.0f);
  arena.uploadVector(c, sentinel);
  EXPECT_FALSE(gemm->runWithBias(false, false, M, N, K, 1.0f, arena.at(0, A.size() * 4),
                                 arena.at(b, B.size() * 4),
                                 arena.at(biasAt + 512 + 4, size_t(N) * 4),
                                 arena.at(c, size_t(M) * N * 4), "misaligned bias"));
  device->synchronize("misaligned bias");
  EXPECT_EQ(arena.downloadVector<float>(c, size_t(M) * N), sentinel);
}

// The bias-gradient epilogue (runWithBiasGradient, a dense layer's weight
// and bias gradients in one matmul): C = op(A) op(B) and biasGrad[j] = the
// sums of op(B) over K, within the f32 bound of a K-term sum (the
// emulator's sums read B as stored). The emulator runs every transposition; a GPU's cuBLASLt may
// decline one (its heuristic offers no algorithm), which the caller's
// fallback then serves. A bias gradient only 4-byte aligned: declined,
// nothing written.
TEST_F(GpuGemmPrecision, BiasGradientEpilogueSumsBOverK) {
  std::string unavailable = gemm->biasEpilogueUnavailable();
  if (!unavailable.empty())
    GTEST_SKIP() << unavailable;
  const int M = 21, N = 40, K = 19;
  std::vector<float> A = randomVector(size_t(M) * K, 31), B = randomVector(size_t(K) * N, 32);
  size_t b = A.size() * 4, biasAt = (b + B.size() * 4 + 255) / 256 * 256,
         c = biasAt + 512 + size_t(N) * 4 + 256;
  Arena arena(device, c + size_t(M) * N * 4);
  arena.uploadVector(0, A);
  arena.uploadVector(b, B);
  for (GemmPrecision precision : {GemmPrecision::Fp32, GemmPrecision::Bf16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        std::string what = std::string("bias-gradient epilogue ") +
                           gemmPrecisionName(precision) + " transA " + std::to_string(ta) +
                           " transB " + std::to_string(tb);
        arena.uploadVector(biasAt, std::vector<float>(size_t(N) + 1, -7.0f));
        bool ran = gemm->runWithBiasGradient(ta, tb, M, N, K, 1.0f, arena.at(0, A.size() * 4),
                                             arena.at(b, B.size() * 4),
                                             arena.at(biasAt, size_t(N) * 4),
                                             arena.at(c, size_t(M) * N * 4), what, precision);
        if (!ran) {
          EXPECT_FALSE(emulated) << what << ": the emulator declined an aligned GEMM";
          continue;
        }
        device->synchronize(what);
        std::vector<float> got = arena.downloadVector<float>(c, size_t(M) * N);
        expectWithinBound(got, hostGemm(ta, tb, M, N, K, A, B), K, precision, what);
        std::vector<float> sums = arena.downloadVector<float>(biasAt, size_t(N) + 1);
        for (int j = 0; j < N; ++j) {
          double want = 0, magnitude = 0;
          for (int k = 0; k < K; ++k) {
            double v = tb ? B[size_t(j) * K + k] : B[size_t(k) * N + j];
            want += v;
            magnitude += std::fabs(v);
          }
          // The emulator sums B as stored (the f32 bound); a GPU may sum it
          // as the compute type rounds it (one rounding each: u more).
          EXPECT_NEAR(sums[size_t(j)], want,
                      ((emulated ? 0.0 : unitRoundoff(precision)) + K * std::ldexp(1.0, -24)) *
                              magnitude +
                          1e-6)
              << what << " column " << j;
        }
        EXPECT_EQ(sums[size_t(N)], -7.0f) << what << ": past the N sums";
      }
  // A bias gradient only 4-byte aligned: declined, and nothing is written.
  std::vector<float> sentinel(size_t(M) * N, 12345.0f), sums(size_t(N), -7.0f);
  arena.uploadVector(c, sentinel);
  arena.uploadVector(biasAt + 512 + 4, sums);
  EXPECT_FALSE(gemm->runWithBiasGradient(true, false, M, N, K, 1.0f, arena.at(0, A.size() * 4),
                                         arena.at(b, B.size() * 4),
                                         arena.at(biasAt + 512 + 4, size_t(N) * 4),
                                         arena.at(c, size_t(M) * N * 4), "misaligned sums"));
  device->synchronize("misaligned sums");
  EXPECT_EQ(arena.downloadVector<float>(c, size_t(M) * N), sentinel);
  EXPECT_EQ(arena.downloadVector<float>(biasAt + 512 + 4, size_t(N)), sums);
}

// The addend (runWithAddend, a dense layer's residual add or gradient sum
// as the GEMM's epilogue): C = op(A) op(B) + beta addend (+ bias), the
// addend read in C's place and left as it was, or C itself (in place).
TEST_F(GpuGemmPrecision, AddendIsReadInThePlaceOfC) {
  std::string unavailable = gemm->biasEpilogueUnavailable();
  if (!unavailable.empty())
    GTEST_SKIP() << unavailable;
  const int M = 21, N = 40, K = 19;
  std::vector<float> A = randomVector(size_t(M) * K, 41), B = randomVector(size_t(K) * N, 42),
                     bias = randomVector(size_t(N), 43), addend = randomVector(size_t(M) * N, 44);
  const size_t b = 4096, biasAt = 8192, addendAt = 12288, c = 16384;
  Arena arena(device, c + size_t(M) * N * 4);
  arena.uploadVector(0, A);
  arena.uploadVector(b, B);
  arena.uploadVector(biasAt, bias);
  const std::vector<float> sentinel(size_t(M) * N, 12345.0f);
  for (GemmPrecision precision : {GemmPrecision::Fp32, GemmPrecision::Bf16})
    for (bool withBias : {false, true})
      for (bool inPlace : {false, true})
        for (bool tb : {false, true}) {
          const float beta = tb ? 0.5f : 1.0f;
          std::string what = std::string("addend ") + gemmPrecisionName(precision) +
                             (withBias ? " + bias" : "") + (inPlace ? " in place" : "") +
                             " transB " + std::to_string(tb);
          arena.uploadVector(addendAt, addend);
          arena.uploadVector(c, inPlace ? addend : sentinel);
          uint64_t cm = arena.at(c, size_t(M) * N * 4);
          uint64_t source = inPlace ? cm : arena.at(addendAt, size_t(M) * N * 4);
          ASSERT_TRUE(gemm->runWithAddend(false, tb, M, N, K, 1.0f, arena.at(0, A.size() * 4),
                                          arena.at(b, B.size() * 4), beta, source,
                                          withBias ? arena.at(biasAt, size_t(N) * 4) : 0, cm,
                                          what, precision))
              << what << ": cuBLASLt declined an aligned GEMM with an addend";
          device->synchronize(what);
          HostGemm want = hostGemm(false, tb, M, N, K, A, B, withBias ? &bias : nullptr);
          for (size_t i = 0; i < want.value.size(); ++i) {
            want.value[i] += double(beta) * addend[i];
            want.magnitude[i] += std::fabs(double(beta) * addend[i]);
          }
          expectWithinBound(arena.downloadVector<float>(c, size_t(M) * N), want, K + 1,
                            precision, what);
          if (!inPlace)
            EXPECT_EQ(arena.downloadVector<float>(addendAt, size_t(M) * N), addend) << what;
        }
  // No addend, or a bias only 4-byte aligned: declined, and nothing is written.
  arena.uploadVector(c, sentinel);
  EXPECT_FALSE(gemm->runWithAddend(false, false, M, N, K, 1.0f, arena.at(0, A.size() * 4),
                                   arena.at(b, B.size() * 4), 1.0f, 0, 0,
                                   arena.at(c, size_t(M) * N * 4), "no addend"));
  EXPECT_FALSE(gemm->runWithAddend(
      false, false, M, N, K, 1.0f, arena.at(0, A.size() * 4), arena.at(b, B.size() * 4), 1.0f,
      arena.at(addendAt, size_t(M) * N * 4), arena.at(biasAt + 4, size_t(N) * 4),
      arena.at(c, size_t(M) * N * 4), "misaligned bias"));
  device->synchronize("declined");
  EXPECT_EQ(arena.downloadVector<float>(c, size_t(M) * N), sentinel);
}

// bf16 storage (packages of --gpu-precision=bf16): A and B hold bf16, C f32
// or bf16, with and without the bias epilogue (of C's type). bf16 values
// are exact in f32, so against a host GEMM of the same bf16 values the
// error is the f32 sum's, plus one rounding of a bf16 C (2^-9 relative).

TEST_F(GpuGemmPrecision, Bf16StorageGemmsMatchTheHost) {
  const int M = 24, N = 40, K = 33;
  std::vector<float> A = randomVector(size_t(M) * K, 31), B = randomVector(size_t(K) * N, 32),
                     bias = randomVector(size_t(N), 33);
  std::vector<uint16_t> A16, B16, bias16;
  for (float &x : A) {
    A16.push_back(toBf16(x));
    x = fromBf16(A16.back());
  }
  for (float &x : B) {
    B16.push_back(toBf16(x));
    x = fromBf16(B16.back());
  }
  for (float x : bias)
    bias16.push_back(toBf16(x));
  std::vector<float> biasOfBf16;
  for (uint16_t h : bias16)
    biasOfBf16.push_back(fromBf16(h));
  const size_t b = 4096, biasAt = 8192, bias16At = 8704, c = 12288;
  Arena arena(device, c + size_t(M) * N * 4);
  arena.uploadVector(0, A16);
  arena.uploadVector(b, B16);
  arena.uploadVector(biasAt, bias);
  arena.uploadVector(bias16At, bias16);
  const bool lt = gemm->biasEpilogueUnavailable().empty();
  for (DType output : {DType::F32, DType::BF16})
    for (bool withBias : {false, true})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          std::string what = std::string("bf16 x bf16 -> ") + dtypeName(output) +
                             (withBias ? " + bias" : "") + " transA " + std::to_string(ta) +
                             " transB " + std::to_string(tb);
          size_t outBytes = size_t(M) * N * dtypeSize(output);
          uint64_t a = arena.at(0, A16.size() * 2), bm = arena.at(b, B16.size() * 2),
                   cm = arena.at(c, outBytes);
          if (withBias) {
            if (!lt)
              continue;
            uint64_t biasPointer = output == DType::BF16 ? arena.at(bias16At, size_t(N) * 2)
                                                         : arena.at(biasAt, size_t(N) * 4);
            ASSERT_TRUE(gemm->runWithBias(ta, tb, M, N, K, 1.0f, a, bm, biasPointer, cm, what,
                                          GemmPrecision::Bf16, DType::BF16, output))
                << what << ": cuBLASLt declined an aligned bf16 GEMM";
          } else {
            gemm->run(ta, tb, M, N, K, 1.0f, a, bm, 0.0f, cm, what, GemmPrecision::Bf16,
                      DType::BF16, output);
          }
          device->synchronize(what);
          std::vector<float> got;
          if (output == DType::BF16)
            for (uint16_t h : arena.downloadVector<uint16_t>(c, size_t(M) * N))
              got.push_back(fromBf16(h));
          else
            got = arena.downloadVector<float>(c, size_t(M) * N);
          const std::vector<float> &hostBias = output == DType::BF16 ? biasOfBf16 : bias;
          HostGemm want = hostGemm(ta, tb, M, N, K, A, B, withBias ? &hostBias : nullptr);
          for (size_t i = 0; i < got.size(); ++i) {
            double bound = K * std::ldexp(1.0, -24) * want.magnitude[i] + 1e-6 +
                           (output == DType::BF16 ? std::ldexp(1.0, -8) * std::fabs(want.value[i])
                                                  : 0.0);
            ASSERT_LE(std::fabs(double(got[i]) - want.value[i]), bound)
                << what << " at " << i << ": got " << got[i] << ", want " << want.value[i];
          }
        }
  if (lt) { // cuBLASLt ran them: its choices are recorded, one line a shape
    std::vector<std::string> algorithms = gemm->chosenAlgorithms();
    EXPECT_EQ(algorithms.size(), 16u);
    ASSERT_FALSE(algorithms.empty());
    EXPECT_NE(algorithms[0].find("BF16 x BF16 -> F32 m 24 n 40 k 33: algorithm"),
              std::string::npos)
        << algorithms[0];
  }
  // Types cuBLAS has no GEMM for: refused before anything is queued.
  EXPECT_THROW(gemm->run(false, false, M, N, K, 1.0f, arena.at(0, 4), arena.at(b, 4), 0.0f,
                         arena.at(c, 4), "f32 -> bf16", GemmPrecision::Bf16, DType::F32,
                         DType::BF16),
               Error);
}

} // namespace
} // namespace stringrt::cuda
