// Fast elementwise kernels: dropout, spd_gate and spd_gate_grad.
//
// The arithmetic is the reference's, value for value: spd_gate computes in
// double, as the reference does, and its dgamma sums each column in row
// order in double, the reference's order. The results are therefore
// bit for bit the reference's, for any thread count.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"
#include "TargetClones.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

// Whether `small` equals the trailing dimensions of `big`.
bool isTrailingSuffix(const std::vector<int64_t> &small, const std::vector<int64_t> &big) {
  if (small.size() > big.size())
    return false;
  const size_t offset = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i)
    if (small[i] != big[offset + i])
      return false;
  return true;
}

} // namespace

namespace {

// Philox blocks drawn together by the dropout kernel: independent chains the
// CPU overlaps, in arrays the compiler vectorises (one 32 x 32 -> 64-bit
// product per lane and round: vpmuludq).
constexpr int kPhiloxLanes = 16;

// Philox4x32::block of kPhiloxLanes counters (c[word][lane], in place)
// under one key: the same rounds, lane by lane.
STRINGRT_TARGET_CLONES("avx512f", "avx2", "default")
void philoxLanes(uint32_t (&c)[4][kPhiloxLanes], uint32_t key0, uint32_t key1) {
  using P = Philox4x32;
  for (int round = 0; round < P::kRounds; ++round) {
    if (round > 0) {
      key0 += P::kW0;
      key1 += P::kW1;
    }
    for (int l = 0; l < kPhiloxLanes; ++l) {
      const uint64_t p0 = uint64_t(P::kM0) * c[0][l];
      const uint64_t p1 = uint64_t(P::kM1) * c[2][l];
      const uint32_t next0 = uint32_t(p1 >> 32) ^ c[1][l] ^ key0;
      const uint32_t next2 = uint32_t(p0 >> 32) ^ c[3][l] ^ key1;
      c[0][l] = next0;
      c[1][l] = uint32_t(p1);
      c[2][l] = next2;
      c[3][l] = uint32_t(p0);
    }
  }
}

// `value` when kept, else +0 (even for an infinite or NaN value, as the
// reference): a bit mask, not a branch on the random draw, which no
// predictor can guess.
inline float keptOrZero(float value, bool keep) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits &= 0u - uint32_t(keep);
  std::memcpy(&value, &bits, 4);
  return value;
}

} // namespace

void dropout(TensorRef<const float> x, double p, bool perSample, int64_t stream,
             const StepKey &key, TensorRef<float> y) {
  check(x.rank() >= 1, "dropout", "x must have the batch dimension first, found rank 0");
  checkShape("dropout: result", y, x.shape);
  const int64_t samples = x.shape[0];
  const int64_t perRow = samples > 0 ? x.numel() / samples : 0;
  const std::string why = dropoutDomainError(p, stream, key, samples, perRow);
  check(why.empty(), "dropout", why);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const uint32_t threshold = dropoutThreshold(p);
  const float *in = x.data;
  float *out = y.data;
  if (perSample) { // one draw a sample: element 0's
    parallelFor(0, samples, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(perRow, 1)),
                [&](int64_t b0, int64_t b1) {
                  for (int64_t b = b0; b < b1; ++b) {
                    const bool keep = dropoutKeepsAbove(
                        dropoutBlock(key, stream, key.firstSample + b, 0)[0], threshold);
                    for (int64_t r = b * perRow; r < (b + 1) * perRow; ++r)
                      out[r] = keep ? in[r] * scale : 0.0f;
                  }
                });
    return;
  }
  // Groups of four elements of a sample, one Philox block each
  // (dropoutBlock), kPhiloxLanes groups at a time.
  const int64_t groups = (perRow + 3) / 4;
  const auto seedLow = uint32_t(key.seed), seedHigh = uint32_t(key.seed >> 32);
  const uint32_t streamWord = 0x80000000u | uint32_t(stream);
  parallelFor(0, samples * groups, kElementGrain / 4, [&](int64_t g0, int64_t g1) {
    uint32_t c[4][kPhiloxLanes];
    int64_t first[kPhiloxLanes]; // each lane's first element (b perRow + 4 group)
    int64_t count[kPhiloxLanes]; // and how many of its 4 exist
    // The sample and group of g0, then advanced one group at a time (no
    // division per group).
    int64_t b = g0 / groups, group = g0 % groups;
    for (int64_t base = g0; base < g1; base += kPhiloxLanes) {
      const int lanes = int(std::min<int64_t>(kPhiloxLanes, g1 - base));
      for (int l = 0; l < kPhiloxLanes; ++l) {
        c[0][l] = uint32_t(group);
        c[1][l] = uint32_t(key.firstSample + b);
        c[2][l] = uint32_t(key.step);
        c[3][l] = streamWord;
        first[l] = b * perRow + group * 4;
        count[l] = std::min<int64_t>(4, perRow - group * 4);
        if (l + 1 < lanes && ++group == groups) { // spare lanes redo the last group
          group = 0;
          ++b;
        }
      }
      if (lanes == kPhiloxLanes && ++group == groups) { // the next base's group
        group = 0;
        ++b;
      }
      philoxLanes(c, seedLow, seedHigh);
      for (int l = 0; l < lanes; ++l) {
        const float *src = in + first[l];
        float *dst = out + first[l];
        if (count[l] == 4) {
          for (int w = 0; w < 4; ++w)
            dst[w] = keptOrZero(src[w] * scale, dropoutKeepsAbove(c[w][l], threshold));
        } else {
          for (int64_t w = 0; w < count[l]; ++w)
            dst[w] = keptOrZero(src[w] * scale, dropoutKeepsAbove(c[w][l], threshold));
        }
      }
    }
  });
}

namespace {

// exp(gamma) in double after the reference's check (gamma a trailing suffix of x).
std::vector<double> gate(const char *what, TensorRef<const float> x,
                         TensorRef<const float> gamma) {
  check(gamma.rank() >= 1 && isTrailingSuffix(gamma.shape, x.shape), what,
        "the shape of 'gamma' " + ref::shapeToString(gamma.shape) +
            " must be a trailing suffix of the shape of 'x' " + ref::shapeToString(x.shape));
  std::vector<double> e(static_cast<size_t>(gamma.numel()));
  for (int64_t i = 0; i < gamma.numel(); ++i)
    e[i] = std::exp(static_cast<double>(gamma.data[i]));
  return e;
}

} // namespace

void spdGate(TensorRef<const float> x, TensorRef<const float> gamma, TensorRef<float> y) {
  const std::vector<double> e = gate("spd_gate", x, gamma);
  checkShape("spd_gate: result", y, x.shape);
  const int64_t g = gamma.numel();
  if (g == 0 || x.numel() == 0)
    return;
  const float *in = x.data;
  float *out = y.data;
  parallelFor(0, x.numel() / g, rowGrain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < g; ++j)
        out[r * g + j] = static_cast<float>(static_cast<double>(in[r * g + j]) * e[j]);
  });
}

void spdGateGrad(TensorRef<const float> x, TensorRef<const float> gamma,
                 TensorRef<const float> dy, TensorRef<float> dx, TensorRef<float> dgamma) {
  const std::vector<double> e = gate("spd_gate_grad", x, gamma);
  checkShape("spd_gate_grad: 'dy'", dy, x.shape);
  checkShape("spd_gate_grad: result 'dx'", dx, x.shape);
  checkShape("spd_gate_grad: result 'dgamma'", dgamma, gamma.shape);
  const int64_t g = gamma.numel();
  if (g == 0)
    return;
  const int64_t rows = x.numel() / g;
  parallelFor(0, rows, rowGrain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < g; ++j)
        dx.data[r * g + j] = static_cast<float>(static_cast<double>(dy.data[r * g + j]) * e[j]);
  });
  // dgamma[j] = sum_r dy x e_j, each column in row order (column blocks in parallel).
  parallelFor(0, g, 16, [&](int64_t j0, int64_t j1) {
    std::vector<double> acc(static_cast<size_t>(j1 - j0), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j)
        acc[j - j0] += static_cast<double>(dy.data[r * g + j]) *
                       static_cast<double>(x.data[r * g + j]) * e[j];
    for (int64_t j = j0; j < j1; ++j)
      dgamma.data[j] = static_cast<float>(acc[j - j0]);
  });
}

} // namespace stringrt::cpu
