// The gather kernels (stringrt/ops/GatherOps.h) against direct computations: the
// skip-n shift against the reference attention with mask skip, the pair
// gather against generator_exp of the relative positions; their backward
// kernels against central finite differences (double, step 1e-6, relative
// tolerance 1e-6) and, for the shift, against attention_grad's dv. Also the
// convention pe-factor-generators relies on: with one skew generator,
// attention(q, k, v, rel = exp((p_j - p_i) L)) equals attention of
// apply_rotation(q, exp(p_t L)) and apply_rotation(k, exp(p_t L)).
#include "FiniteDifference.h"
#include "PositionTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/ops/GatherOps.h"
#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace stringrt::ref {
namespace {

using namespace postest;
using fd::checkVJP;
using fd::random;

D skipGatherOf(const D &v, int64_t heads, int64_t skipBase) {
  D y = D::zeros(v.shape);
  skipGather<double>(v.cref(), heads, skipBase, y.ref());
  return y;
}

D skipGatherGradOf(const D &dy, int64_t heads, int64_t skipBase) {
  D dv = D::zeros(dy.shape);
  skipGatherGrad<double>(dy.cref(), heads, skipBase, dv.ref());
  return dv;
}

D attentionOf(const D &q, const D &k, const D &v, const D *rel, int64_t heads,
              AttentionMask mask, int64_t skipBase) {
  D y = D::zeros(q.shape);
  OptionalInput<double> r;
  if (rel)
    r = rel->cref();
  attention<double>(q.cref(), k.cref(), v.cref(), r, heads, 0.37, mask, skipBase, y.ref());
  return y;
}

D pairGatherOf(const D &table, const std::vector<int64_t> &index, int64_t tokens) {
  std::vector<int64_t> shape = {tokens, tokens};
  shape.insert(shape.end(), table.shape.begin() + 1, table.shape.end());
  D y = D::zeros(shape);
  pairGather<double>(table.cref(), index, y.ref());
  return y;
}

D pairGatherGradOf(const D &dy, const std::vector<int64_t> &index, int64_t rows) {
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), dy.shape.begin() + 2, dy.shape.end());
  D dt = D::zeros(shape);
  pairGatherGrad<double>(dy.cref(), index, dt.ref());
  return dt;
}

// ------------------------------------------------------------ skip_gather --

TEST(GatherKernels, SkipGatherIsSkipAttention) {
  // T = 6, 3 heads of 2 columns; skip bases 0, 1 and 4 (head 2 of base 4
  // has no key for any query: i - 6 < 0).
  const D q = random({2, 6, 6}, 1), k = random({2, 6, 6}, 2), v = random({2, 6, 6}, 3);
  for (int64_t base : {0, 1, 4}) {
    const D y = skipGatherOf(v, 3, base);
    EXPECT_EQ(maxAbsDiff(y, attentionOf(q, k, v, nullptr, 3, AttentionMask::Skip, base)), 0.0)
        << "skip_base " << base;
    // Directly: head s of token i is head s of token i - (base + s).
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t c = 0; c < 6; ++c) {
          const int64_t src = i - (base + c / 2);
          const double expected = src >= 0 ? v.values[(b * 6 + src) * 6 + c] : 0.0;
          ASSERT_EQ(y.values[(b * 6 + i) * 6 + c], expected) << b << " " << i << " " << c;
        }
  }
}

TEST(GatherKernels, SkipGatherGradIsVJP) {
  D v = random({2, 5, 8}, 4);
  const D dy = random({2, 5, 8}, 5);
  for (int64_t base : {0, 2}) {
    auto forward = [&] { return skipGatherOf(v, 2, base); };
    const D dv = skipGatherGradOf(dy, 2, base);
    EXPECT_TRUE(checkVJP("skip_gather dv", forward, v, dy, dv));
    // And attention_grad's dv for the same mask.
    const D q = random(v.shape, 6), k = random(v.shape, 7);
    D dq = D::zeros(v.shape), dk = D::zeros(v.shape), dvAtt = D::zeros(v.shape);
    attentionGrad<double>(q.cref(), k.cref(), v.cref(), dy.cref(), std::nullopt, 2, 0.5,
                          AttentionMask::Skip, base, dq.ref(), dk.ref(), dvAtt.ref(),
                          std::nullopt);
    EXPECT_LE(maxAbsDiff(dv, dvAtt), 1e-15);
    EXPECT_EQ(maxAbs(dq), 0.0); // one key per row: the scores get no gradient
    EXPECT_EQ(maxAbs(dk), 0.0);
  }
}

TEST(GatherKernels, SkipGatherChecksItsArguments) {
  D v = random({1, 4, 6}, 8), y = D::zeros({1, 4, 6});
  EXPECT_THROW(skipGather<double>(v.cref(), 4, 1, y.ref()), Error); // 4 does not divide 6
  EXPECT_THROW(skipGather<double>(v.cref(), 3, -1, y.ref()), Error);
  D wrong = D::zeros({1, 4, 4});
  EXPECT_THROW(skipGather<double>(v.cref(), 3, 1, wrong.ref()), Error);
}

// ------------------------------------------- offset_table and pair_gather --

// The distinct rows of relative_positions(pos) in first-appearance order and
// each pair's row (what pe-distinct-offsets computes at compile time).
std::pair<std::vector<int64_t>, std::vector<int64_t>> distinctOffsets(const D &pos) {
  const int64_t tokens = pos.shape[0], axes = pos.shape[1];
  std::map<std::vector<int64_t>, int64_t> seen;
  std::vector<int64_t> offsets, index;
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < tokens; ++j) {
      std::vector<int64_t> r;
      for (int64_t a = 0; a < axes; ++a)
        r.push_back(static_cast<int64_t>(pos.values[j * axes + a] - pos.values[i * axes + a]));
      auto [it, added] = seen.emplace(r, static_cast<int64_t>(seen.size()));
      if (added)
        offsets.insert(offsets.end(), r.begin(), r.end());
      index.push_back(it->second);
    }
  return {offsets, index};
}

TEST(GatherKernels, DistinctOffsetsReproduceGeneratorExpOfRelativePositions) {
  // A 3x4 grid with a CLS token: 13 tokens, 169 pairs, (2*3-1)(2*4-1) = 35
  // distinct offsets (CLS sits at (0, 0), so its offsets are grid offsets).
  const D pos = gridPos(3, 4, 1);
  auto [offsets, index] = distinctOffsets(pos);
  ASSERT_EQ(offsets.size(), 35u * 2);
  D table = D::zeros({35, 2});
  offsetTable<double>(offsets, table.ref());
  const D gens = skewOf(random({2, 6}, 9, -0.3, 0.3), 4);
  const D expected = generatorExpOf(relPos(pos), gens);
  const D gathered = pairGatherOf(generatorExpOf(table, gens), index, 13);
  EXPECT_EQ(maxAbsDiff(gathered, expected), 0.0);
}

TEST(GatherKernels, PairGatherGradIsVJP) {
  D table = random({3, 2, 2}, 10);
  const std::vector<int64_t> index = {0, 2, 2, 1, 0, 0, 2, 2, 0};
  const D dy = random({3, 3, 2, 2}, 11);
  auto forward = [&] { return pairGatherOf(table, index, 3); };
  EXPECT_TRUE(checkVJP("pair_gather dtable", forward, table, dy, pairGatherGradOf(dy, index, 3)));
  // A row no pair reads gets a zero gradient.
  const D dt = pairGatherGradOf(dy, {0, 0, 0, 0, 0, 0, 0, 0, 1}, 3);
  for (int64_t e = 8; e < 12; ++e)
    EXPECT_EQ(dt.values[e], 0.0);
}

TEST(GatherKernels, PairGatherChecksItsIndex) {
  D table = random({2, 3}, 12), y = D::zeros({2, 2, 3});
  EXPECT_THROW(pairGather<double>(table.cref(), {0, 1, 2, 0}, y.ref()), Error); // 2 >= U
  EXPECT_THROW(pairGather<double>(table.cref(), {0, 1, 1}, y.ref()), Error);    // not T*T
  D wrong = D::zeros({2, 2, 4});
  EXPECT_THROW(pairGather<double>(table.cref(), {0, 1, 1, 0}, wrong.ref()), Error);
  D bad = D::zeros({2, 2});
  EXPECT_THROW(offsetTable<double>({1, 2, 3}, bad.ref()), Error);
}

TEST(GatherKernels, FloatMatchesDouble) {
  const D v = random({2, 5, 4}, 13);
  const std::vector<int64_t> index = {3, 1, 0, 0, 2, 1, 3, 3, 0};
  EXPECT_TRUE(fd::floatMatchesDouble("skip_gather", [&](auto zero) {
    using T = decltype(zero);
    auto vt = fd::cast<T>(v);
    auto y = Tensor<T>::zeros(v.shape);
    skipGather<T>(vt.cref(), 2, 1, y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("pair_gather_grad", [&](auto zero) {
    using T = decltype(zero);
    auto dy = fd::cast<T>(random({3, 3, 3}, 15));
    auto dt = Tensor<T>::zeros({4, 3});
    pairGatherGrad<T>(dy.cref(), index, dt.ref());
    return dt;
  }));
}

// ---------------------------------------------- the factorisation identity --

// With one generator (K = 1), exp((p_j - p_i) L) = exp(p_i L)^T exp(p_j L),
// so relative attention equals plain attention on rotated q and k
// (rel[i, j] acts on k_j; apply_rotation computes R[t] x).
TEST(GatherKernels, OneGeneratorRelativeAttentionFactorsIntoRotations) {
  const int64_t heads = 2, dh = 4, tokens = 5;
  const D pos = seqPos(4, 1); // CLS + 4 tokens
  const D gens = skewOf(random({1, 6}, 16, -0.5, 0.5), dh);
  const D rel = generatorExpOf(relPos(pos), gens);
  const D absolute = generatorExpOf(pos, gens);
  const D q = random({2, tokens, heads * dh}, 17), k = random(q.shape, 18),
          v = random(q.shape, 19);
  const D relative = attentionOf(q, k, v, &rel, heads, AttentionMask::None, 0);
  const D factored = attentionOf(applyRotationOf(q, absolute, heads),
                                 applyRotationOf(k, absolute, heads), v, nullptr, heads,
                                 AttentionMask::None, 0);
  EXPECT_LE(maxAbsDiff(relative, factored), 1e-12);
  // Two generators that do not commute: the factorisation is not exact.
  const D gens2 = skewOf(random({2, 6}, 20, -0.5, 0.5), dh);
  const D pos2 = gridPos(2, 2, 1);
  const D rel2 = generatorExpOf(relPos(pos2), gens2);
  const D abs2 = generatorExpOf(pos2, gens2);
  EXPECT_GT(maxAbsDiff(attentionOf(q, k, v, &rel2, heads, AttentionMask::None, 0),
                       attentionOf(applyRotationOf(q, abs2, heads),
                                   applyRotationOf(k, abs2, heads), v, nullptr, heads,
                                   AttentionMask::None, 0)),
            1e-6);
}

} // namespace
} // namespace stringrt::ref
