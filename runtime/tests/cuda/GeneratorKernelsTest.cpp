// The index-table and generator kernels of compiler/lib/CudaGen
// (sparse_skew in CayleyKernels.cpp, the pair gathers in GatherKernels.cpp,
// GeneratorKernels.cpp) launched on the GPU (or the
// host emulator) on random data as the compiler's op lowerings compose
// them, the index tables built as the lowerings build the package's
// constant arrays, and compared with the runtime's reference kernels. The
// kernels come from the package of tests/cuda/kernels.pe compiled with
// --gpu-all-kernels (STRINGRT_CUDA_TEST_PACKAGE); every test skips without
// it or without a device.
//
// Tolerances, |got - want| <= tol * (1 + |want|) (elementwise) or
// tol * (1 + max |want|) (scaled, for sums that cancel):
//   0      sparse_skew, offset_table, pair_gather (copies)
//   1e-7   sparse_skew_grad (one f32 subtraction vs a double one)
//   2e-6   pair_gather_grad (f32 sums of up to 49 terms vs double)
//   1e-6   generator_exp, commutator_norm(_grad): f64 inside, one rounding
//          to f32 (scaled: the squarings amplify the f64 rounding a little)
//   1e-5   generator_exp_grad, scaled: dA(p) in f64 rounded to f32, then an
//          f32 column sum over the matrices
#include "GpuKernelSession.h"

#include "stringrt/ops/GatherOps.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <random>
#include <string>

namespace stringrt::cuda {
namespace {

using ref::TensorRef;
using KA = KernelArg;
using Shape = std::vector<int64_t>;

// As the lowerings (GeneratorKernels.cpp): shared memory up to these dims.
constexpr int64_t kExpSharedDim = 24, kGradSharedDim = 16, kMaxGlobalBlocks = 64;

class GpuGeneratorKernels : public ::testing::Test, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(64) << 20); !why.empty())
      GTEST_SKIP() << why;
  }
};

template <typename T> TensorRef<const T> in(const std::vector<T> &v, Shape shape) {
  return {v.data(), std::move(shape)};
}
TensorRef<float> out(std::vector<float> &v, Shape shape) { return {v.data(), std::move(shape)}; }

// The (i, j) pair of upper-triangle index k (pe.skew's order).
std::pair<int64_t, int64_t> upperPair(int64_t dim, int64_t k) {
  for (int64_t i = 0;; ++i) {
    if (k < dim - 1 - i)
      return {i, i + 1 + k};
    k -= dim - 1 - i;
  }
}

//===----------------------------------------------------------------------===//
// Index tables
//===----------------------------------------------------------------------===//

TEST_F(GpuGeneratorKernels, SparseSkewAndItsGradient) {
  const int64_t dim = 7;
  const std::vector<int64_t> support = {0, 3, 5, 11, 20}; // 20 = (5, 6), the last pair
  const int64_t count = int64_t(support.size());
  // The lowering's constants: entry (dim^2) and the flat index pairs (2K).
  std::vector<int32_t> entry(size_t(dim * dim), 0), pairs;
  for (int64_t m = 0; m < count; ++m) {
    auto [i, j] = upperPair(dim, support[size_t(m)]);
    entry[size_t(i * dim + j)] = int32_t(m + 1);
    entry[size_t(j * dim + i)] = -int32_t(m + 1);
    pairs.push_back(int32_t(i * dim + j));
    pairs.push_back(int32_t(j * dim + i));
  }
  std::vector<float> params = random(size_t(count)), dy = random(size_t(dim * dim));
  uint64_t s = output(size_t(dim * dim));
  launch("pe_sparse_skew", {KA::pointer(s), KA::pointer(put(params)), KA::pointer(putInts(entry)),
                            KA::integer(dim * dim), KA::integer(count)});
  std::vector<float> want(static_cast<size_t>(dim * dim));
  ref::sparseSkew<float>(in(params, {count}), dim, support, out(want, {dim, dim}));
  expectClose(get(s, want.size()), want, 0, "sparse_skew");

  uint64_t dparams = output(size_t(count));
  launch("pe_sparse_skew_grad", {KA::pointer(dparams), KA::pointer(put(dy)),
                                 KA::pointer(putInts(pairs)), KA::integer(count),
                                 KA::integer(dim * dim)});
  std::vector<float> wantGrad(static_cast<size_t>(count));
  ref::sparseSkewGrad<float>(in(dy, {dim, dim}), dim, support, out(wantGrad, {count}));
  expectClose(get(dparams, wantGrad.size()), wantGrad, 1e-7, "sparse_skew_grad");

  // A corrupt table (an entry past the params, a pair past dy) gives NaN,
  // not a read outside the buffers.
  entry[1] = int32_t(count + 1);
  pairs[3] = int32_t(dim * dim);
  uint64_t bad = output(size_t(dim * dim)), badGrad = output(size_t(count));
  launch("pe_sparse_skew", {KA::pointer(bad), KA::pointer(put(params)), KA::pointer(putInts(entry)),
                            KA::integer(dim * dim), KA::integer(count)});
  launch("pe_sparse_skew_grad", {KA::pointer(badGrad), KA::pointer(put(dy)),
                                 KA::pointer(putInts(pairs)), KA::integer(count),
                                 KA::integer(dim * dim)});
  std::vector<float> got = get(bad, size_t(dim * dim)), gotGrad = get(badGrad, size_t(count));
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], want[2]);
  EXPECT_TRUE(std::isnan(gotGrad[1]));
  EXPECT_EQ(gotGrad[0], wantGrad[0]);
}

TEST_F(GpuGeneratorKernels, OffsetTableIsACopyOfItsConstant) {
  const std::vector<int64_t> offsets = {0, 0, 1, 0, -1, 0, 6, -6, 16777216, -16777216};
  std::vector<float> constant(offsets.begin(), offsets.end());
  const int64_t n = int64_t(offsets.size());
  uint64_t table = output(size_t(n));
  launch("pe_broadcast_to",
         {KA::pointer(table), KA::pointer(put(constant)), KA::integer(n), KA::integer(n)});
  std::vector<float> want(static_cast<size_t>(n));
  ref::offsetTable<float>(offsets, out(want, {n / 2, 2}));
  expectClose(get(table, size_t(n)), want, 0, "offset_table");
}

TEST_F(GpuGeneratorKernels, PairGatherAndItsScatterAdd) {
  const int64_t tokens = 7, rows = 5, row = 3 * 4; // table [5, 3, 4] -> [7, 7, 3, 4]
  std::uniform_int_distribution<int64_t> pick(0, rows - 2); // row 4 is never read
  std::vector<int64_t> index(size_t(tokens * tokens));
  for (int64_t &u : index)
    u = pick(rng);
  index[0] = 0;
  index.back() = rows - 2;
  // The lowering's constants: index as i32, and its inverse in compressed rows.
  std::vector<int32_t> index32(index.begin(), index.end());
  std::vector<int32_t> starts(size_t(rows + 1), 0), pairs(index.size());
  for (int64_t u : index)
    ++starts[size_t(u + 1)];
  for (size_t u = 1; u < starts.size(); ++u)
    starts[u] += starts[u - 1];
  std::vector<int32_t> fill(starts.begin(), starts.end() - 1);
  for (size_t p = 0; p < index.size(); ++p)
    pairs[size_t(fill[size_t(index[p])]++)] = int32_t(p);

  std::vector<float> table = random(size_t(rows * row));
  const int64_t n = tokens * tokens * row;
  uint64_t y = output(size_t(n));
  launch("pe_pair_gather", {KA::pointer(y), KA::pointer(put(table)), KA::pointer(putInts(index32)),
                            KA::integer(n), KA::integer(row), KA::integer(rows)});
  std::vector<float> want(static_cast<size_t>(n));
  ref::pairGather<float>(in(table, {rows, 3, 4}), index, out(want, {tokens, tokens, 3, 4}));
  expectClose(get(y, size_t(n)), want, 0, "pair_gather");

  std::vector<float> dy = random(size_t(n));
  uint64_t dtable = output(size_t(rows * row));
  launch("pe_pair_gather_grad",
         {KA::pointer(dtable), KA::pointer(put(dy)), KA::pointer(putInts(starts)),
          KA::pointer(putInts(pairs)), KA::integer(rows * row), KA::integer(row),
          KA::integer(tokens * tokens)});
  std::vector<float> wantGrad(static_cast<size_t>(rows * row));
  ref::pairGatherGrad<float>(in(dy, {tokens, tokens, 3, 4}), index, out(wantGrad, {rows, 3, 4}));
  std::vector<float> gotGrad = get(dtable, wantGrad.size());
  expectClose(gotGrad, wantGrad, 2e-6, "pair_gather_grad");
  for (int64_t s = 0; s < row; ++s)
    EXPECT_EQ(gotGrad[size_t((rows - 1) * row + s)], 0.0f) << "a row no pair reads";

  // An index entry out of range gives a NaN row, not a read past the table.
  index32[5] = int32_t(rows);
  uint64_t bad = output(size_t(n));
  launch("pe_pair_gather", {KA::pointer(bad), KA::pointer(put(table)), KA::pointer(putInts(index32)),
                            KA::integer(n), KA::integer(row), KA::integer(rows)});
  std::vector<float> got = get(bad, size_t(n));
  EXPECT_TRUE(std::isnan(got[size_t(5 * row)]));
  EXPECT_EQ(got[size_t(4 * row)], want[size_t(4 * row)]);
}

//===----------------------------------------------------------------------===//
// Generator exponentials
//===----------------------------------------------------------------------===//

struct ExpCase {
  int64_t matrices, count, dim;
  bool skew;     // skew-symmetric generators (rotations) or general ones
  float scale;   // generator entries' spread
  int64_t grid;  // blocks (0: as the lowering, min(P, 65535) or 64 from scratch)
};

// Relative positions (small integers, as pe.offset_table's) and generators.
struct ExpData {
  std::vector<float> r, gens;
};
ExpData expData(const ExpCase &c, std::mt19937 &rng) {
  std::uniform_int_distribution<int> offset(-6, 6);
  std::normal_distribution<float> normal(0.0f, c.scale);
  ExpData x;
  for (int64_t i = 0; i < c.matrices * c.count; ++i)
    x.r.push_back(float(offset(rng)));
  x.gens.assign(size_t(c.count * c.dim * c.dim), 0.0f);
  for (int64_t k = 0; k < c.count; ++k)
    for (int64_t i = 0; i < c.dim; ++i)
      for (int64_t j = 0; j < c.dim; ++j) {
        float &e = x.gens[size_t((k * c.dim + i) * c.dim + j)];
        if (!c.skew)
          e = normal(rng);
        else if (i < j)
          e = normal(rng);
        else if (i > j)
          e = -x.gens[size_t((k * c.dim + j) * c.dim + i)];
      }
  return x;
}

// Blocks and work-scratch bytes of an exponential launch, as the lowering.
std::pair<int64_t, size_t> expLaunchShape(const ExpCase &c, bool pairs) {
  bool shared = c.dim <= (pairs ? kGradSharedDim : kExpSharedDim);
  int64_t blocks = c.grid ? c.grid : std::min<int64_t>(c.matrices, shared ? 65535 : kMaxGlobalBlocks);
  size_t doubles = size_t(7 * (pairs ? 2 : 1) * c.dim * c.dim + c.dim);
  return {blocks, shared ? 8 : size_t(blocks) * doubles * 8};
}

TEST_F(GpuGeneratorKernels, GeneratorExpMatchesTheReference) {
  const std::vector<ExpCase> cases = {
      {13, 2, 16, true, 0.3f, 0},  // vit_generators' shape, squarings (|A|_1 up to ~30)
      {13, 2, 16, true, 0.3f, 3},  // fewer blocks than matrices: each loops
      {5, 3, 3, false, 0.5f, 0},   // general matrices (not rotations)
      {2, 1, 2, true, 0.0f, 0},    // zero generators: exp(0) = I exactly
      {3, 1, 26, true, 0.2f, 0},   // d > 24: work matrices in global scratch
  };
  for (const ExpCase &c : cases) {
    SCOPED_TRACE("P " + std::to_string(c.matrices) + ", K " + std::to_string(c.count) + ", d " +
                 std::to_string(c.dim) + ", grid " + std::to_string(c.grid));
    ExpData x = expData(c, rng);
    const int64_t n = c.matrices * c.dim * c.dim;
    auto [blocks, workBytes] = expLaunchShape(c, false);
    uint64_t rotations = output(size_t(n));
    launchGrid("pe_generator_exp",
               {KA::pointer(rotations), KA::pointer(scratch(workBytes)), KA::pointer(put(x.r)),
                KA::pointer(put(x.gens)), KA::integer(c.matrices), KA::integer(c.count),
                KA::integer(c.dim)},
               {blocks, 1, 1});
    std::vector<float> want(static_cast<size_t>(n));
    ref::generatorExp<float>(in(x.r, {c.matrices, c.count}),
                             in(x.gens, {c.count, c.dim, c.dim}),
                             out(want, {c.matrices, c.dim, c.dim}));
    expectClose(get(rotations, size_t(n)), want, 1e-6, "generator_exp", /*scaled=*/true);
  }
}

TEST_F(GpuGeneratorKernels, GeneratorExpGradientMatchesTheReference) {
  const std::vector<ExpCase> cases = {
      {6, 2, 16, true, 0.3f, 0},  // vit_generators' shape
      {6, 2, 16, true, 0.3f, 4},  // fewer blocks than matrices
      {5, 3, 3, false, 0.5f, 0},  // general matrices
      {3, 2, 18, true, 0.2f, 0},  // d > 16: pairs of work matrices in global scratch
  };
  for (const ExpCase &c : cases) {
    SCOPED_TRACE("P " + std::to_string(c.matrices) + ", K " + std::to_string(c.count) + ", d " +
                 std::to_string(c.dim) + ", grid " + std::to_string(c.grid));
    ExpData x = expData(c, rng);
    const int64_t dd = c.dim * c.dim, n = c.matrices * dd;
    std::vector<float> dy = random(size_t(n), -1, 1);
    auto [blocks, workBytes] = expLaunchShape(c, true);
    uint64_t da = output(size_t(n)), r = put(x.r);
    launchGrid("pe_generator_exp_grad_blocks",
               {KA::pointer(da), KA::pointer(scratch(workBytes)), KA::pointer(r),
                KA::pointer(put(x.gens)), KA::pointer(put(dy)), KA::integer(c.matrices),
                KA::integer(c.count), KA::integer(c.dim)},
               {blocks, 1, 1});
    // dL = the column sum over the matrices (OpKernelUtil.h, appendColumnSum).
    const int64_t cols = c.count * dd;
    const int64_t chunks = std::max<int64_t>(
        1, std::min(std::clamp<int64_t>(16384 / cols, 1, 256), c.matrices));
    uint64_t partials = output(size_t(chunks * cols)), dgens = output(size_t(cols));
    uint64_t tickets = zeros(size_t((cols + 31) / 32));
    launchGrid("pe_generator_exp_grad_partials",
               {KA::pointer(partials), KA::pointer(r), KA::pointer(da), KA::integer(c.matrices),
                KA::integer(cols), KA::integer(chunks), KA::integer(c.count), KA::integer(dd),
                KA::pointer(tickets), KA::pointer(dgens), KA::pointer(dgens), KA::integer(cols)},
               {(cols + 31) / 32, chunks, 1});
    std::vector<float> want(static_cast<size_t>(cols));
    ref::generatorExpGrad<float>(in(x.r, {c.matrices, c.count}),
                                 in(x.gens, {c.count, c.dim, c.dim}),
                                 in(dy, {c.matrices, c.dim, c.dim}),
                                 out(want, {c.count, c.dim, c.dim}));
    expectClose(get(dgens, size_t(cols)), want, 1e-5, "generator_exp_grad", /*scaled=*/true);
  }
}

//===----------------------------------------------------------------------===//
// Commutators
//===----------------------------------------------------------------------===//

TEST_F(GpuGeneratorKernels, CommutatorNormAndItsGradient) {
  struct Case {
    int64_t count, dim;
    bool equal; // all generators equal: every commutator is 0
  };
  for (Case c : {Case{2, 16, false}, Case{4, 5, false}, Case{3, 4, true}}) {
    SCOPED_TRACE("K " + std::to_string(c.count) + ", d " + std::to_string(c.dim));
    const int64_t dd = c.dim * c.dim, pairs = c.count * (c.count - 1) / 2;
    std::vector<float> gens = random(size_t(c.count * dd), -1, 1);
    if (c.equal)
      for (int64_t k = 1; k < c.count; ++k)
        std::copy(gens.begin(), gens.begin() + dd, gens.begin() + k * dd);
    const std::vector<float> dy = {0.7f};
    uint64_t g = put(gens), cs = scratch(size_t(pairs * dd * 8)), norms = scratch(size_t(pairs * 8));
    launch("pe_commutators", {KA::pointer(cs), KA::pointer(g), KA::integer(pairs * dd),
                              KA::integer(c.count), KA::integer(c.dim)});
    launch("pe_commutator_norms",
           {KA::pointer(norms), KA::pointer(cs), KA::integer(pairs), KA::integer(dd)});
    uint64_t y = output(1);
    launchGrid("pe_commutator_norm_max", {KA::pointer(y), KA::pointer(norms), KA::integer(pairs)},
               {1, 1, 1});
    uint64_t dgens = output(size_t(c.count * dd));
    launch("pe_commutator_norm_grad",
           {KA::pointer(dgens), KA::pointer(g), KA::pointer(cs), KA::pointer(norms),
            KA::pointer(put(dy)), KA::integer(c.count * dd), KA::integer(c.count),
            KA::integer(c.dim), KA::integer(pairs)});
    std::vector<float> want(1), wantGrad(static_cast<size_t>(c.count * dd));
    ref::commutatorNorm<float>(in(gens, {c.count, c.dim, c.dim}), out(want, {}));
    ref::commutatorNormGrad<float>(in(gens, {c.count, c.dim, c.dim}), in(dy, {}),
                                   out(wantGrad, {c.count, c.dim, c.dim}));
    expectClose(get(y, 1), want, 1e-6, "commutator_norm");
    expectClose(get(dgens, wantGrad.size()), wantGrad, 1e-6, "commutator_norm_grad",
                /*scaled=*/true);
    if (c.equal)
      EXPECT_EQ(want[0], 0.0f);
  }
}

} // namespace
} // namespace stringrt::cuda
