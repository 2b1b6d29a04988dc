// The CUDA backend (CudaBackend.h). Tests that need a device skip
// (GTEST_SKIP, counted as skipped) where none can be used; the launch-shape
// and no-driver tests run everywhere.
#include "stringrt/Error.h"
#include "stringrt/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace stringrt::cuda {
namespace {

#define REQUIRE_CUDA_DEVICE()                                                                      \
  do {                                                                                             \
    std::string why = unavailableReason();                                                         \
    if (!why.empty())                                                                              \
      GTEST_SKIP() << "no CUDA device: " << why;                                                   \
  } while (0)

TEST(CudaDriver, ExplainsWhyNoDeviceCanBeUsed) {
  std::string why = unavailableReason();
  if (why.empty()) {
    std::shared_ptr<Device> device = Device::open();
    EXPECT_FALSE(device->name().empty());
    EXPECT_GE(device->computeCapability(), 50);
    EXPECT_EQ(device->arch().rfind("sm_", 0), 0u);
    return;
  }
  // No driver or no device here: opening says why instead of crashing.
  try {
    Device::open();
    FAIL() << "Device::open succeeded although: " << why;
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find(why.substr(0, 20)), std::string::npos)
        << error.what();
  }
}

CudaKernel kernelWith(CudaGridRule grid, std::vector<CudaParamKind> params, int64_t bx,
                      int64_t by = 1) {
  CudaKernel k;
  k.name = "k";
  k.grid = grid;
  k.params = std::move(params);
  k.blockX = bx;
  k.blockY = by;
  return k;
}

TEST(CudaLaunchShape, FollowsTheGridRules) {
  using P = CudaParamKind;
  CudaKernel elements = kernelWith(CudaGridRule::Elements, {P::Ptr, P::I64}, 256);
  LaunchShape s = launchShapeFor(elements, {KernelArg::pointer(1), KernelArg::integer(1000)});
  EXPECT_EQ(s.grid[0], 4u);
  EXPECT_EQ(s.block[0], 256u);
  // Grid-stride kernels cap the grid.
  s = launchShapeFor(elements, {KernelArg::pointer(1), KernelArg::integer(int64_t(1) << 40)});
  EXPECT_EQ(s.grid[0], 65536u);

  CudaKernel rows = kernelWith(CudaGridRule::Rows, {P::Ptr, P::I64, P::I64, P::F32}, 32, 4);
  s = launchShapeFor(rows, {KernelArg::pointer(1), KernelArg::integer(10), KernelArg::integer(64),
                            KernelArg::real(1e-5f)});
  EXPECT_EQ(s.grid[0], 3u); // 10 rows, 4 per block
  EXPECT_EQ(s.block[0], 32u);
  EXPECT_EQ(s.block[1], 4u);

  CudaKernel cols = kernelWith(CudaGridRule::Columns, {P::Ptr, P::I64, P::I64}, 128);
  s = launchShapeFor(cols, {KernelArg::pointer(1), KernelArg::integer(5000),
                            KernelArg::integer(300)});
  EXPECT_EQ(s.grid[0], 3u); // 300 columns

  CudaKernel partials = kernelWith(CudaGridRule::Partials, {P::Ptr, P::Ptr, P::I64}, 32);
  s = launchShapeFor(partials, {KernelArg::pointer(1), KernelArg::pointer(2),
                                KernelArg::integer(1 << 20)});
  EXPECT_EQ(s.grid[0], 1024u);
}

// Empty work is a grid of 0 blocks (the launch is skipped), whichever rule
// reads the size; a 0 in an i64 the rule does not read changes nothing.
TEST(CudaLaunchShape, ZeroSizesGiveEmptyGridsAndNothingElseDoes) {
  using P = CudaParamKind;
  CudaKernel elements = kernelWith(CudaGridRule::Elements, {P::Ptr, P::I64, P::I64}, 256);
  LaunchShape s = launchShapeFor(elements, {KernelArg::pointer(1), KernelArg::integer(0),
                                            KernelArg::integer(5)});
  EXPECT_EQ(s.grid[0], 0u);
  EXPECT_TRUE(s.empty());
  s = launchShapeFor(elements, {KernelArg::pointer(1), KernelArg::integer(5),
                                KernelArg::integer(0)});
  EXPECT_EQ(s.grid[0], 1u);
  EXPECT_FALSE(s.empty());

  CudaKernel rows = kernelWith(CudaGridRule::Rows, {P::Ptr, P::I64, P::I64}, 32, 4);
  EXPECT_TRUE(launchShapeFor(rows, {KernelArg::pointer(1), KernelArg::integer(0),
                                    KernelArg::integer(64)})
                  .empty());
  CudaKernel cols = kernelWith(CudaGridRule::Columns, {P::Ptr, P::I64, P::I64}, 128);
  EXPECT_TRUE(launchShapeFor(cols, {KernelArg::pointer(1), KernelArg::integer(10),
                                    KernelArg::integer(0)})
                  .empty());
  EXPECT_FALSE(launchShapeFor(cols, {KernelArg::pointer(1), KernelArg::integer(0),
                                     KernelArg::integer(10)})
                   .empty()); // no rows: the columns' sums are still written (zeros)
  CudaKernel partials = kernelWith(CudaGridRule::Partials, {P::Ptr, P::Ptr, P::I64}, 32);
  EXPECT_TRUE(launchShapeFor(partials, {KernelArg::pointer(1), KernelArg::pointer(2),
                                        KernelArg::integer(0)})
                  .empty());

  CudaKernel fixed = kernelWith(CudaGridRule::Explicit, {P::Ptr, P::I64}, 32);
  for (int d = 0; d < 3; ++d) {
    std::array<int64_t, 3> grid = {2, 3, 4};
    grid[size_t(d)] = 0;
    EXPECT_TRUE(launchShapeFor(fixed, {KernelArg::pointer(1), KernelArg::integer(7)}, &grid)
                    .empty())
        << "grid[" << d << "] = 0";
  }
  const std::array<int64_t, 3> grid = {2, 3, 4};
  EXPECT_FALSE(
      launchShapeFor(fixed, {KernelArg::pointer(1), KernelArg::integer(0)}, &grid).empty());
}

TEST(CudaLaunchShape, ChecksArguments) {
  using P = CudaParamKind;
  CudaKernel k = kernelWith(CudaGridRule::Elements, {P::Ptr, P::I64}, 256);
  EXPECT_THROW(launchShapeFor(k, {KernelArg::pointer(1)}), Error);
  EXPECT_THROW(launchShapeFor(k, {KernelArg::integer(1), KernelArg::integer(1)}), Error);
  EXPECT_THROW(launchShapeFor(k, {KernelArg::pointer(1), KernelArg::integer(-1)}), Error);
  try {
    launchShapeFor(k, {KernelArg::pointer(1), KernelArg::real(1)});
    FAIL();
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(), "kernel k: argument 1 must be i64, got f32");
  }
}

TEST(CudaDevice, ArenaRoundTripAndBounds) {
  REQUIRE_CUDA_DEVICE();
  auto device = Device::open();
  Arena arena(device, 1 << 20);
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = float(i) * 0.5f;
  arena.uploadVector(4096, values);
  EXPECT_EQ(arena.downloadVector<float>(4096, values.size()), values);
  EXPECT_THROW(arena.at((1 << 20) - 4, 8), Error);
}

TEST(CudaDevice, OutOfMemoryReportsAskedAndFree) {
  REQUIRE_CUDA_DEVICE();
  auto device = Device::open();
  size_t tooMuch = device->totalBytes() * 2;
  try {
    device->allocate(tooMuch, "test step");
    FAIL() << "allocating twice the device's memory succeeded";
  } catch (const Error &error) {
    std::string what = error.what();
    EXPECT_NE(what.find("out of device memory in test step"), std::string::npos) << what;
    EXPECT_NE(what.find("asked for " + std::to_string(tooMuch) + " bytes"), std::string::npos)
        << what;
    EXPECT_NE(what.find("bytes free of"), std::string::npos) << what;
  }
}

// C = op(A) op(B) row-major, in double on the host.
std::vector<float> hostGemm(bool ta, bool tb, int M, int N, int K, const std::vector<float> &A,
                            const std::vector<float> &B) {
  std::vector<float> C(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += double(ta ? A[size_t(k) * M + i] : A[size_t(i) * K + k]) *
               double(tb ? B[size_t(j) * K + k] : B[size_t(k) * N + j]);
      C[size_t(i) * N + j] = float(acc);
    }
  return C;
}

TEST(CudaGemm, MatchesHostForEveryTransposition) {
  REQUIRE_CUDA_DEVICE();
  auto device = Device::open();
  Gemm gemm(device);
  const int M = 37, N = 53, K = 29;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> A(size_t(M) * K), B(size_t(K) * N);
  for (float &x : A)
    x = dist(rng);
  for (float &x : B)
    x = dist(rng);
  Arena arena(device, (A.size() + B.size() + size_t(M) * N) * 4);
  size_t a = 0, b = A.size() * 4, c = b + B.size() * 4;
  arena.uploadVector(a, A);
  arena.uploadVector(b, B);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      gemm.run(ta, tb, M, N, K, 1.0f, arena.at(a, A.size() * 4), arena.at(b, B.size() * 4), 0.0f,
               arena.at(c, size_t(M) * N * 4), "gemm test");
      device->synchronize("gemm test");
      std::vector<float> got = arena.downloadVector<float>(c, size_t(M) * N);
      std::vector<float> want = hostGemm(ta, tb, M, N, K, A, B);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4) << "transA " << ta << " transB " << tb << " at " << i;
    }
}

} // namespace
} // namespace stringrt::cuda
