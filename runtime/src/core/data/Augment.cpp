#include "stringrt/Augment.h"

#include "SampleChunks.h"
#include "stringrt/Data.h"
#include "stringrt/Error.h"
#include "stringrt/Philox.h"
#include "stringrt/cpu/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace stringrt {

namespace {

// torchvision RandomErasing defaults.
constexpr double kEraseScaleMin = 0.02;
constexpr double kEraseScaleMax = 0.33;
constexpr double kEraseRatioMin = 0.3;
constexpr double kEraseRatioMax = 3.3;
constexpr uint32_t kEraseAttempts = 10;

// uniformFloat(u) < probability, compared in double: the float is exact, so
// the comparison is the same wherever it is made.
bool chance(uint32_t u, double probability) {
  return static_cast<double>(uniformFloat(u)) < probability;
}

// Block `draw` of sample b of a step: the only source of randomness.
Philox4x32::Counter sampleBlock(uint64_t seed, int64_t step, int64_t b,
                                uint32_t draw) {
  const auto s = static_cast<uint64_t>(step);
  return Philox4x32::block(
      {static_cast<uint32_t>(b), static_cast<uint32_t>(s),
       static_cast<uint32_t>(s >> 32), draw},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// out[c][y][x] = in[c][y + oy][x' + ox] with x' = W - 1 - x when flipped,
// else x; 0 where the source is outside the image. `scratch` holds C*H*W.
void cropAndFlip(float *image, float *scratch, int64_t C, int64_t H, int64_t W,
                 int64_t oy, int64_t ox, bool flip) {
  std::copy(image, image + C * H * W, scratch);
  for (int64_t c = 0; c < C; ++c) {
    const float *in = scratch + c * H * W;
    float *out = image + c * H * W;
    for (int64_t y = 0; y < H; ++y) {
      const int64_t sy = y + oy;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t sx = (flip ? W - 1 - x : x) + ox;
        const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
        out[y * W + x] = inside ? in[sy * W + sx] : 0.0f;
      }
    }
  }
}

// The first of the ten erase attempts whose rectangle fits (top, left,
// height, width); all zero when none fits.
std::array<int64_t, 4> eraseRectangle(int64_t H, int64_t W, uint64_t seed, int64_t step,
                                      int64_t b) {
  const double area = static_cast<double>(H) * static_cast<double>(W);
  const double logMin = std::log(kEraseRatioMin);
  const double logMax = std::log(kEraseRatioMax);
  for (uint32_t a = 1; a <= kEraseAttempts; ++a) {
    const auto w = sampleBlock(seed, step, b, a);
    const double scale = kEraseScaleMin + (kEraseScaleMax - kEraseScaleMin) *
                                              double(uniformFloat(w[0]));
    const double ratio =
        std::exp(logMin + (logMax - logMin) * double(uniformFloat(w[1])));
    const int64_t eh = std::lround(std::sqrt(scale * area * ratio));
    const int64_t ew = std::lround(std::sqrt(scale * area / ratio));
    if (eh <= 0 || eh >= H || ew <= 0 || ew >= W)
      continue;
    const int64_t top = below(w[2], static_cast<uint32_t>(H - eh + 1));
    const int64_t left = below(w[3], static_cast<uint32_t>(W - ew + 1));
    return {top, left, eh, ew};
  }
  return {0, 0, 0, 0};
}

// Sample b's draws (kAugmentDrawWords words at `out`).
void drawSample(const AugmentPolicy &policy, uint64_t seed, int64_t step, int64_t b,
                int64_t H, int64_t W, int32_t *out) {
  std::fill(out, out + kAugmentDrawWords, 0);
  const int64_t P = policy.cropPadding;
  const auto u = sampleBlock(seed, step, b, 0);
  if (P > 0) {
    const auto offsets = static_cast<uint32_t>(2 * P + 1);
    out[kDrawOffsetY] = static_cast<int32_t>(static_cast<int64_t>(below(u[0], offsets)) - P);
    out[kDrawOffsetX] = static_cast<int32_t>(static_cast<int64_t>(below(u[1], offsets)) - P);
  }
  out[kDrawFlip] = policy.flipProbability > 0 && chance(u[2], policy.flipProbability);
  if (policy.eraseProbability > 0 && chance(u[3], policy.eraseProbability)) {
    const std::array<int64_t, 4> r = eraseRectangle(H, W, seed, step, b);
    for (int64_t i = 0; i < 4; ++i)
      out[kDrawEraseTop + i] = static_cast<int32_t>(r[size_t(i)]);
  }
}

// Applies one sample's draws to its C x H x W pixels; `scratch` holds C*H*W
// when the sample is cropped or flipped.
void applySample(const int32_t *draw, float *sample, std::vector<float> &scratch, int64_t C,
                 int64_t H, int64_t W) {
  const int64_t oy = draw[kDrawOffsetY], ox = draw[kDrawOffsetX];
  const bool flip = draw[kDrawFlip] != 0;
  if (oy != 0 || ox != 0 || flip) {
    scratch.resize(static_cast<size_t>(C * H * W));
    cropAndFlip(sample, scratch.data(), C, H, W, oy, ox, flip);
  }
  // Clamped to the image: the draws come from drawAugmentation, but a
  // rectangle outside it must not write outside the sample.
  const int64_t top = std::clamp<int64_t>(draw[kDrawEraseTop], 0, H);
  const int64_t left = std::clamp<int64_t>(draw[kDrawEraseLeft], 0, W);
  const int64_t bottom = std::clamp<int64_t>(top + draw[kDrawEraseHeight], top, H);
  const int64_t right = std::clamp<int64_t>(left + draw[kDrawEraseWidth], left, W);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = top; y < bottom; ++y) {
      float *row = sample + (c * H + y) * W;
      std::fill(row + left, row + right, 0.0f);
    }
}

void checkShape(const float *images, int64_t B, int64_t C, int64_t H,
                int64_t W) {
  if (!images)
    throw Error("augmentImages: images is null");
  if (B < 1 || C < 1 || H < 1 || W < 1)
    throw Error(fmt::format("augmentImages: a batch of [{}, {}, {}, {}] "
                            "images is empty",
                            B, C, H, W));
  // b is a 32-bit counter word; H and W are drawn below() as 32-bit ranges.
  constexpr int64_t kMax32 = std::numeric_limits<uint32_t>::max();
  if (B > kMax32 + 1 || H >= kMax32 || W >= kMax32)
    throw Error(fmt::format("augmentImages: a batch of [{}, {}, {}, {}] "
                            "images is too large",
                            B, C, H, W));
  const int64_t limit = std::numeric_limits<int64_t>::max();
  if (C > limit / H || C * H > limit / W || C * H * W > limit / B)
    throw Error(fmt::format("augmentImages: a batch of [{}, {}, {}, {}] "
                            "images has too many pixels",
                            B, C, H, W));
}

} // namespace

void checkAugmentPolicy(const AugmentPolicy &policy) {
  if (policy.cropPadding < 0 || policy.cropPadding > kMaxCropPadding)
    throw Error(fmt::format("augmentation crop padding must be in [0, {}], "
                            "got {}",
                            kMaxCropPadding, policy.cropPadding));
  for (const auto &[p, name] : {std::pair{policy.flipProbability, "flip"},
                                {policy.eraseProbability, "erase"}}) {
    if (!std::isfinite(p) || p < 0 || p > 1)
      throw Error(fmt::format("augmentation {} probability must be in "
                              "[0, 1], got {}",
                              name, p));
  }
}

std::string describeAugmentPolicy(const AugmentPolicy &policy) {
  std::string text;
  auto add = [&](const std::string &part) {
    text += (text.empty() ? "" : ", ") + part;
  };
  if (policy.cropPadding > 0)
    add(fmt::format("crop {}", policy.cropPadding));
  if (policy.flipProbability > 0)
    add(fmt::format("flip {}", policy.flipProbability));
  if (policy.eraseProbability > 0)
    add(fmt::format("erase {}", policy.eraseProbability));
  return text.empty() ? "none" : text;
}

AugmentPolicy parseAugmentPolicy(std::string_view spec) {
  const char *expected = "expected none, or a comma list of crop=P, flip=p, erase=p";
  AugmentPolicy policy;
  if (spec == "none")
    return policy;
  if (spec.empty())
    throw Error(fmt::format("empty ({})", expected));
  bool seen[3] = {false, false, false};
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = std::min(spec.find(',', start), spec.size());
    std::string_view item = spec.substr(start, comma - start);
    start = comma + 1;
    size_t eq = item.find('=');
    std::string name(item.substr(0, eq));
    int which = name == "crop" ? 0 : name == "flip" ? 1 : name == "erase" ? 2 : -1;
    if (which < 0)
      throw Error(fmt::format("unknown augmentation '{}' ({})", name, expected));
    const char *form = which == 0 ? "crop=P" : which == 1 ? "flip=p" : "erase=p";
    if (eq == std::string_view::npos)
      throw Error(fmt::format("'{}' needs a value ({})", name, form));
    if (seen[which])
      throw Error(fmt::format("'{}' given twice", name));
    seen[which] = true;
    const std::string text(item.substr(eq + 1));
    const char *end = text.data() + text.size();
    if (which == 0) {
      auto [ptr, ec] = std::from_chars(text.data(), end, policy.cropPadding);
      if (text.empty() || ec != std::errc() || ptr != end)
        throw Error(fmt::format("crop needs an integer number of pixels, got '{}'", text));
    } else {
      // strtod reads "0.5" alike everywhere: the runtime never leaves the
      // "C" locale. NaN and infinities are refused by checkAugmentPolicy.
      char *stop = nullptr;
      const double value = text.empty() ? std::nan("") : std::strtod(text.c_str(), &stop);
      if (text.empty() || stop != text.c_str() + text.size())
        throw Error(fmt::format("{} needs a probability, got '{}'", name, text));
      (which == 1 ? policy.flipProbability : policy.eraseProbability) = value;
    }
  }
  checkAugmentPolicy(policy);
  return policy;
}

void drawAugmentation(const AugmentPolicy &policy, uint64_t seed, int64_t step, int64_t B,
                      int64_t H, int64_t W, int32_t *draws, int64_t firstSample) {
  checkAugmentPolicy(policy);
  if (!draws)
    throw Error("drawAugmentation: draws is null");
  if (B < 1 || H < 1 || W < 1)
    throw Error(fmt::format("drawAugmentation: a batch of {} images of {} x {} is empty", B,
                            H, W));
  constexpr int64_t kMax32 = std::numeric_limits<uint32_t>::max();
  constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();
  if (firstSample < 0 || B > kMax32 + 1 - firstSample || H > kMaxI32 || W > kMaxI32)
    throw Error(fmt::format("drawAugmentation: a batch of {} images of {} x {} from sample {} "
                            "is too large",
                            B, H, W, firstSample));
  for (int64_t b = 0; b < B; ++b)
    drawSample(policy, seed, step, firstSample + b, H, W, draws + b * kAugmentDrawWords);
}

void applyAugmentation(const int32_t *draws, float *images, int64_t B, int64_t C, int64_t H,
                       int64_t W) {
  checkShape(images, B, C, H, W);
  if (!draws)
    throw Error("applyAugmentation: draws is null");
  const int64_t image = C * H * W;
  // Samples in parallel on the CPU pool: each is written by one chunk, so
  // any thread count gives the same bits.
  cpu::parallelFor(0, B, detail::samplesPerChunk(image), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t b = begin; b < end; ++b)
      applySample(draws + b * kAugmentDrawWords, images + b * image, scratch, C, H, W);
  });
}

void augmentImages(const AugmentPolicy &policy, uint64_t seed, int64_t step,
                   float *images, int64_t B, int64_t C, int64_t H, int64_t W,
                   int64_t firstSample) {
  checkAugmentPolicy(policy);
  checkShape(images, B, C, H, W);
  if (!policy.enabled())
    return;
  // Each sample's draws depend on (seed, step, b) only (microseconds for a
  // batch); the pixels then move on the pool.
  std::vector<int32_t> draws(static_cast<size_t>(B * kAugmentDrawWords));
  drawAugmentation(policy, seed, step, B, H, W, draws.data(), firstSample);
  applyAugmentation(draws.data(), images, B, C, H, W);
}

void augmentBatchImages(const AugmentPolicy &policy, uint64_t seed,
                        int64_t step, Batch &batch, int64_t firstSample) {
  if (batch.tensors.empty())
    throw Error("augmentBatchImages: the batch has no tensors");
  BatchTensor &images = batch.tensors.front();
  const std::vector<int64_t> &s = images.shape;
  if (images.dtype != DType::F32 || s.size() != 4)
    throw Error(fmt::format("augmentBatchImages: the batch's first tensor is "
                            "not f32 [B, C, H, W] images (rank {})",
                            s.size()));
  const uint64_t need = static_cast<uint64_t>(s[0]) * static_cast<uint64_t>(s[1]) *
                        static_cast<uint64_t>(s[2]) * static_cast<uint64_t>(s[3]);
  if (s[0] < 1 || s[1] < 1 || s[2] < 1 || s[3] < 1 || images.f32.size() != need)
    throw Error(fmt::format("augmentBatchImages: {} floats for images of "
                            "[{}, {}, {}, {}]",
                            images.f32.size(), s[0], s[1], s[2], s[3]));
  augmentImages(policy, seed, step, images.f32.data(), s[0], s[1], s[2], s[3], firstSample);
}

} // namespace stringrt
