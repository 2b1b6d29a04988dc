//===- Determinism.h - seeds and sampled sparsity patterns ------*- C++ -*-===//
//
// The frontend fixes everything random at compile time so that a model file
// always means the same computation. These are the exact algorithms (also
// stated in docs/language.md) so other tools can reproduce them.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_DETERMINISM_H
#define STRINGC_FRONTEND_DETERMINISM_H

#include <cstdint>
#include <string_view>
#include <vector>

namespace stringc {

/// 64-bit FNV-1a of the bytes of `text`.
uint64_t fnv1a64(std::string_view text);

/// The seed of a random initializer written without `seed`:
/// fnv1a64(full parameter name) with the top bit cleared (so it is a
/// non-negative int64).
int64_t derivedSeed(std::string_view fullName);

/// splitmix64 (Steele, Lea, Flood 2014): state += 0x9E3779B97F4A7C15, then
/// the usual xor-shift-multiply finalizer of the new state.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();

private:
  uint64_t state_;
};

/// n(n-1)/2: the number of strictly upper-triangular entries of an n x n matrix.
int64_t pairsOf(int64_t n);

/// max(1, round(f * pairs(n))), rounding halves away from zero: the number of
/// parameters of sparse_skew(dim = n, fraction = f).
int64_t sparsePairs(int64_t n, double fraction);

/// The support of sparse_skew: `count` distinct flat upper-triangle indices in
/// [0, pairs(dim)), sorted ascending. They are the first `count` entries of a
/// partial Fisher-Yates shuffle of 0, 1, ..., P-1 (P = pairs(dim)) driven by
/// SplitMix64(seed): for i = 0 .. count-1, j = i + next() mod (P - i), swap
/// a[i] and a[j]. Uses O(count) memory. Requires 1 <= count <= P.
std::vector<int64_t> sparseSkewSupport(int64_t dim, int64_t count, uint64_t seed);

} // namespace stringc

#endif // STRINGC_FRONTEND_DETERMINISM_H
