// The position, token and Cayley kernels of compiler/lib/CudaGen (PositionKernels,
// TokenKernels, CayleyKernels) launched on the GPU on random data and
// compared with the runtime's reference kernels (runtime/src/reference),
// launch by launch as the compiler's op lowerings compose them (the same
// kernels, scratch buffers and cuBLAS GEMMs). The kernels come from the
// package of tests/cuda/kernels.pe compiled with --gpu-all-kernels
// (STRINGRT_CUDA_TEST_PACKAGE); every test skips without it or without a GPU.
//
// Tolerances, |got - want| <= tol * (1 + |want|):
//   0      copies, gathers, positions, skew (no arithmetic, or exact integers)
//   2e-7   tables evaluated in f64 and rounded once (rope_freqs, sinusoidal,
//          rope_table): at most an ulp from libdevice's f64 pow/sin/cos
//   1e-6   one rotation or gate per element in f32 (rope_apply, spd_gate)
//   2e-5   f32 sums of up to ~2000 terms (column sums, angle gradients,
//          cross entropy, token/patch gradients) against double references
//   1e-4   Gauss-Jordan in f32 (Cayley weight, dim up to 70) and the
//          cuBLAS compositions (patch_embed, cayley, their gradients)
#include "GpuKernelSession.h"

#include "stringrt/Augment.h"
#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/ops/GatherOps.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>

namespace stringrt::cuda {
namespace {

using ref::TensorRef;
using KA = KernelArg;
using Shape = std::vector<int64_t>;

class GpuOpKernels : public ::testing::Test, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(256) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(7);
    gemm = std::make_unique<Gemm>(device);
  }

  // The one launch of a column sum (OpKernelUtil.h, appendColumnSum):
  // partials into a scratch buffer of chunks x cols, each column group's
  // last block finishing into `out`; its ticket counters start at 0 and
  // must be back at 0 after it.
  void columnSum(const char *partialsKernel, std::vector<KA> inputs, int64_t rows, int64_t cols,
                 std::vector<KA> extra, uint64_t out, int64_t chunks) {
    const int64_t groups = (cols + 31) / 32;
    uint64_t partials = output(size_t(chunks * cols)), tickets = zeros(size_t(groups));
    std::vector<KA> args = {KA::pointer(partials)};
    args.insert(args.end(), inputs.begin(), inputs.end());
    args.push_back(KA::integer(rows));
    args.push_back(KA::integer(cols));
    args.push_back(KA::integer(chunks));
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {KA::pointer(tickets), KA::pointer(out), KA::pointer(out),
                             KA::integer(cols)});
    launchGrid(partialsKernel, args, {groups, chunks, 1});
    for (float word : get(tickets, size_t(groups)))
      ASSERT_EQ(word, 0.0f) << partialsKernel << " left a ticket counter off 0";
  }
  void sumAll(uint64_t out, uint64_t x, int64_t n, int64_t divisor) {
    launchGrid("pe_sum_all",
               {KA::pointer(out), KA::pointer(x), KA::integer(n), KA::integer(divisor)},
               {1, 1, 1});
  }
  // A long scalar sum as lowered: pe_sum_partials over `chunks` warps, then
  // pe_sum_all over the partials.
  void sumAllInTwoStages(uint64_t out, uint64_t x, int64_t n, int64_t divisor, int64_t chunks) {
    uint64_t partials = output(size_t(chunks));
    launchGrid("pe_sum_partials",
               {KA::pointer(partials), KA::pointer(x), KA::integer(n), KA::integer(chunks)},
               {chunks, 1, 1});
    sumAll(out, partials, chunks, divisor);
  }

  std::unique_ptr<Gemm> gemm;
};

template <typename T> TensorRef<const T> in(const std::vector<T> &v, Shape shape) {
  return {v.data(), std::move(shape)};
}
TensorRef<float> out(std::vector<float> &v, Shape shape) { return {v.data(), std::move(shape)}; }

//===----------------------------------------------------------------------===//
// Constant tables
//===----------------------------------------------------------------------===//

TEST_F(GpuOpKernels, PositionTables) {
  for (int64_t special : {0, 1, 3}) {
    const int64_t length = 13, n = special + length;
    uint64_t pos = output(size_t(n));
    launch("pe_seq_positions", {KA::pointer(pos), KA::integer(n), KA::integer(special)});
    std::vector<float> want(static_cast<size_t>(n));
    ref::seqPositions<float>(length, special, out(want, {n, 1}));
    expectClose(get(pos, size_t(n)), want, 0, "seq_positions");

    const int64_t rows = 5, cols = 7, tokens = special + rows * cols;
    uint64_t grid = output(size_t(2 * tokens));
    launch("pe_grid_positions",
           {KA::pointer(grid), KA::integer(tokens), KA::integer(cols), KA::integer(special)});
    std::vector<float> wantGrid(static_cast<size_t>(2 * tokens));
    ref::gridPositions<float>(rows, cols, special, out(wantGrid, {tokens, 2}));
    expectClose(get(grid, size_t(2 * tokens)), wantGrid, 0, "grid_positions");

    uint64_t rel = output(size_t(2 * tokens * tokens));
    launch("pe_relative_positions", {KA::pointer(rel), KA::pointer(grid),
                                     KA::integer(2 * tokens * tokens), KA::integer(tokens),
                                     KA::integer(2)});
    std::vector<float> wantRel(static_cast<size_t>(2 * tokens * tokens));
    ref::relativePositions<float>(in(wantGrid, {tokens, 2}), out(wantRel, {tokens, tokens, 2}));
    expectClose(get(rel, wantRel.size()), wantRel, 0, "relative_positions");
  }
}

TEST_F(GpuOpKernels, FrequencyAndSinusoidalTables) {
  // 10000.3 is not an f32: base_hi + base_lo carries it.
  for (double base : {100.0, 10000.0, 10000.3}) {
    const float hi = float(base), lo = float(base - double(hi));
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{64, 4}, {24, 2}, {8, 1}};
    for (auto [dim, heads] : shapes) {
      const int64_t pairs = dim / 2, dh = dim / heads;
      uint64_t seq = output(size_t(pairs));
      launch("pe_rope_freqs_seq", {KA::pointer(seq), KA::integer(pairs), KA::integer(dh),
                                   KA::real(hi), KA::real(lo)});
      std::vector<float> want(static_cast<size_t>(pairs));
      ref::ropeFreqs<float>(ref::FreqsKind::Seq, dim, heads, base, out(want, {pairs, 1}));
      expectClose(get(seq, size_t(pairs)), want, 2e-7, "rope_freqs seq");

      uint64_t axial = output(size_t(2 * pairs));
      launch("pe_rope_freqs_axial", {KA::pointer(axial), KA::integer(pairs), KA::integer(dh),
                                     KA::real(hi), KA::real(lo)});
      std::vector<float> wantAxial(static_cast<size_t>(2 * pairs));
      ref::ropeFreqs<float>(ref::FreqsKind::Axial, dim, heads, base, out(wantAxial, {pairs, 2}));
      expectClose(get(axial, size_t(2 * pairs)), wantAxial, 2e-7, "rope_freqs axial");
    }
    const int64_t length = 37, dim = 10;
    uint64_t table = output(size_t(length * dim));
    launch("pe_sinusoidal", {KA::pointer(table), KA::integer(length * dim / 2),
                             KA::integer(dim / 2), KA::real(hi), KA::real(lo)});
    std::vector<float> want(static_cast<size_t>(length * dim));
    ref::sinusoidal<float>(length, dim, base, out(want, {length, dim}));
    expectClose(get(table, size_t(length * dim)), want, 2e-7, "sinusoidal");
  }
}

//===----------------------------------------------------------------------===//
// Rotary tables and their application
//===----------------------------------------------------------------------===//

struct Rotary {
  int64_t lead, tokens, width, axes;
  int64_t pairs() const { return width / 2; }
  int64_t n() const { return lead * tokens * width; }
};

TEST_F(GpuOpKernels, RopeTableApplyAndGradients) {
  for (Rotary s : {Rotary{1, 7, 10, 1}, Rotary{3, 50, 64, 2}, Rotary{2, 9, 6, 2}}) {
    const int64_t P = s.pairs(), T = s.tokens, A = s.axes;
    std::vector<float> pos = random(static_cast<size_t>(T * A), 0, 8), freqs = random(static_cast<size_t>(P * A), -1, 1);
    std::vector<float> x = random(static_cast<size_t>(s.n())), dy = random(static_cast<size_t>(s.n()));
    uint64_t gpos = put(pos), gfreqs = put(freqs), gx = put(x), gdy = put(dy);
    Shape xs = {s.lead, T, s.width};

    uint64_t table = output(size_t(T * P * 2));
    launch("pe_rope_table", {KA::pointer(table), KA::pointer(gpos), KA::pointer(gfreqs),
                             KA::integer(T * P), KA::integer(P), KA::integer(A)});
    std::vector<float> wantTable(static_cast<size_t>(T * P * 2));
    ref::ropeTable<float>(in(pos, {T, A}), in(freqs, {P, A}), out(wantTable, {T, P, 2}));
    std::vector<float> gotTable = get(table, wantTable.size());
    expectClose(gotTable, wantTable, 2e-7, "rope_table");

    for (bool inverse : {false, true}) {
      uint64_t y = output(size_t(s.n()));
      launch("pe_rope_apply", {KA::pointer(y), KA::pointer(gx), KA::pointer(table),
                               KA::integer(s.n() / 2), KA::integer(T), KA::integer(P),
                               KA::real(inverse ? -1.0f : 1.0f)});
      std::vector<float> want(static_cast<size_t>(s.n()));
      // The same (f32) table on both sides: only the rotation is compared.
      ref::ropeApply<float>(in(x, xs), in(gotTable, {T, P, 2}), inverse, out(want, xs));
      expectClose(get(y, want.size()), want, 1e-6, "rope_apply");

      std::vector<float> wantDtable(static_cast<size_t>(T * P * 2));
      ref::ropeApplyGradTable<float>(in(x, xs), in(dy, xs), inverse, out(wantDtable, {T, P, 2}));
      for (int64_t chunks : {int64_t(1), int64_t(2), int64_t(264)}) {
        uint64_t dtable = output(size_t(T * P * 2));
        columnSum("pe_rope_apply_grad_table_partials", {KA::pointer(gx), KA::pointer(gdy)},
                  s.lead, 2 * T * P, {KA::integer(T * P), KA::real(inverse ? -1.0f : 1.0f)},
                  dtable, chunks);
        expectClose(get(dtable, wantDtable.size()), wantDtable, 2e-5,
                    "rope_apply_grad_table, " + std::to_string(chunks) + " chunks");
      }
    }

    std::vector<float> dyTable = random(static_cast<size_t>(T * P * 2));
    uint64_t gdyTable = put(dyTable), dfreqs = output(size_t(P * A));
    launch("pe_rope_table_grad", {KA::pointer(dfreqs), KA::pointer(gpos), KA::pointer(gfreqs),
                                  KA::pointer(gdyTable), KA::integer(P * A), KA::integer(T),
                                  KA::integer(A)});
    std::vector<float> wantDfreqs(static_cast<size_t>(P * A));
    ref::ropeTableGrad<float>(in(pos, {T, A}), in(freqs, {P, A}), in(dyTable, {T, P, 2}),
                              out(wantDfreqs, {P, A}));
    expectClose(get(dfreqs, wantDfreqs.size()), wantDfreqs, 2e-5, "rope_table_grad");
  }
}

// pe.rope / pe.householder and their frequency gradients as lowered: a table
// in scratch, rope_apply; the angle gradient, then the contraction with pos.
TEST_F(GpuOpKernels, RopeAndHouseholderThroughTables) {
  const Rotary s{2, 11, 12, 2};
  const int64_t P = s.pairs(), T = s.tokens, A = s.axes, n = T * P;
  Shape xs = {s.lead, T, s.width};
  std::vector<float> pos = random(static_cast<size_t>(T * A), 0, 5), f1 = random(static_cast<size_t>(P * A), -1, 1),
                     f2 = random(static_cast<size_t>(P * A), -1, 1), x = random(static_cast<size_t>(s.n())),
                     dy = random(static_cast<size_t>(s.n()));
  uint64_t gpos = put(pos), gf1 = put(f1), gf2 = put(f2), gx = put(x), gdy = put(dy);
  for (bool householder : {false, true}) {
    std::string what = householder ? "householder" : "rope";
    uint64_t table = output(size_t(n * 2)), y = output(size_t(s.n()));
    if (householder)
      launch("pe_householder_table",
             {KA::pointer(table), KA::pointer(gpos), KA::pointer(gf1), KA::pointer(gf2),
              KA::integer(n), KA::integer(P), KA::integer(A)});
    else
      launch("pe_rope_table", {KA::pointer(table), KA::pointer(gpos), KA::pointer(gf1),
                               KA::integer(n), KA::integer(P), KA::integer(A)});
    launch("pe_rope_apply", {KA::pointer(y), KA::pointer(gx), KA::pointer(table),
                             KA::integer(s.n() / 2), KA::integer(T), KA::integer(P),
                             KA::real(1.0f)});
    std::vector<float> want(static_cast<size_t>(s.n()));
    if (householder)
      ref::householder<float>(in(x, xs), in(pos, {T, A}), in(f1, {P, A}), in(f2, {P, A}),
                              out(want, xs));
    else
      ref::rope<float>(in(x, xs), in(pos, {T, A}), in(f1, {P, A}), out(want, xs));
    expectClose(get(y, want.size()), want, 1e-6, what);

    uint64_t dtheta = output(size_t(n));
    launch("pe_rope_grad_angles", {KA::pointer(dtheta), KA::pointer(gx), KA::pointer(gdy),
                                   KA::pointer(table), KA::integer(n), KA::integer(s.lead)});
    uint64_t d1 = output(size_t(P * A)), d2 = output(size_t(P * A));
    auto contract = [&](uint64_t dst, float factor) {
      launch("pe_rope_angles_to_freqs", {KA::pointer(dst), KA::pointer(gpos), KA::pointer(dtheta),
                                         KA::integer(P * A), KA::integer(T), KA::integer(A),
                                         KA::real(factor)});
    };
    std::vector<float> w1(static_cast<size_t>(P * A)), w2(static_cast<size_t>(P * A));
    if (householder) {
      contract(d1, -2.0f);
      contract(d2, 2.0f);
      ref::householderGradFreqs<float>(in(x, xs), in(pos, {T, A}), in(f1, {P, A}),
                                       in(f2, {P, A}), in(dy, xs), out(w1, {P, A}),
                                       out(w2, {P, A}));
      expectClose(get(d2, w2.size()), w2, 1e-4, what + " df2");
    } else {
      contract(d1, 1.0f);
      ref::ropeGradFreqs<float>(in(x, xs), in(pos, {T, A}), in(f1, {P, A}), in(dy, xs),
                                out(w1, {P, A}));
    }
    expectClose(get(d1, w1.size()), w1, 1e-4, what + " dfreqs");
  }
}

//===----------------------------------------------------------------------===//
// Gates and skips
//===----------------------------------------------------------------------===//

TEST_F(GpuOpKernels, SpdGateAndGradient) {
  const int64_t B = 3, T = 5, D = 9;
  for (Shape gshape : {Shape{D}, Shape{T, D}}) {
    const int64_t n = B * T * D, g = ref::shapeNumel(gshape);
    std::vector<float> x = random(static_cast<size_t>(n)), gamma = random(static_cast<size_t>(g), -1, 1),
                       dy = random(static_cast<size_t>(n));
    uint64_t gx = put(x), gg = put(gamma), gdy = put(dy);
    uint64_t y = output(size_t(n)), dx = output(size_t(n)), dgamma = output(size_t(g));
    launch("pe_spd_gate", {KA::pointer(y), KA::pointer(gx), KA::pointer(gg), KA::integer(n),
                           KA::integer(g)});
    launch("pe_spd_gate", {KA::pointer(dx), KA::pointer(gdy), KA::pointer(gg), KA::integer(n),
                           KA::integer(g)});
    columnSum("pe_spd_gate_grad_partials", {KA::pointer(gx), KA::pointer(gg), KA::pointer(gdy)},
              n / g, g, {}, dgamma, 2);
    std::vector<float> wy(static_cast<size_t>(n)), wdx(static_cast<size_t>(n)), wdg(static_cast<size_t>(g));
    ref::spdGate<float>(in(x, {B, T, D}), in(gamma, gshape), out(wy, {B, T, D}));
    ref::spdGateGrad<float>(in(x, {B, T, D}), in(gamma, gshape), in(dy, {B, T, D}),
                            out(wdx, {B, T, D}), out(wdg, gshape));
    expectClose(get(y, wy.size()), wy, 1e-6, "spd_gate");
    expectClose(get(dx, wdx.size()), wdx, 1e-6, "spd_gate_grad dx");
    expectClose(get(dgamma, wdg.size()), wdg, 2e-5, "spd_gate_grad dgamma");
  }
}

TEST_F(GpuOpKernels, SkipGatherAndGradient) {
  const int64_t heads = 4, D = 12, T = 9;
  for (int64_t B : {1, 2})
    for (int64_t skipBase : {0, 2, 20}) { // 20: every head reads outside [0, T)
      const int64_t n = B * T * D;
      std::vector<float> v = random(static_cast<size_t>(n));
      uint64_t gv = put(v);
      for (bool grad : {false, true}) {
        uint64_t y = output(size_t(n));
        launch(grad ? "pe_skip_gather_grad" : "pe_skip_gather",
               {KA::pointer(y), KA::pointer(gv), KA::integer(n), KA::integer(T), KA::integer(D),
                KA::integer(D / heads), KA::integer(skipBase)});
        std::vector<float> want(static_cast<size_t>(n));
        if (grad)
          ref::skipGatherGrad<float>(in(v, {B, T, D}), heads, skipBase, out(want, {B, T, D}));
        else
          ref::skipGather<float>(in(v, {B, T, D}), heads, skipBase, out(want, {B, T, D}));
        expectClose(get(y, want.size()), want, 0, grad ? "skip_gather_grad" : "skip_gather");
      }
    }
}

// pe_augment_images applies the host's draws (Augment.h) bit for bit, as
// applyAugmentation does: drawn ones, with every component certain or
// likely, and edge cases written by hand (shifted past the image, flipped
// and shifted, a rectangle reaching past the image, the identity).
TEST_F(GpuOpKernels, AugmentImagesIsTheHostsApplyBitwise) {
  struct Case {
    int64_t B, C, H, W;
  };
  for (Case c : {Case{5, 3, 7, 9}, Case{3, 1, 28, 28}, Case{2, 2, 1, 6}}) {
    const int64_t n = c.B * c.C * c.H * c.W;
    std::vector<float> images = random(static_cast<size_t>(n));
    images[0] = -0.0f; // copied as it is
    AugmentPolicy policy;
    policy.cropPadding = 3;
    policy.flipProbability = 0.5;
    policy.eraseProbability = 1.0;
    std::vector<std::vector<int32_t>> drawSets;
    for (int64_t step : {0, 5, 12}) {
      std::vector<int32_t> draws(size_t(c.B * kAugmentDrawWords));
      drawAugmentation(policy, 99, step, c.B, c.H, c.W, draws.data());
      drawSets.push_back(std::move(draws));
    }
    std::vector<int32_t> byHand(size_t(c.B * kAugmentDrawWords), 0);
    const std::vector<std::array<int32_t, kAugmentDrawWords>> edges = {
        {0, int32_t(c.W), 0, 0, 0, 0, 0}, {-1, 2, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 1, 9, 9},
        {0, 0, 0, 0, 0, 0, 0}};
    for (int64_t b = 0; b < c.B; ++b)
      std::copy(edges[size_t(b) % edges.size()].begin(), edges[size_t(b) % edges.size()].end(),
                byHand.begin() + b * kAugmentDrawWords);
    drawSets.push_back(byHand);
    uint64_t source = put(images);
    for (const std::vector<int32_t> &draws : drawSets) {
      uint64_t gdraws = putInts(draws), y = output(size_t(n));
      launch("pe_augment_images", {KA::pointer(y), KA::pointer(source), KA::pointer(gdraws),
                                   KA::integer(n), KA::integer(c.C), KA::integer(c.H),
                                   KA::integer(c.W)});
      std::vector<float> want = images;
      applyAugmentation(draws.data(), want.data(), c.B, c.C, c.H, c.W);
      std::vector<float> got = get(y, want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << c.B << "x" << c.C << "x" << c.H << "x" << c.W;
    }
  }
}

//===----------------------------------------------------------------------===//
// Reductions and copies
//===----------------------------------------------------------------------===//

// The bits pe_colsum_partials must give (OpKernelUtil.cpp): per chunk g,
// row lane y (of 8) adds rows first + y, first + y + 8, ... from 0, the 8
// lanes' sums are added in lane order; then, as pe_colsum_finish_pair adds,
// lane l (of 32) adds chunks l, l + 32, ... from 0 and the xor butterfly
// (16, 8, 4, 2, 1) gives lane 0's total.
std::vector<float> columnSumBits(const std::vector<float> &x, int64_t rows, int64_t cols,
                                 int64_t chunks) {
  const int64_t len = (rows + chunks - 1) / chunks;
  std::vector<float> partials(static_cast<size_t>(chunks * cols)), sums(static_cast<size_t>(cols));
  for (int64_t g = 0; g < chunks; ++g)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t first = std::min(g * len, rows), last = std::min(first + len, rows);
      float lanes[8];
      for (int64_t y = 0; y < 8; ++y) {
        lanes[y] = 0.0f;
        for (int64_t r = first + y; r < last; r += 8)
          lanes[y] += x[size_t(r * cols + c)];
      }
      float total = lanes[0];
      for (int64_t y = 1; y < 8; ++y)
        total += lanes[y];
      partials[size_t(g * cols + c)] = total;
    }
  for (int64_t c = 0; c < cols; ++c) {
    float lane[32];
    for (int64_t l = 0; l < 32; ++l) {
      lane[l] = 0.0f;
      for (int64_t g = l; g < chunks; g += 32)
        lane[l] += partials[size_t(g * cols + c)];
    }
    for (int offset = 16; offset >= 1; offset /= 2) {
      float next[32];
      for (int l = 0; l < 32; ++l)
        next[l] = lane[l] + lane[l ^ offset];
      std::copy(next, next + 32, lane);
    }
    sums[size_t(c)] = lane[0];
  }
  return sums;
}

// One launch a column sum (the last block of each column group finishes
// it): the bits of the two-launch order it replaced, for one block a group
// (one chunk), chunks of rows not a multiple of 8, more chunks than 32 and
// than rows, a partial column group; the same launch again (as a replayed
// graph runs it) gives the same bits and leaves the tickets at 0.
TEST_F(GpuOpKernels, ColumnSumInOneLaunchHasTheBitsOfPartialsThenFinish) {
  const std::vector<std::array<int64_t, 3>> cases = {
      {1000, 70, 1}, {1001, 33, 7}, {999, 32, 64}, {13, 5, 40}, {4133, 100, 528}, {3, 1, 1}};
  for (auto [rows, cols, chunks] : cases) {
    std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " in " +
                       std::to_string(chunks) + " chunks";
    std::vector<float> x = random(static_cast<size_t>(rows * cols));
    uint64_t gx = put(x), y = output(size_t(cols));
    const int64_t groups = (cols + 31) / 32;
    uint64_t partials = output(size_t(chunks * cols)), tickets = zeros(size_t(groups));
    std::vector<KA> args = {KA::pointer(partials), KA::pointer(gx),  KA::integer(rows),
                            KA::integer(cols),     KA::integer(chunks), KA::integer(cols),
                            KA::pointer(tickets),  KA::pointer(y),   KA::pointer(y),
                            KA::integer(cols)};
    std::vector<float> want = columnSumBits(x, rows, cols, chunks);
    for (int run = 0; run < 2; ++run) {
      // A fresh (NaN) output each run: the second must be finished again.
      y = output(size_t(cols));
      args[7] = args[8] = KA::pointer(y);
      launchGrid("pe_colsum_partials", args, {groups, chunks, 1});
      std::vector<float> got = get(y, size_t(cols));
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << what << ", run " << run;
      for (float word : get(tickets, size_t(groups)))
        ASSERT_EQ(word, 0.0f) << what << ": a ticket counter left off 0, run " << run;
    }
    // A pair: columns [0, half) into one output, the rest into the other.
    if (cols >= 2) {
      const int64_t half = cols / 2;
      uint64_t lo = output(size_t(half)), hi = output(size_t(cols - half));
      std::vector<KA> pair = args;
      pair[7] = KA::pointer(lo);
      pair[8] = KA::pointer(hi);
      pair[9] = KA::integer(half);
      launchGrid("pe_colsum_partials", pair, {groups, chunks, 1});
      std::vector<float> got = get(lo, size_t(half)), rest = get(hi, size_t(cols - half));
      got.insert(got.end(), rest.begin(), rest.end());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << what << ", as a pair at " << half;
    }
  }
}

TEST_F(GpuOpKernels, ColumnSumsAreSumTo) {
  // (rows, cols, chunks): one row, more chunks than rows, one column, wide.
  const std::vector<std::array<int64_t, 3>> cases = {
      {1, 64, 256}, {37, 5, 256}, {2000, 1, 16}, {150, 300, 7}, {1000, 129, 1}};
  for (auto [rows, cols, chunks] : cases) {
    std::vector<float> x = random(static_cast<size_t>(rows * cols));
    uint64_t gx = put(x), y = output(size_t(cols));
    columnSum("pe_colsum_partials", {KA::pointer(gx)}, rows, cols, {KA::integer(cols)}, y,
              chunks);
    std::vector<float> want(static_cast<size_t>(cols));
    ref::sumTo<float>(in(x, {rows, cols}), out(want, {cols}));
    expectClose(get(y, want.size()), want, 2e-5,
                "sum_to " + std::to_string(rows) + "x" + std::to_string(cols));

    uint64_t all = output(1);
    sumAll(all, gx, rows * cols, rows * cols);
    std::vector<float> wantMean(1);
    ref::mean<float>(in(x, {rows, cols}), std::nullopt, out(wantMean, {}));
    expectClose(get(all, 1), wantMean, 2e-5, "mean (pe_sum_all)");
    for (int64_t stages : {1, 7, 264}) {
      uint64_t twoStage = output(1);
      sumAllInTwoStages(twoStage, gx, rows * cols, rows * cols, stages);
      expectClose(get(twoStage, 1), wantMean, 2e-5,
                  "mean (pe_sum_partials x " + std::to_string(stages) + ", pe_sum_all)");
    }
  }
}

TEST_F(GpuOpKernels, BroadcastExpandAndMeans) {
  const int64_t B = 3, T = 4, D = 5, n = B * T * D;
  std::vector<float> x = random(static_cast<size_t>(n)), suffix = random(static_cast<size_t>(T * D));
  uint64_t gx = put(x), gs = put(suffix);

  uint64_t y = output(size_t(n));
  launch("pe_broadcast_to",
         {KA::pointer(y), KA::pointer(gs), KA::integer(n), KA::integer(T * D)});
  std::vector<float> want(static_cast<size_t>(n));
  ref::broadcastTo<float>(in(suffix, {T, D}), out(want, {B, T, D}));
  expectClose(get(y, want.size()), want, 0, "broadcast_to");

  for (int64_t axis : {0, 1, 2, 3}) {
    const int64_t size = 2;
    Shape ys = {B, T, D};
    ys.insert(ys.begin() + axis, size);
    int64_t inner = 1;
    for (int64_t i = axis; i < 3; ++i)
      inner *= Shape{B, T, D}[size_t(i)];
    uint64_t e = output(size_t(n * size));
    launch("pe_expand_axis", {KA::pointer(e), KA::pointer(gx), KA::integer(n * size),
                              KA::integer(size), KA::integer(inner)});
    std::vector<float> wantE(static_cast<size_t>(n * size));
    ref::expandAxis<float>(in(x, {B, T, D}), axis, size, out(wantE, ys));
    expectClose(get(e, wantE.size()), wantE, 0, "expand_axis " + std::to_string(axis));
  }

  for (int64_t axis : {0, 1, 2}) {
    Shape xs = {B, T, D}, ys = xs;
    ys.erase(ys.begin() + axis);
    int64_t count = xs[size_t(axis)], inner = 1;
    for (int64_t i = axis + 1; i < 3; ++i)
      inner *= xs[size_t(i)];
    uint64_t m = output(size_t(n / count));
    launch("pe_mean_axis", {KA::pointer(m), KA::pointer(gx), KA::integer(n / count),
                            KA::integer(inner), KA::integer(count)});
    std::vector<float> wantM(static_cast<size_t>(n / count));
    ref::mean<float>(in(x, xs), axis, out(wantM, ys));
    expectClose(get(m, wantM.size()), wantM, 1e-6, "mean axis " + std::to_string(axis));

    // mean_grad: dy repeated along the axis, divided by its size.
    std::vector<float> dy = random(static_cast<size_t>(n / count));
    uint64_t gdy = put(dy), dx = output(size_t(n));
    launch("pe_mean_grad", {KA::pointer(dx), KA::pointer(gdy), KA::integer(n),
                            KA::integer(inner), KA::integer(count)});
    std::vector<float> wantDx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      wantDx[size_t(i)] = dy[size_t((i / (count * inner)) * inner + i % inner)] / float(count);
    expectClose(get(dx, wantDx.size()), wantDx, 1e-7, "mean_grad axis " + std::to_string(axis));
  }
}

//===----------------------------------------------------------------------===//
// Token plumbing and embeddings
//===----------------------------------------------------------------------===//

TEST_F(GpuOpKernels, ClassAndSelectToken) {
  const int64_t N = 6, D = 7;
  for (int64_t B : {1, 4}) {
    std::vector<float> x = random(static_cast<size_t>(B * N * D)), cls = random(static_cast<size_t>(D));
    uint64_t gx = put(x), gc = put(cls), y = output(size_t(B * (N + 1) * D));
    launch("pe_class_token", {KA::pointer(y), KA::pointer(gx), KA::pointer(gc),
                              KA::integer(B * (N + 1) * D), KA::integer(N + 1), KA::integer(D)});
    std::vector<float> wy(static_cast<size_t>(B * (N + 1) * D));
    ref::classToken<float>(in(x, {B, N, D}), in(cls, {D}), out(wy, {B, N + 1, D}));
    expectClose(get(y, wy.size()), wy, 0, "class_token");

    std::vector<float> dy = random(static_cast<size_t>(B * (N + 1) * D));
    uint64_t gdy = put(dy), dx = output(size_t(B * N * D)), dcls = output(size_t(D));
    launch("pe_class_token_grad_x", {KA::pointer(dx), KA::pointer(gdy),
                                     KA::integer((B * N * D + 7) / 8), KA::integer(B * N * D),
                                     KA::integer(N), KA::integer(D)});
    columnSum("pe_colsum_partials", {KA::pointer(gdy)}, B, D, {KA::integer((N + 1) * D)}, dcls,
              3);
    std::vector<float> wdx(static_cast<size_t>(B * N * D)), wdcls(static_cast<size_t>(D));
    ref::classTokenGrad<float>(in(dy, {B, N + 1, D}), out(wdx, {B, N, D}), out(wdcls, {D}));
    expectClose(get(dx, wdx.size()), wdx, 0, "class_token_grad dx");
    expectClose(get(dcls, wdcls.size()), wdcls, 1e-6, "class_token_grad dcls");

    for (int64_t index : {int64_t(0), N - 1}) {
      uint64_t s = output(size_t(B * D));
      launch("pe_select_token", {KA::pointer(s), KA::pointer(gx), KA::integer(B * D),
                                 KA::integer(N), KA::integer(D), KA::integer(index)});
      std::vector<float> ws(static_cast<size_t>(B * D));
      ref::selectToken<float>(in(x, {B, N, D}), index, out(ws, {B, D}));
      expectClose(get(s, ws.size()), ws, 0, "select_token");

      std::vector<float> ds = random(static_cast<size_t>(B * D));
      uint64_t gds = put(ds), g = output(size_t(B * N * D));
      launch("pe_select_token_grad", {KA::pointer(g), KA::pointer(gds), KA::integer(B * N * D),
                                      KA::integer(N), KA::integer(D), KA::integer(index)});
      std::vector<float> wg(static_cast<size_t>(B * N * D));
      ref::selectTokenGrad<float>(in(ds, {B, D}), index, out(wg, {B, N, D}));
      expectClose(get(g, wg.size()), wg, 0, "select_token_grad");
    }
  }
}

TEST_F(GpuOpKernels, TokenEmbeddingAndGradient) {
  const int64_t V = 11, D = 6, B = 2, T = 9, n = B * T;
  std::vector<float> table = random(static_cast<size_t>(V * D));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[size_t(i)] = int32_t((i * 5) % V);
  ids[0] = 0;
  ids[1] = int32_t(V - 1); // the boundaries
  ids[2] = ids[3] = 4;     // a repeated id sums
  uint64_t gids = putInts(ids), gt = put(table), y = output(size_t(n * D));
  launch("pe_token_embed", {KA::pointer(y), KA::pointer(gids), KA::pointer(gt),
                            KA::integer(n * D), KA::integer(D), KA::integer(V)});
  std::vector<float> wy(static_cast<size_t>(n * D));
  ref::tokenEmbed<float>(in(ids, {B, T}), in(table, {V, D}), out(wy, {B, T, D}));
  expectClose(get(y, wy.size()), wy, 0, "token_embed");

  std::vector<float> dy = random(static_cast<size_t>(n * D));
  uint64_t gdy = put(dy);
  for (int64_t chunks : {1, 4, 40}) {
    uint64_t dtable = output(size_t(V * D));
    columnSum("pe_token_embed_grad_partials", {KA::pointer(gids), KA::pointer(gdy)}, n, V * D,
              {KA::integer(D)}, dtable, chunks);
    std::vector<float> wd(static_cast<size_t>(V * D));
    ref::tokenEmbedGrad<float>(in(ids, {B, T}), in(dy, {B, T, D}), out(wd, {V, D}));
    expectClose(get(dtable, wd.size()), wd, 1e-6, "token_embed_grad");
  }

  // Ids outside [0, V) (the reference throws): NaN rows, no out-of-bounds
  // read, and no contribution to the gradient.
  std::vector<int32_t> bad = ids;
  bad[5] = -1;
  bad[6] = int32_t(V);
  bad[7] = std::numeric_limits<int32_t>::min();
  uint64_t gbad = putInts(bad), yb = output(size_t(n * D));
  launch("pe_token_embed", {KA::pointer(yb), KA::pointer(gbad), KA::pointer(gt),
                            KA::integer(n * D), KA::integer(D), KA::integer(V)});
  std::vector<float> got = get(yb, size_t(n * D));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) {
      bool invalid = i >= 5 && i <= 7;
      float v = got[size_t(i * D + d)];
      if (invalid)
        EXPECT_TRUE(std::isnan(v)) << "row " << i;
      else
        EXPECT_EQ(v, wy[size_t(i * D + d)]) << "row " << i;
    }
  uint64_t dbad = output(size_t(V * D));
  columnSum("pe_token_embed_grad_partials", {KA::pointer(gbad), KA::pointer(gdy)}, n, V * D,
            {KA::integer(D)}, dbad, 3);
  std::vector<float> dyValid = dy; // the rows of the bad ids contribute nothing
  std::vector<int32_t> idsValid = bad;
  for (int64_t i = 5; i <= 7; ++i) {
    idsValid[size_t(i)] = 0;
    for (int64_t d = 0; d < D; ++d)
      dyValid[size_t(i * D + d)] = 0;
  }
  std::vector<float> wbad(static_cast<size_t>(V * D));
  ref::tokenEmbedGrad<float>(in(idsValid, {B, T}), in(dyValid, {B, T, D}), out(wbad, {V, D}));
  expectClose(get(dbad, wbad.size()), wbad, 1e-6, "token_embed_grad with bad ids");
}

TEST_F(GpuOpKernels, PatchEmbedAndGradient) {
  const int64_t C = 3, H = 8, W = 12, p = 4, D = 5, K = C * p * p, N = (H / p) * (W / p);
  for (int64_t B : {1, 3}) {
    std::vector<float> image = random(static_cast<size_t>(B * C * H * W)), w = random(static_cast<size_t>(K * D)),
                       bias = random(static_cast<size_t>(D));
    uint64_t gi = put(image), gw = put(w), gb = put(bias);
    uint64_t cols = output(size_t(B * N * K)), y = output(size_t(B * N * D));
    launch("pe_patch_gather", {KA::pointer(cols), KA::pointer(gi), KA::integer(B * N * K),
                               KA::integer(C), KA::integer(H), KA::integer(W), KA::integer(p)});
    launch("pe_broadcast_to",
           {KA::pointer(y), KA::pointer(gb), KA::integer(B * N * D), KA::integer(D)});
    gemm->run(false, false, B * N, D, K, 1.0f, cols, gw, 1.0f, y, "patch_embed gemm");
    std::vector<float> wy(static_cast<size_t>(B * N * D));
    ref::patchEmbed<float>(in(image, {B, C, H, W}), in(w, {K, D}), in(bias, {D}), p,
                           out(wy, {B, N, D}));
    expectClose(get(y, wy.size()), wy, 1e-4, "patch_embed");

    std::vector<float> dy = random(static_cast<size_t>(B * N * D));
    uint64_t gdy = put(dy), dw = output(size_t(K * D)), db = output(size_t(D));
    gemm->run(true, false, K, D, B * N, 1.0f, cols, gdy, 0.0f, dw, "patch_embed_grad gemm");
    columnSum("pe_colsum_partials", {KA::pointer(gdy)}, B * N, D, {KA::integer(D)}, db, 4);
    std::vector<float> wdw(static_cast<size_t>(K * D)), wdb(static_cast<size_t>(D));
    ref::patchEmbedGrad<float>(in(image, {B, C, H, W}), in(dy, {B, N, D}), p, out(wdw, {K, D}),
                               out(wdb, {D}));
    expectClose(get(dw, wdw.size()), wdw, 1e-4, "patch_embed_grad dw");
    expectClose(get(db, wdb.size()), wdb, 2e-5, "patch_embed_grad db");
  }
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

TEST_F(GpuOpKernels, CrossEntropyAndGradient) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 10}, {37, 10}, {5, 257}};
  // Label smoothing e enters as keep = 1 - e and spread = e / C.
  for (double smoothing : {0.0, 0.1, 0.6})
  for (auto [rows, C] : shapes) {
    const std::string name = "smoothing " + std::to_string(smoothing);
    const KA keep = KA::real(float(1.0 - smoothing)), spread = KA::real(float(smoothing / double(C)));
    std::vector<float> logits = random(static_cast<size_t>(rows * C), -8, 8);
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      labels[size_t(r)] = int32_t((r * 7) % C);
    labels[0] = int32_t(C - 1); // the boundaries
    if (rows > 1)
      labels[1] = 0;
    std::vector<float> dyValue = {0.75f};
    uint64_t gl = put(logits), glab = putInts(labels), gdy = put(dyValue);
    uint64_t losses = output(size_t(rows)), loss = output(1);
    launch("pe_cross_entropy_rows", {KA::pointer(losses), KA::pointer(gl), KA::pointer(glab),
                                     KA::integer(rows), KA::integer(C), keep, spread});
    sumAll(loss, losses, rows, rows);
    std::vector<float> want(1);
    ref::crossEntropy<float>(in(logits, {rows, C}), in(labels, {rows}), out(want, {}), smoothing);
    expectClose(get(loss, 1), want, 2e-5, "cross_entropy " + name);

    uint64_t dl = output(size_t(rows * C));
    launch("pe_cross_entropy_grad", {KA::pointer(dl), KA::pointer(gl), KA::pointer(glab),
                                     KA::pointer(gdy), KA::integer(rows), KA::integer(C), keep,
                                     spread});
    std::vector<float> wd(static_cast<size_t>(rows * C));
    ref::crossEntropyGrad<float>(in(logits, {rows, C}), in(labels, {rows}), in(dyValue, {}),
                                 out(wd, {rows, C}), smoothing);
    expectClose(get(dl, wd.size()), wd, 1e-6, "cross_entropy_grad " + name);

    // A label outside [0, C): NaN loss and a NaN gradient row, no bad read.
    std::vector<int32_t> bad = labels;
    bad[0] = int32_t(C);
    uint64_t gbad = putInts(bad), lb = output(size_t(rows)), total = output(1);
    launch("pe_cross_entropy_rows", {KA::pointer(lb), KA::pointer(gl), KA::pointer(gbad),
                                     KA::integer(rows), KA::integer(C), keep, spread});
    sumAll(total, lb, rows, rows);
    EXPECT_TRUE(std::isnan(get(total, 1)[0]));
    uint64_t dbad = output(size_t(rows * C));
    launch("pe_cross_entropy_grad", {KA::pointer(dbad), KA::pointer(gl), KA::pointer(gbad),
                                     KA::pointer(gdy), KA::integer(rows), KA::integer(C), keep,
                                     spread});
    std::vector<float> got = get(dbad, size_t(rows * C));
    for (int64_t c = 0; c < C; ++c)
      EXPECT_TRUE(std::isnan(got[size_t(c)])) << c;
    for (int64_t i = C; i < rows * C; ++i)
      ASSERT_NEAR(got[size_t(i)], wd[size_t(i)], 1e-6 * (1 + std::fabs(wd[size_t(i)])));
  }
}

//===----------------------------------------------------------------------===//
// Skew builders and the Cayley transform
//===----------------------------------------------------------------------===//

TEST_F(GpuOpKernels, SkewAndGradient) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 2}, {3, 5}, {1, 64}};
  for (auto [lead, dim] : shapes) {
    const int64_t count = dim * (dim - 1) / 2;
    std::vector<float> params = random(static_cast<size_t>(lead * count)),
                       dy = random(static_cast<size_t>(lead * dim * dim));
    uint64_t gp = put(params), gdy = put(dy);
    uint64_t s = output(size_t(lead * dim * dim)), dp = output(size_t(lead * count));
    launch("pe_skew", {KA::pointer(s), KA::pointer(gp), KA::integer(lead * dim * dim),
                       KA::integer(dim)});
    launch("pe_skew_grad", {KA::pointer(dp), KA::pointer(gdy), KA::integer(lead * count),
                            KA::integer(dim)});
    std::vector<float> ws(static_cast<size_t>(lead * dim * dim)), wdp(static_cast<size_t>(lead * count));
    ref::skew<float>(in(params, {lead, count}), dim, out(ws, {lead, dim, dim}));
    ref::skewGrad<float>(in(dy, {lead, dim, dim}), dim, out(wdp, {lead, count}));
    expectClose(get(s, ws.size()), ws, 0, "skew");
    expectClose(get(dp, wdp.size()), wdp, 0, "skew_grad");
  }
}

// A skew S (the case of the models) plus a small non-skew part: the factor
// kernel eliminates without pivoting, which holds for any S whose leading
// blocks of I + S are invertible (every skew S; CayleyKernels.cpp).
std::vector<float> cayleyInput(std::mt19937 &rng, int64_t d) {
  std::normal_distribution<float> dist(0.0f, 0.3f);
  std::vector<float> s(static_cast<size_t>(d * d));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = i + 1; j < d; ++j) {
      float v = dist(rng);
      s[size_t(i * d + j)] = v;
      s[size_t(j * d + i)] = -v;
    }
  for (float &v : s)
    v += 0.02f * dist(rng);
  return s;
}

TEST_F(GpuOpKernels, CayleyFactorsWeightAndGradients) {
  // 64: the matrix in shared memory; 70: in the work buffer; 130: the row
  // and column lines in the work buffer too.
  for (int64_t d : {2, 5, 64, 70, 130}) {
    std::string what = "d=" + std::to_string(d);
    std::vector<float> s = cayleyInput(rng, d);
    uint64_t gs = put(s), inverse = output(size_t(d * d)), weight = output(size_t(d * d));
    uint64_t work = output(size_t(2 * d * d + d));
    launchGrid("pe_cayley_factors", {KA::pointer(inverse), KA::pointer(weight), KA::pointer(work),
                                     KA::pointer(gs), KA::integer(d)},
               {1, 1, 1});
    std::vector<float> ww(static_cast<size_t>(d * d));
    ref::cayleyWeight<float>(in(s, {d, d}), out(ww, {d, d}));
    expectClose(get(weight, ww.size()), ww, 1e-4, "cayley_weight " + what);
    // M (I + S) = I
    std::vector<float> m = get(inverse, size_t(d * d));
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < d; ++l)
          sum += double(m[size_t(i * d + l)]) * ((l == j) + double(s[size_t(l * d + j)]));
        ASSERT_NEAR(sum, i == j ? 1.0 : 0.0, 1e-4) << what << " at " << i << "," << j;
      }

    // cayley_weight_grad: T = dw^T M^T, ds = -2 M^T T
    std::vector<float> dw = random(static_cast<size_t>(d * d));
    uint64_t gdw = put(dw), t = output(size_t(d * d)), ds = output(size_t(d * d));
    gemm->run(true, true, d, d, d, 1.0f, gdw, inverse, 0.0f, t, "cayley_weight_grad T");
    gemm->run(true, false, d, d, d, -2.0f, inverse, t, 0.0f, ds, "cayley_weight_grad ds");
    std::vector<float> wds(static_cast<size_t>(d * d));
    ref::cayleyWeightGrad<float>(in(s, {d, d}), in(dw, {d, d}), out(wds, {d, d}));
    expectClose(get(ds, wds.size()), wds, 1e-4, "cayley_weight_grad " + what);

    // The same gradient with M read off the forward's W (the lowering when
    // pe-autodiff passes W): M = (W^T + I) / 2 is the factor kernel's M.
    uint64_t fromW = output(size_t(d * d)), dsFromW = output(size_t(d * d));
    launch("pe_cayley_inverse_of_weight",
           {KA::pointer(fromW), KA::pointer(weight), KA::integer(d * d), KA::integer(d)});
    expectClose(get(fromW, m.size()), m, 1e-6, "M from W " + what);
    gemm->run(true, true, d, d, d, 1.0f, gdw, fromW, 0.0f, t, "cayley_weight_grad T from W");
    gemm->run(true, false, d, d, d, -2.0f, fromW, t, 0.0f, dsFromW, "cayley_weight_grad ds from W");
    expectClose(get(dsFromW, wds.size()), wds, 1e-4, "cayley_weight_grad from W " + what);

    // cayley and cayley_grad over x [B, T, d] as rows.
    const int64_t rows = 2 * 3;
    std::vector<float> x = random(static_cast<size_t>(rows * d)), dy = random(static_cast<size_t>(rows * d));
    uint64_t gx = put(x), gdy = put(dy), y = output(size_t(rows * d));
    gemm->run(false, false, rows, d, d, 1.0f, gx, weight, 0.0f, y, "cayley y");
    std::vector<float> wy(static_cast<size_t>(rows * d));
    ref::cayley<float>(in(x, {2, 3, d}), in(s, {d, d}), out(wy, {2, 3, d}));
    expectClose(get(y, wy.size()), wy, 1e-4, "cayley " + what);

    uint64_t dx = output(size_t(rows * d)), z = output(size_t(rows * d)),
             g = output(size_t(rows * d)), dsx = output(size_t(d * d));
    gemm->run(false, true, rows, d, d, 1.0f, gdy, weight, 0.0f, dx, "cayley_grad dx");
    gemm->run(false, true, rows, d, d, 1.0f, gx, inverse, 0.0f, z, "cayley_grad z");
    launch("pe_add", {KA::pointer(g), KA::pointer(gdy), KA::pointer(dx),
                      KA::integer((rows * d + 7) / 8), KA::integer(rows * d)});
    gemm->run(true, false, d, d, rows, -1.0f, g, z, 0.0f, dsx, "cayley_grad ds");
    std::vector<float> wdx(static_cast<size_t>(rows * d)), wdsx(static_cast<size_t>(d * d));
    ref::cayleyGrad<float>(in(x, {2, 3, d}), in(s, {d, d}), in(dy, {2, 3, d}),
                           out(wdx, {2, 3, d}), out(wdsx, {d, d}));
    expectClose(get(dx, wdx.size()), wdx, 1e-4, "cayley_grad dx " + what);
    expectClose(get(dsx, wdsx.size()), wdsx, 1e-4, "cayley_grad ds " + what);
  }
}

// A singular I + S (S = -diag(1, 0, 0), not skew) gives non-finite M and W:
// the reference throws, the kernel must not return a plausible matrix.
TEST_F(GpuOpKernels, CayleyFactorsSingularIsNonFinite) {
  const int64_t d = 3;
  std::vector<float> s(size_t(d * d), 0.0f);
  s[0] = -1.0f;
  uint64_t gs = put(s), inverse = output(size_t(d * d)), weight = output(size_t(d * d));
  uint64_t work = output(size_t(d * d + 4 * d));
  launchGrid("pe_cayley_factors", {KA::pointer(inverse), KA::pointer(weight), KA::pointer(work),
                                   KA::pointer(gs), KA::integer(d)},
             {1, 1, 1});
  for (const auto &[name, values] : {std::make_pair("M", get(inverse, size_t(d * d))),
                                     std::make_pair("W", get(weight, size_t(d * d)))}) {
    size_t nonFinite = 0;
    for (float v : values)
      nonFinite += !std::isfinite(v);
    EXPECT_GT(nonFinite, 0u) << name << " of a singular I + S is all finite";
  }
}

} // namespace
} // namespace stringrt::cuda
