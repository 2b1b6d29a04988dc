// KernelSet::launch skips a launch only when its grid has no block
// (LaunchShape::empty): an i64 argument that is legitimately 0 (an index, a
// skip base, a count of special tokens, the causal mask's lookahead) must not
// stop the kernel from running. Until this rule, any 0 in an i64 argument
// skipped the launch and left its output unwritten; these tests fail under
// that rule (the outputs start as NaN). The kernels come from the package of
// tests/cuda/kernels.pe (STRINGRT_CUDA_TEST_PACKAGE); every test skips
// without it or without a GPU (the host emulator runs them in CI).
//
// Tolerances: 0 for the copies and positions (no arithmetic), 1e-4 * (1 +
// |want|) for causal attention (as AttentionCases.h).
#include "GpuKernelSession.h"

#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/ops/GatherOps.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace stringrt::cuda {
namespace {

using KA = KernelArg;
using Shape = std::vector<int64_t>;

class GpuZeroArguments : public ::testing::Test, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(16) << 20); !why.empty())
      GTEST_SKIP() << why;
  }

  std::vector<float> random(size_t n) {
    std::uniform_real_distribution<float> dist(-2, 2);
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  }
  uint64_t put(const std::vector<float> &values) {
    const size_t offset = next, bytes = std::max<size_t>(values.size() * 4, 4);
    next += (bytes + 255) / 256 * 256;
    arena->upload(offset, values.data(), values.size() * 4, "upload");
    const uint64_t address = arena->at(offset, bytes);
    offsets[address] = offset;
    return address;
  }
  // Filled with NaN: an output the kernel does not write fails the comparison.
  uint64_t output(size_t n) { return put(std::vector<float>(n, NAN)); }
  std::vector<float> get(uint64_t address, size_t n) {
    device->synchronize("test");
    return arena->downloadVector<float>(offsets.at(address), n);
  }
  void launch(const char *kernel, const std::vector<KA> &args,
              const std::array<int64_t, 3> *grid = nullptr) {
    kernels->launch(kernel, args, kernel, grid);
  }

  static void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                          double tol, const std::string &what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs(double(got[i]) - want[i]), tol * (1 + std::fabs(double(want[i]))))
          << what << " at " << i << ": " << got[i] << " vs " << want[i];
  }

  std::map<uint64_t, size_t> offsets;
  size_t next = 0;
  std::mt19937 rng{11};
};

template <typename T> ref::TensorRef<const T> in(const std::vector<T> &v, Shape shape) {
  return {v.data(), std::move(shape)};
}
ref::TensorRef<float> out(std::vector<float> &v, Shape shape) {
  return {v.data(), std::move(shape)};
}

TEST_F(GpuZeroArguments, PositionsWithoutSpecialTokens) { // special = 0
  const int64_t n = 9;
  const uint64_t pos = output(size_t(n));
  launch("pe_seq_positions", {KA::pointer(pos), KA::integer(n), KA::integer(0)});
  std::vector<float> want(static_cast<size_t>(n));
  ref::seqPositions<float>(n, 0, out(want, {n, 1}));
  expectClose(get(pos, size_t(n)), want, 0, "seq_positions, special 0");
}

TEST_F(GpuZeroArguments, SelectTokenZero) { // index = 0 (a ViT's class token)
  const int64_t B = 2, N = 5, D = 6;
  const std::vector<float> x = random(size_t(B * N * D));
  const uint64_t gx = put(x), y = output(size_t(B * D));
  launch("pe_select_token", {KA::pointer(y), KA::pointer(gx), KA::integer(B * D), KA::integer(N),
                             KA::integer(D), KA::integer(0)});
  std::vector<float> want(static_cast<size_t>(B * D));
  ref::selectToken<float>(in(x, {B, N, D}), 0, out(want, {B, D}));
  expectClose(get(y, want.size()), want, 0, "select_token, index 0");
}

TEST_F(GpuZeroArguments, SkipGatherWithBaseZero) { // skip_base = 0: head 0 is not shifted
  const int64_t B = 1, T = 6, D = 8, heads = 2;
  const std::vector<float> v = random(size_t(B * T * D));
  const uint64_t gv = put(v);
  for (const char *kernel : {"pe_skip_gather", "pe_attention_skip"}) {
    const uint64_t y = output(v.size());
    launch(kernel, {KA::pointer(y), KA::pointer(gv), KA::integer(B * T * D), KA::integer(T),
                    KA::integer(D), KA::integer(D / heads), KA::integer(0)});
    std::vector<float> want(v.size());
    ref::skipGather<float>(in(v, {B, T, D}), heads, 0, out(want, {B, T, D}));
    expectClose(get(y, want.size()), want, 0, std::string(kernel) + ", skip_base 0");
  }
}

TEST_F(GpuZeroArguments, CausalAttentionLookaheadZero) { // causal: lookahead = 0
  const int64_t B = 1, T = 7, H = 2, Dh = 16, D = H * Dh;
  const double scale = 1.0 / std::sqrt(double(Dh));
  const std::vector<float> q = random(size_t(B * T * D)), k = random(q.size()),
                           v = random(q.size());
  const uint64_t y = output(q.size()), lse = output(size_t(B * H * T));
  const std::array<int64_t, 3> grid = {B * H, 1, 1}; // T <= 64 rows per block
  launch("pe_attention_d16",
         {KA::pointer(y), KA::pointer(lse), KA::pointer(put(q)), KA::pointer(put(k)),
          KA::pointer(put(v)), KA::integer(T), KA::integer(D), KA::integer(H), KA::integer(0),
          KA::real(float(scale))},
         &grid);
  std::vector<float> want(q.size()), wantLse(size_t(B * H * T));
  ref::attention<float>(in(q, {B, T, D}), in(k, {B, T, D}), in(v, {B, T, D}), std::nullopt, H,
                        scale, ref::AttentionMask::Causal, 0, out(want, {B, T, D}),
                        out(wantLse, {B, H, T}));
  expectClose(get(y, want.size()), want, 1e-4, "causal attention, lookahead 0");
  expectClose(get(lse, wantLse.size()), wantLse, 1e-4, "causal attention's lse, lookahead 0");
}

// The one launch that is skipped: a grid with no block. A grid rule over a
// size of 0 and an explicit grid with a 0 leave the output as it was, and
// are no error (cuLaunchKernel refuses a grid of 0 blocks).
TEST_F(GpuZeroArguments, EmptyGridIsSkipped) {
  const std::vector<float> before = {1.5f, -2.0f, 3.25f};
  const uint64_t pos = put(before);
  launch("pe_seq_positions", {KA::pointer(pos), KA::integer(0), KA::integer(0)});
  expectClose(get(pos, before.size()), before, 0, "seq_positions over n = 0");

  const uint64_t sum = put(before), x = put(random(8));
  const std::array<int64_t, 3> noBlocks = {0, 1, 1};
  launch("pe_sum_all", {KA::pointer(sum), KA::pointer(x), KA::integer(8), KA::integer(1)},
         &noBlocks);
  expectClose(get(sum, before.size()), before, 0, "pe_sum_all with grid (0, 1, 1)");
}

} // namespace
} // namespace stringrt::cuda
