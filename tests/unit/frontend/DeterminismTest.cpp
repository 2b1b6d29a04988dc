//===- DeterminismTest.cpp - seeds and the sparse_skew support ------------===//

#include "stringc/Frontend/Determinism.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace stringc;

namespace {

TEST(Determinism, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(Determinism, DerivedSeedIsNonNegativeAndNameSpecific) {
  EXPECT_EQ(derivedSeed("encoder.0.wq"), static_cast<int64_t>(fnv1a64("encoder.0.wq") & 0x7FFFFFFFFFFFFFFFull));
  EXPECT_GE(derivedSeed("a"), 0);
  EXPECT_NE(derivedSeed("encoder.0.wq"), derivedSeed("encoder.1.wq"));
}

TEST(Determinism, SplitMix64KnownValues) {
  // Reference outputs of splitmix64 seeded with 0 (Vigna's splitmix64.c).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.next(), 0x06c45d188009454full);
}

TEST(Determinism, PairCounts) {
  EXPECT_EQ(pairsOf(64), 2016);
  EXPECT_EQ(pairsOf(2), 1);
  EXPECT_EQ(sparsePairs(64, 0.1), 202);  // round(201.6)
  EXPECT_EQ(sparsePairs(3, 0.5), 2);     // round(1.5) rounds half away from zero
  EXPECT_EQ(sparsePairs(64, 1e-9), 1);   // at least one
  EXPECT_EQ(sparsePairs(16, 1.0), 120);
}

TEST(Determinism, SparseSupportIsSortedUniqueInRangeAndReproducible) {
  for (uint64_t seed : {0ull, 1ull, 42ull, 0x7FFFFFFFFFFFFFFFull}) {
    std::vector<int64_t> support = sparseSkewSupport(64, 202, seed);
    ASSERT_EQ(support.size(), 202u);
    EXPECT_TRUE(std::is_sorted(support.begin(), support.end()));
    EXPECT_EQ(std::set<int64_t>(support.begin(), support.end()).size(), 202u);
    EXPECT_GE(support.front(), 0);
    EXPECT_LT(support.back(), 2016);
    EXPECT_EQ(support, sparseSkewSupport(64, 202, seed));
  }
  EXPECT_NE(sparseSkewSupport(64, 202, 1), sparseSkewSupport(64, 202, 2));
}

TEST(Determinism, FullSupportIsEveryPair) {
  std::vector<int64_t> support = sparseSkewSupport(8, 28, 7);
  for (int64_t i = 0; i < 28; ++i)
    EXPECT_EQ(support[i], i);
}

TEST(Determinism, SparseSupportFollowsTheDocumentedShuffle) {
  // The algorithm, written out independently: a dense partial Fisher-Yates.
  // The second case touches most positions, so the sparse table behind
  // sparseSkewSupport probes and overwrites a lot.
  for (auto [dim, count] : {std::pair<int64_t, int64_t>{10, 9}, {300, 40000}}) {
    const uint64_t total = static_cast<uint64_t>(pairsOf(dim)), seed = 1234;
    std::vector<int64_t> a(total);
    for (uint64_t i = 0; i < total; ++i)
      a[i] = static_cast<int64_t>(i);
    SplitMix64 rng(seed);
    for (uint64_t i = 0; i < static_cast<uint64_t>(count); ++i)
      std::swap(a[i], a[i + rng.next() % (total - i)]);
    std::vector<int64_t> expected(a.begin(), a.begin() + count);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(sparseSkewSupport(dim, count, seed), expected) << "dim " << dim << ", count " << count;
  }
}

} // namespace
