// pe.dropout (PELayerElementwiseOps.td: dropout, or with per_sample drop-path, of x
// [B, ...] with the mask of the step key and the op's stream,
// stringrt/DropoutMask.h; its own VJP: the same op on dy, whose mask is the
// forward's): the shape contract, the reference and fast kernels and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/LayerOps.h.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../cpu/TargetClones.h"

#include "stringrt/DropoutMask.h"
#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <cstring>
#include <string>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::TensorRef;

// dropout: x has the batch first, y its shape; p, stream and the key
// within the mask formula's domain (stringrt/DropoutMask.h).
template <typename T>
void dropoutContract(const TensorRef<const T> &x, double p, int64_t stream, const StepKey &key,
                     const TensorRef<T> &y) {
  if (x.rank() < 1)
    throw Error("dropout: x must have the batch dimension first, found rank 0");
  ref::checkShape("dropout: result", y, x.shape);
  const int64_t samples = x.shape[0];
  const std::string why =
      dropoutDomainError(p, stream, key, samples, samples > 0 ? x.numel() / samples : 0);
  if (!why.empty())
    throw Error("dropout: " + why);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: each element's draw a function of its coordinates
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

template <typename T>
void dropout(TensorRef<const T> x, double p, bool perSample, int64_t stream, const StepKey &key,
             TensorRef<T> y) {
  ops::dropoutContract(x, p, stream, key, y);
  const int64_t samples = x.shape[0];
  const int64_t perRow = samples > 0 ? x.numel() / samples : 0;
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (int64_t b = 0; b < samples; ++b) {
    const int64_t sample = key.firstSample + b;
    const T *in = x.data + b * perRow;
    T *out = y.data + b * perRow;
    if (perSample) { // one draw: element 0's
      const bool keep = dropoutKeeps(dropoutBlock(key, stream, sample, 0)[0], p);
      for (int64_t r = 0; r < perRow; ++r)
        out[r] = keep ? in[r] * scale : T(0);
      continue;
    }
    Philox4x32::Counter words{};
    for (int64_t r = 0; r < perRow; ++r) {
      if (r % 4 == 0) // one block serves four elements
        words = dropoutBlock(key, stream, sample, r / 4);
      out[r] = dropoutKeeps(words[size_t(r % 4)], p) ? in[r] * scale : T(0);
    }
  }
}

template void dropout<float>(TensorRef<const float>, double, bool, int64_t, const StepKey &,
                             TensorRef<float>);
template void dropout<double>(TensorRef<const double>, double, bool, int64_t, const StepKey &,
                              TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel: the reference's masks and values bit for bit, in parallel
// over blocks of four elements (over samples for drop-path)
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::kElementGrain;

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

void dropout(TensorRef<const float> x, double p, bool perSample, int64_t stream, const StepKey &key,
             TensorRef<float> y) {
  ops::dropoutContract(x, p, stream, key, y);
  const int64_t samples = x.shape[0];
  const int64_t perRow = samples > 0 ? x.numel() / samples : 0;
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

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// Dropout and drop-path; the backward is this op again on dy.
void runDropout(const OpContext &c) {
  ref::dropout<float>(c.in(0), attrs::Dropout{c.op()}.p(), attrs::Dropout{c.op()}.perSample(),
                      c.op().getInt("stream"), c.stepKey(), c.out(0));
}
void runFastDropout(const OpContext &c) {
  cpu::dropout(c.in(0), attrs::Dropout{c.op()}.p(), attrs::Dropout{c.op()}.perSample(),
               c.op().getInt("stream"), c.stepKey(), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Dropout>(OpRegistry &registry) {
  registry.add(OpCode::Dropout, {runDropout, nullptr, runFastDropout});
}

} // namespace stringrt::ops
