// Reference attention kernels: forward identities (one visible key returns
// its value, causal first row, skip rows without a key are 0, uniform weights,
// rel = I is plain attention), attention_grad against central finite
// differences for every mask with and without rel, float vs double.
#include "stringrt/reference/LayerKernels.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>

namespace {

using namespace stringrt::ref;
using TD = Tensor<double>;

const int64_t B = 2, T = 4, D = 4, Heads = 2, Dh = 2;

TD runAttention(const TD &q, const TD &k, const TD &v, const std::optional<TD> &rel,
                int64_t heads, double scale, AttentionMask mask, int64_t skipBase) {
  TD y = TD::zeros(q.shape);
  OptionalInput<double> relRef;
  if (rel)
    relRef = rel->cref();
  attention(q.cref(), k.cref(), v.cref(), relRef, heads, scale, mask, skipBase, y.ref());
  return y;
}

TD identityRel(int64_t t, int64_t dh) {
  TD rel = TD::zeros({t, t, dh, dh});
  for (int64_t ij = 0; ij < t * t; ++ij)
    for (int64_t d = 0; d < dh; ++d)
      rel.values[(ij * dh + d) * dh + d] = 1;
  return rel;
}

TEST(AttentionKernel, HandComputedSingleHead) {
  // T = 2, D = 1, scale 1: s_0 = [0, 1], s_1 = [0, 2].
  TD q({1, 2, 1}, {1, 2}), k({1, 2, 1}, {0, 1}), v({1, 2, 1}, {10, 20});
  TD y = runAttention(q, k, v, std::nullopt, 1, 1.0, AttentionMask::None, 0);
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  EXPECT_NEAR(y.values[0], (10 + 20 * e) / (1 + e), 1e-13);
  EXPECT_NEAR(y.values[1], (10 + 20 * e2) / (1 + e2), 1e-13);
  TD yc = runAttention(q, k, v, std::nullopt, 1, 1.0, AttentionMask::Causal, 0);
  EXPECT_EQ(yc.values[0], 10.0); // only key 0 is visible to query 0
  EXPECT_NEAR(yc.values[1], (10 + 20 * e2) / (1 + e2), 1e-13);
}

// Skip: head h of query i sees only key i - (skip_base + h): y is exactly that
// value, and exactly 0 where the key would be negative; with or without rel.
TEST(AttentionKernel, SkipReturnsTheOneVisibleValueOrZero) {
  const int64_t skipBase = 1;
  TD q = fd::random({B, T, D}, 301), k = fd::random({B, T, D}, 302);
  TD v = fd::random({B, T, D}, 303), rel = fd::random({T, T, Dh, Dh}, 304);
  for (bool withRel : {false, true}) {
    TD y = runAttention(q, k, v, withRel ? std::optional<TD>(rel) : std::nullopt, Heads, 0.5,
                        AttentionMask::Skip, skipBase);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Heads; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t j = i - (skipBase + h);
          for (int64_t d = 0; d < Dh; ++d) {
            const double got = y.values[(b * T + i) * D + h * Dh + d];
            EXPECT_EQ(got, j >= 0 ? v.values[(b * T + j) * D + h * Dh + d] : 0.0)
                << "b " << b << " h " << h << " i " << i;
          }
        }
  }
}

TEST(AttentionKernel, CausalFirstRowIsFirstValue) {
  TD q = fd::random({B, T, D}, 311), k = fd::random({B, T, D}, 312);
  TD v = fd::random({B, T, D}, 313), rel = fd::random({T, T, Dh, Dh}, 314);
  for (bool withRel : {false, true}) {
    TD y = runAttention(q, k, v, withRel ? std::optional<TD>(rel) : std::nullopt, Heads, 0.5,
                        AttentionMask::Causal, 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < D; ++c)
        EXPECT_EQ(y.values[(b * T) * D + c], v.values[(b * T) * D + c]);
  }
}

// q = 0 gives uniform weights: y_i = mean over the visible v_j.
TEST(AttentionKernel, ZeroQueriesAverageTheVisibleValues) {
  TD q = TD::zeros({B, T, D}), k = fd::random({B, T, D}, 321), v = fd::random({B, T, D}, 322);
  TD yn = runAttention(q, k, v, std::nullopt, Heads, 0.5, AttentionMask::None, 0);
  TD yc = runAttention(q, k, v, std::nullopt, Heads, 0.5, AttentionMask::Causal, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t c = 0; c < D; ++c) {
        double all = 0, prefix = 0;
        for (int64_t j = 0; j < T; ++j) {
          all += v.values[(b * T + j) * D + c] / T;
          if (j <= i)
            prefix += v.values[(b * T + j) * D + c] / (i + 1);
        }
        EXPECT_NEAR(yn.values[(b * T + i) * D + c], all, 1e-14);
        EXPECT_NEAR(yc.values[(b * T + i) * D + c], prefix, 1e-14);
      }
}

TEST(AttentionKernel, IdentityRelIsPlainAttention) {
  TD q = fd::random({B, T, D}, 331), k = fd::random({B, T, D}, 332), v = fd::random({B, T, D}, 333);
  for (AttentionMask mask : {AttentionMask::None, AttentionMask::Causal}) {
    TD plain = runAttention(q, k, v, std::nullopt, Heads, 0.8, mask, 0);
    TD withRel = runAttention(q, k, v, identityRel(T, Dh), Heads, 0.8, mask, 0);
    EXPECT_TRUE(fd::allClose("rel = I", withRel, plain, 1e-14));
  }
}

// Huge scores: the max-subtracted softmax stays finite.
TEST(AttentionKernel, LargeScoresStayFinite) {
  TD q = fd::random({B, T, D}, 341, -1e3, 1e3), k = fd::random({B, T, D}, 342, -1e3, 1e3);
  TD v = fd::random({B, T, D}, 343), dy = fd::random({B, T, D}, 344);
  TD y = runAttention(q, k, v, std::nullopt, Heads, 1.0, AttentionMask::None, 0);
  TD dq = TD::zeros(q.shape), dk = TD::zeros(q.shape), dv = TD::zeros(q.shape);
  attentionGrad<double>(q.cref(), k.cref(), v.cref(), dy.cref(), std::nullopt, Heads, 1.0,
                        AttentionMask::None, 0, dq.ref(), dk.ref(), dv.ref(), std::nullopt);
  for (const TD *t : {&y, &dq, &dk, &dv})
    for (double e : t->values)
      EXPECT_TRUE(std::isfinite(e));
}

TEST(AttentionKernel, RejectsBadAttributesAndShapes) {
  TD q = TD::zeros({B, T, D}), y = TD::zeros({B, T, D});
  EXPECT_THROW(runAttention(q, q, q, std::nullopt, 3, 1.0, AttentionMask::None, 0),
               stringrt::Error);
  EXPECT_THROW(runAttention(q, q, q, std::nullopt, Heads, 1.0, AttentionMask::Skip, -1),
               stringrt::Error);
  EXPECT_THROW(runAttention(q, q, q, TD::zeros({T, T, D, D}), Heads, 1.0, AttentionMask::None, 0),
               stringrt::Error);
  TD k = TD::zeros({B, T + 1, D});
  EXPECT_THROW(runAttention(q, k, q, std::nullopt, Heads, 1.0, AttentionMask::None, 0),
               stringrt::Error);
  TD dq = TD::zeros(q.shape), dk = TD::zeros(q.shape), dv = TD::zeros(q.shape);
  TD drel = TD::zeros({T, T, Dh, Dh});
  EXPECT_THROW(attentionGrad<double>(q.cref(), q.cref(), q.cref(), q.cref(), std::nullopt, Heads,
                                     1.0, AttentionMask::None, 0, dq.ref(), dk.ref(), dv.ref(),
                                     drel.ref()),
               stringrt::Error);
}

//===--- attention_grad against finite differences -------------------------===//

struct GradCase {
  AttentionMask mask;
  int64_t skipBase;
  bool withRel;
};

void PrintTo(const GradCase &c, std::ostream *os) {
  const char *mask[] = {"none", "causal", "skip"};
  *os << "mask " << mask[static_cast<int>(c.mask)] << " skip_base " << c.skipBase
      << (c.withRel ? " with rel" : " without rel");
}

class AttentionKernelGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(AttentionKernelGrad, MatchesFiniteDifferences) {
  const GradCase c = GetParam();
  const double scale = 0.7;
  TD q = fd::random({B, T, D}, 351), k = fd::random({B, T, D}, 352);
  TD v = fd::random({B, T, D}, 353), w = fd::random({B, T, D}, 354);
  TD rel = fd::random({T, T, Dh, Dh}, 355);
  auto forward = [&] {
    return runAttention(q, k, v, c.withRel ? std::optional<TD>(rel) : std::nullopt, Heads,
                        scale, c.mask, c.skipBase);
  };
  TD dq = TD::zeros(q.shape), dk = TD::zeros(q.shape), dv = TD::zeros(q.shape);
  TD drel = TD::zeros(rel.shape);
  OptionalInput<double> relIn;
  OptionalOutput<double> drelOut;
  if (c.withRel) {
    relIn = rel.cref();
    drelOut = drel.ref();
  }
  attentionGrad(q.cref(), k.cref(), v.cref(), w.cref(), relIn, Heads, scale, c.mask, c.skipBase,
                dq.ref(), dk.ref(), dv.ref(), drelOut);
  EXPECT_TRUE(fd::checkVJP("attention dq", forward, q, w, dq));
  EXPECT_TRUE(fd::checkVJP("attention dk", forward, k, w, dk));
  EXPECT_TRUE(fd::checkVJP("attention dv", forward, v, w, dv));
  if (c.withRel) {
    EXPECT_TRUE(fd::checkVJP("attention drel", forward, rel, w, drel));
  }

  // Skip: a query without a visible key has an exactly zero dq (and adds
  // nothing elsewhere, which the checks above cover).
  if (c.mask == AttentionMask::Skip) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Heads; ++h)
        for (int64_t i = 0; i < std::min<int64_t>(T, c.skipBase + h); ++i)
          for (int64_t d = 0; d < Dh; ++d)
            EXPECT_EQ(dq.values[(b * T + i) * D + h * Dh + d], 0.0);
  }
}

std::vector<GradCase> gradCases() {
  std::vector<GradCase> cases;
  for (bool withRel : {false, true}) {
    cases.push_back({AttentionMask::None, 0, withRel});
    cases.push_back({AttentionMask::Causal, 0, withRel});
    cases.push_back({AttentionMask::Skip, 0, withRel});
    cases.push_back({AttentionMask::Skip, 1, withRel});
  }
  return cases;
}

std::string gradCaseName(const ::testing::TestParamInfo<GradCase> &info) {
  const char *mask[] = {"none", "causal", "skip"};
  std::string name = mask[static_cast<int>(info.param.mask)];
  if (info.param.mask == AttentionMask::Skip)
    name += "_base" + std::to_string(info.param.skipBase);
  return name + (info.param.withRel ? "_rel" : "_norel");
}

INSTANTIATE_TEST_SUITE_P(EveryMask, AttentionKernelGrad, ::testing::ValuesIn(gradCases()),
                         gradCaseName);

//===--- float vs double ---------------------------------------------------===//

TEST(AttentionKernelsFloat, ForwardAgreesWithDouble) {
  TD q = fd::random({B, T, D}, 361, -2, 2), k = fd::random({B, T, D}, 362, -2, 2);
  TD v = fd::random({B, T, D}, 363), rel = fd::random({T, T, Dh, Dh}, 364);
  for (const GradCase &c : gradCases())
    EXPECT_TRUE(fd::floatMatchesDouble("attention", [&](auto zero) {
      using F = decltype(zero);
      auto qT = fd::cast<F>(q), kT = fd::cast<F>(k), vT = fd::cast<F>(v), rT = fd::cast<F>(rel);
      auto y = Tensor<F>::zeros(q.shape);
      OptionalInput<F> relIn;
      if (c.withRel)
        relIn = rT.cref();
      attention(qT.cref(), kT.cref(), vT.cref(), relIn, Heads, 0.7, c.mask, c.skipBase, y.ref());
      return y;
    }));
}

} // namespace
