//===- Determinism.cpp ----------------------------------------------------===//

#include "stringc/Frontend/Determinism.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace stringc {

uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

int64_t derivedSeed(std::string_view fullName) {
  return static_cast<int64_t>(fnv1a64(fullName) & 0x7FFFFFFFFFFFFFFFull);
}

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t pairsOf(int64_t n) { return n * (n - 1) / 2; }

int64_t sparsePairs(int64_t n, double fraction) {
  double wanted = std::round(fraction * static_cast<double>(pairsOf(n)));
  return std::max<int64_t>(1, static_cast<int64_t>(wanted));
}

std::vector<int64_t> sparseSkewSupport(int64_t dim, int64_t count, uint64_t seed) {
  const uint64_t total = static_cast<uint64_t>(pairsOf(dim));
  SplitMix64 rng(seed);
  // The shuffled array a[] is the identity except where a swap touched it.
  std::unordered_map<uint64_t, uint64_t> moved;
  auto at = [&](uint64_t i) {
    auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int64_t> support;
  support.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < static_cast<uint64_t>(count); ++i) {
    uint64_t j = i + rng.next() % (total - i);
    uint64_t ai = at(i), aj = at(j);
    moved[j] = ai;
    moved[i] = aj;
    support.push_back(static_cast<int64_t>(aj));
  }
  std::sort(support.begin(), support.end());
  return support;
}

} // namespace stringc
