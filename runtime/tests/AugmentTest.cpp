// Philox4x32-10 against Random123's known-answer vectors, and the seeded
// image augmentation (crop, flip, erase) against its formula: bit-exact
// reproducibility from (seed, step, b), shapes of the changes, frequencies.
#include "stringrt/Augment.h"

#include "stringrt/Data.h"
#include "stringrt/Error.h"
#include "stringrt/Philox.h"
#include "stringrt/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace stringrt {
namespace {

using Block = std::array<uint32_t, 4>;

TEST(PhiloxTest, KnownAnswerVectors) {
  // Random123 kat_vectors, philox4x32_10.
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                       {0xffffffff, 0xffffffff}),
            (Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                       {0xa4093822, 0x299f31d0}),
            (Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  EXPECT_EQ(Philox4x32::block({1, 2, 3, 4}, {5, 6}), philox4x32({1, 2, 3, 4}, {5, 6}));
}

TEST(PhiloxTest, UniformFloatRangeAndEdges) {
  EXPECT_EQ(uniformFloat(0), 0.0f);
  EXPECT_EQ(uniformFloat(0xff), 0.0f); // the low 8 bits are dropped
  EXPECT_EQ(uniformFloat(0x100), std::ldexp(1.0f, -24));
  EXPECT_EQ(uniformFloat(0x80000000u), 0.5f);
  EXPECT_EQ(uniformFloat(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_LT(uniformFloat(0xffffffffu), 1.0f);
  for (uint32_t i = 0; i < 1000; ++i) {
    float f = uniformFloat(philox4x32({i, 0, 0, 0}, {7, 7})[0]);
    EXPECT_GE(f, 0.0f);
    EXPECT_LT(f, 1.0f);
  }
}

TEST(PhiloxTest, BelowRangeAndEdges) {
  for (uint32_t n : {1u, 2u, 3u, 9u, 129u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(below(0, n), 0u) << n;
    EXPECT_EQ(below(0xffffffffu, n), n - 1) << n;
    for (uint32_t i = 0; i < 200; ++i)
      EXPECT_LT(below(philox4x32({i, n, 0, 0}, {1, 2})[1], n), n);
  }
  EXPECT_EQ(below(0x7fffffffu, 2), 0u);
  EXPECT_EQ(below(0x80000000u, 2), 1u);
  EXPECT_EQ(below(12345, 1), 0u);
  EXPECT_EQ(below(0xffffffffu, 0), 0u);
}

// C x H x W image(s) with distinct non-zero pixels 1, 2, ...
std::vector<float> distinctImages(int64_t B, int64_t C, int64_t H, int64_t W) {
  std::vector<float> v(static_cast<size_t>(B * C * H * W));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(i + 1);
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The augmentation of one image written out by hand from the documented
// formula (Augment.h), independently of Augment.cpp.
std::vector<float> byHand(const AugmentPolicy &policy, uint64_t seed, int64_t step,
                          int64_t b, const float *in, int64_t C, int64_t H, int64_t W) {
  const std::array<uint32_t, 2> key{uint32_t(seed), uint32_t(seed >> 32)};
  auto blockOf = [&](uint32_t draw) {
    return philox4x32({uint32_t(b), uint32_t(uint64_t(step)),
                       uint32_t(uint64_t(step) >> 32), draw},
                      key);
  };
  const Block u = blockOf(0);
  const int64_t P = policy.cropPadding;
  int64_t dy = P, dx = P;
  if (P > 0) {
    dy = below(u[0], uint32_t(2 * P + 1));
    dx = below(u[1], uint32_t(2 * P + 1));
  }
  std::vector<float> cropped(size_t(C * H * W), 0.0f);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        int64_t sy = y + dy - P, sx = x + dx - P;
        if (sy >= 0 && sy < H && sx >= 0 && sx < W)
          cropped[size_t((c * H + y) * W + x)] = in[(c * H + sy) * W + sx];
      }
  std::vector<float> out = cropped;
  if (policy.flipProbability > 0 && double(uniformFloat(u[2])) < policy.flipProbability)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x)
          out[size_t((c * H + y) * W + x)] = cropped[size_t((c * H + y) * W + W - 1 - x)];
  if (policy.eraseProbability > 0 && double(uniformFloat(u[3])) < policy.eraseProbability) {
    for (uint32_t a = 1; a <= 10; ++a) {
      const Block w = blockOf(a);
      double area = 0.02 + (0.33 - 0.02) * uniformFloat(w[0]);
      double ratio =
          std::exp(std::log(0.3) + (std::log(3.3) - std::log(0.3)) * uniformFloat(w[1]));
      long h = std::lround(std::sqrt(area * double(H) * double(W) * ratio));
      long ww = std::lround(std::sqrt(area * double(H) * double(W) / ratio));
      if (!(0 < h && h < H && 0 < ww && ww < W))
        continue;
      int64_t top = below(w[2], uint32_t(H - h + 1));
      int64_t left = below(w[3], uint32_t(W - ww + 1));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = top; y < top + h; ++y)
          for (int64_t x = left; x < left + ww; ++x)
            out[size_t((c * H + y) * W + x)] = 0.0f;
      break;
    }
  }
  return out;
}

TEST(AugmentTest, OffPolicyLeavesPixelsBitwiseUnchanged) {
  std::vector<float> images = distinctImages(3, 2, 5, 4);
  images[0] = -0.0f;
  images[1] = std::numeric_limits<float>::quiet_NaN();
  images[2] = std::numeric_limits<float>::infinity();
  const std::vector<float> before = images;
  AugmentPolicy off;
  EXPECT_FALSE(off.enabled());
  augmentImages(off, 42, 7, images.data(), 3, 2, 5, 4);
  EXPECT_TRUE(sameBits(images, before));
}

TEST(AugmentTest, EnabledReflectsEachComponent) {
  AugmentPolicy p;
  p.cropPadding = 1;
  EXPECT_TRUE(p.enabled());
  p = {};
  p.flipProbability = 0.5;
  EXPECT_TRUE(p.enabled());
  p = {};
  p.eraseProbability = 0.25;
  EXPECT_TRUE(p.enabled());
}

AugmentPolicy everything() {
  AugmentPolicy p;
  p.cropPadding = 4;
  p.flipProbability = 0.5;
  p.eraseProbability = 0.5;
  return p;
}

TEST(AugmentTest, SameSeedAndStepGiveSameBits) {
  const std::vector<float> input = distinctImages(8, 3, 16, 16);
  std::vector<float> a = input, b = input;
  augmentImages(everything(), 0x123456789abcdefull, 1000, a.data(), 8, 3, 16, 16);
  augmentImages(everything(), 0x123456789abcdefull, 1000, b.data(), 8, 3, 16, 16);
  EXPECT_TRUE(sameBits(a, b));
  EXPECT_FALSE(sameBits(a, input));
}

TEST(AugmentTest, AnotherSeedOrStepDiffers) {
  const std::vector<float> input = distinctImages(8, 3, 16, 16);
  std::vector<float> base = input, seed = input, step = input, highSeed = input,
                     highStep = input;
  const uint64_t s = 5;
  const int64_t t = 3;
  augmentImages(everything(), s, t, base.data(), 8, 3, 16, 16);
  augmentImages(everything(), s + 1, t, seed.data(), 8, 3, 16, 16);
  augmentImages(everything(), s, t + 1, step.data(), 8, 3, 16, 16);
  // The high halves of the seed and the step are counter/key words too.
  augmentImages(everything(), s + (1ull << 32), t, highSeed.data(), 8, 3, 16, 16);
  augmentImages(everything(), s, t + (int64_t(1) << 32), highStep.data(), 8, 3, 16, 16);
  EXPECT_FALSE(sameBits(base, seed));
  EXPECT_FALSE(sameBits(base, step));
  EXPECT_FALSE(sameBits(base, highSeed));
  EXPECT_FALSE(sameBits(base, highStep));
}

TEST(AugmentTest, SamplesDifferWithinABatch) {
  // Eight copies of one image: b in the counter makes their augmentations differ.
  const int64_t B = 8, C = 1, H = 12, W = 12;
  std::vector<float> images;
  const std::vector<float> one = distinctImages(1, C, H, W);
  for (int64_t b = 0; b < B; ++b)
    images.insert(images.end(), one.begin(), one.end());
  augmentImages(everything(), 9, 9, images.data(), B, C, H, W);
  int distinct = 0;
  for (int64_t b = 1; b < B; ++b)
    distinct += std::memcmp(images.data(), images.data() + b * C * H * W,
                            sizeof(float) * size_t(C * H * W)) != 0;
  EXPECT_GE(distinct, 5);
}

TEST(AugmentTest, SampleMatchesTheFormulaByHand) {
  const int64_t B = 4, C = 2, H = 10, W = 9;
  const std::vector<float> input = distinctImages(B, C, H, W);
  AugmentPolicy crop, flip, eraseOnly;
  crop.cropPadding = 3;
  flip.flipProbability = 0.5;
  eraseOnly.eraseProbability = 1;
  AugmentPolicy cropFlip = crop;
  cropFlip.flipProbability = 0.5;
  AugmentPolicy rareFlip = flip;
  rareFlip.flipProbability = 0.2;
  for (const AugmentPolicy &policy : {crop, flip, rareFlip, cropFlip, eraseOnly, everything()}) {
    for (int64_t step : {int64_t(0), int64_t(17), int64_t(5) << 33}) {
      std::vector<float> images = input;
      augmentImages(policy, 0xfeedface12345ull, step, images.data(), B, C, H, W);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t n = C * H * W;
        std::vector<float> expected =
            byHand(policy, 0xfeedface12345ull, step, b, input.data() + b * n, C, H, W);
        std::vector<float> got(images.begin() + b * n, images.begin() + (b + 1) * n);
        EXPECT_TRUE(sameBits(got, expected))
            << "padding " << policy.cropPadding << " flip " << policy.flipProbability << " erase "
            << policy.eraseProbability << " step " << step << " sample " << b;
      }
    }
  }
}

TEST(AugmentTest, SampleDoesNotDependOnBatchSize) {
  const int64_t C = 3, H = 8, W = 8, n = C * H * W;
  std::vector<float> small = distinctImages(4, C, H, W);
  std::vector<float> large = distinctImages(9, C, H, W);
  augmentImages(everything(), 77, 123, small.data(), 4, C, H, W);
  augmentImages(everything(), 77, 123, large.data(), 9, C, H, W);
  EXPECT_EQ(std::memcmp(small.data(), large.data(), sizeof(float) * size_t(4 * n)), 0);
}

// Large images split the batch over the CPU pool (a chunk per few samples):
// every thread count gives the bits of the formula written out by hand.
TEST(AugmentTest, AnyThreadCountGivesTheSameBits) {
  const int64_t B = 40, C = 3, H = 64, W = 64, n = C * H * W;
  const std::vector<float> input = distinctImages(B, C, H, W);
  const int original = cpu::numThreads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 4, 7}) {
    cpu::setNumThreads(threads);
    std::vector<float> images = input;
    augmentImages(everything(), 2026, 11, images.data(), B, C, H, W);
    results.push_back(std::move(images));
  }
  cpu::setNumThreads(original);
  for (size_t r = 1; r < results.size(); ++r)
    EXPECT_TRUE(sameBits(results[r], results[0])) << "thread count #" << r;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> want = byHand(everything(), 2026, 11, b, input.data() + b * n, C, H, W);
    EXPECT_EQ(std::memcmp(want.data(), results[0].data() + b * n, sizeof(float) * size_t(n)), 0)
        << "sample " << b;
  }
}

// The (sy, sx) in [-P, P]^2 with out[c][y][x] = in[c][y + sy][x + sx] (0
// outside) for every pixel, if exactly one fits.
std::optional<std::pair<int64_t, int64_t>> findShift(const float *in, const float *out,
                                                     int64_t C, int64_t H, int64_t W,
                                                     int64_t P) {
  std::optional<std::pair<int64_t, int64_t>> found;
  int matches = 0;
  for (int64_t sy = -P; sy <= P; ++sy)
    for (int64_t sx = -P; sx <= P; ++sx) {
      bool ok = true;
      for (int64_t c = 0; c < C && ok; ++c)
        for (int64_t y = 0; y < H && ok; ++y)
          for (int64_t x = 0; x < W && ok; ++x) {
            int64_t iy = y + sy, ix = x + sx;
            float want = iy >= 0 && iy < H && ix >= 0 && ix < W
                             ? in[(c * H + iy) * W + ix]
                             : 0.0f;
            ok = out[(c * H + y) * W + x] == want;
          }
      if (ok) {
        found = std::pair{sy, sx};
        ++matches;
      }
    }
  if (matches != 1)
    return std::nullopt;
  return found;
}

TEST(AugmentTest, CropIsAZeroPaddedShiftAndCoversEveryOffset) {
  const int64_t P = 4, C = 2, H = 12, W = 11, B = 3;
  AugmentPolicy crop;
  crop.cropPadding = P;
  const std::vector<float> input = distinctImages(B, C, H, W);
  std::vector<int> dyCount(2 * P + 1, 0), dxCount(2 * P + 1, 0);
  for (int64_t step = 0; step < 300; ++step) {
    std::vector<float> images = input;
    augmentImages(crop, 2024, step, images.data(), B, C, H, W);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = C * H * W;
      auto shift = findShift(input.data() + b * n, images.data() + b * n, C, H, W, P);
      ASSERT_TRUE(shift) << "step " << step << " sample " << b;
      ++dyCount[size_t(shift->first + P)];
      ++dxCount[size_t(shift->second + P)];
    }
  }
  // 900 draws over 9 offsets: each expected 100 times.
  for (int64_t d = 0; d <= 2 * P; ++d) {
    EXPECT_GT(dyCount[size_t(d)], 50) << "dy " << d;
    EXPECT_GT(dxCount[size_t(d)], 50) << "dx " << d;
  }
}

// How many of B samples of a 2 x 3 x 4 image the flip mirrors (asserting
// that each is either mirrored or unchanged).
int flippedCount(double probability, int64_t B, int64_t step) {
  const int64_t C = 2, H = 3, W = 4, n = C * H * W;
  AugmentPolicy flip;
  flip.flipProbability = probability;
  const std::vector<float> input = distinctImages(B, C, H, W);
  std::vector<float> images = input;
  augmentImages(flip, 31337, step, images.data(), B, C, H, W);
  int flipped = 0;
  for (int64_t b = 0; b < B; ++b) {
    const float *in = input.data() + b * n;
    const float *out = images.data() + b * n;
    bool same = true, mirrored = true;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          float v = out[(c * H + y) * W + x];
          same = same && v == in[(c * H + y) * W + x];
          mirrored = mirrored && v == in[(c * H + y) * W + (W - 1 - x)];
        }
    EXPECT_NE(same, mirrored) << "sample " << b;
    flipped += mirrored;
  }
  return flipped;
}

TEST(AugmentTest, FlipMirrorsAboutHalfTheSamples) {
  // 2000 draws with p = 0.5: standard deviation 22; 0.45..0.55 is 4.5 of them.
  int flipped = flippedCount(0.5, 2000, 12);
  EXPECT_GE(flipped, 900);
  EXPECT_LE(flipped, 1100);
}

TEST(AugmentTest, FlipFrequencyFollowsTheProbability) {
  EXPECT_EQ(flippedCount(0, 500, 1), 0);
  EXPECT_EQ(flippedCount(1, 500, 2), 500);
  // 4000 draws with p = 0.2: standard deviation 25, the bounds are 4 of them.
  int flipped = flippedCount(0.2, 4000, 3);
  EXPECT_GE(flipped, 700);
  EXPECT_LE(flipped, 900);
}

struct Rect {
  int64_t top, left, h, w;
};

// The zeros of one all-ones image: nothing, or the rectangle they fill
// (identical in every channel). Fails the test for any other pattern.
std::optional<Rect> erasedRect(const float *img, int64_t C, int64_t H, int64_t W) {
  int64_t top = H, left = W, bottom = -1, right = -1, zeros = 0;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      float v = img[y * W + x];
      EXPECT_TRUE(v == 0.0f || v == 1.0f);
      for (int64_t c = 1; c < C; ++c)
        EXPECT_EQ(img[(c * H + y) * W + x], v) << "channel " << c;
      if (v == 0.0f) {
        ++zeros;
        top = std::min(top, y);
        bottom = std::max(bottom, y);
        left = std::min(left, x);
        right = std::max(right, x);
      }
    }
  if (zeros == 0)
    return std::nullopt;
  Rect r{top, left, bottom - top + 1, right - left + 1};
  EXPECT_EQ(zeros, r.h * r.w) << "the zeros are not a rectangle";
  return r;
}

TEST(AugmentTest, EraseIsARectangleOfBoundedAreaAndRatio) {
  const int64_t B = 500, C = 3, H = 28, W = 28;
  AugmentPolicy erase;
  erase.eraseProbability = 1;
  std::vector<float> images(size_t(B * C * H * W), 1.0f);
  augmentImages(erase, 4, 4, images.data(), B, C, H, W);
  double minFraction = 1, maxFraction = 0;
  for (int64_t b = 0; b < B; ++b) {
    auto r = erasedRect(images.data() + b * C * H * W, C, H, W);
    ASSERT_TRUE(r) << "probability 1 must erase sample " << b;
    EXPECT_LT(r->h, H);
    EXPECT_LT(r->w, W);
    // h and w are rounded from sqrt(T r) and sqrt(T / r) with T in
    // [0.02, 0.33] H W and r in [0.3, 3.3].
    const double hw = double(H * W);
    EXPECT_LE((r->h - 0.5) * (r->w - 0.5), 0.33 * hw) << b;
    EXPECT_GE((r->h + 0.5) * (r->w + 0.5), 0.02 * hw) << b;
    EXPECT_GE((r->h + 0.5) / (r->w - 0.5), 0.3) << b;
    EXPECT_LE((r->h - 0.5) / (r->w + 0.5), 3.3) << b;
    minFraction = std::min(minFraction, r->h * r->w / hw);
    maxFraction = std::max(maxFraction, r->h * r->w / hw);
  }
  // The sizes spread over the range.
  EXPECT_LT(minFraction, 0.05);
  EXPECT_GT(maxFraction, 0.25);
}

int erasedCount(double probability, int64_t B, int64_t H, int64_t W, int64_t step) {
  AugmentPolicy erase;
  erase.eraseProbability = probability;
  std::vector<float> images(size_t(B * H * W), 1.0f);
  augmentImages(erase, 99, step, images.data(), B, 1, H, W);
  int erased = 0;
  for (int64_t b = 0; b < B; ++b)
    erased += erasedRect(images.data() + b * H * W, 1, H, W).has_value();
  return erased;
}

TEST(AugmentTest, EraseFrequencyFollowsTheProbability) {
  // 4000 draws with p = 0.3: standard deviation 29, the bounds are 4 of them.
  int erased = erasedCount(0.3, 4000, 28, 28, 1);
  EXPECT_GE(erased, 1080);
  EXPECT_LE(erased, 1320);
}

TEST(AugmentTest, EraseProbabilityZeroNeverOneAlways) {
  EXPECT_EQ(erasedCount(0, 1000, 28, 28, 2), 0);
  EXPECT_EQ(erasedCount(1, 1000, 28, 28, 3), 1000);
}

TEST(AugmentTest, EraseNeedsRoomInTheImage) {
  // A 1-pixel-wide image has no 0 < w < W: every attempt fails.
  EXPECT_EQ(erasedCount(1, 50, 28, 1, 0), 0);
}

TEST(AugmentTest, CheckAugmentPolicyRejectsBadValues) {
  EXPECT_NO_THROW(checkAugmentPolicy({}));
  AugmentPolicy ok;
  ok.cropPadding = 64;
  ok.eraseProbability = 1;
  EXPECT_NO_THROW(checkAugmentPolicy(ok));
  for (int64_t padding : {int64_t(-1), int64_t(65)}) {
    AugmentPolicy p;
    p.cropPadding = padding;
    EXPECT_THROW(checkAugmentPolicy(p), Error) << padding;
  }
  for (double prob : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity()}) {
    AugmentPolicy p;
    p.eraseProbability = prob;
    EXPECT_THROW(checkAugmentPolicy(p), Error) << prob;
  }
  for (double prob : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    AugmentPolicy p;
    p.flipProbability = prob;
    EXPECT_THROW(checkAugmentPolicy(p), Error) << prob;
  }
  AugmentPolicy nan;
  nan.eraseProbability = std::numeric_limits<double>::quiet_NaN();
  try {
    checkAugmentPolicy(nan);
    FAIL() << "NaN accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("erase probability"), std::string::npos) << e.what();
  }
}

TEST(AugmentTest, DescribeNamesTheComponentsThatAreOn) {
  EXPECT_EQ(describeAugmentPolicy({}), "none");
  EXPECT_EQ(describeAugmentPolicy(everything()), "crop 4, flip 0.5, erase 0.5");
  AugmentPolicy p;
  p.eraseProbability = 0.25;
  EXPECT_EQ(describeAugmentPolicy(p), "erase 0.25");
  p.cropPadding = 2;
  EXPECT_EQ(describeAugmentPolicy(p), "crop 2, erase 0.25");
}

// A batch as DataSet::batch makes it for an image set: f32 images, i32 labels.
Batch imageBatch(int64_t B, int64_t C, int64_t H, int64_t W) {
  Batch batch;
  batch.size = B;
  BatchTensor images;
  images.shape = {B, C, H, W};
  images.f32 = distinctImages(B, C, H, W);
  BatchTensor labels;
  labels.dtype = DType::I32;
  labels.shape = {B};
  labels.i32.assign(size_t(B), 3);
  batch.tensors = {images, labels};
  return batch;
}

TEST(AugmentTest, BatchImagesAreAugmentedAsTheirPixels) {
  Batch batch = imageBatch(5, 3, 8, 7);
  std::vector<float> pixels = batch.tensors[0].f32;
  augmentBatchImages(everything(), 11, 22, batch);
  augmentImages(everything(), 11, 22, pixels.data(), 5, 3, 8, 7);
  EXPECT_TRUE(sameBits(batch.tensors[0].f32, pixels));
  EXPECT_EQ(batch.tensors[1].i32, std::vector<int32_t>(5, 3)); // labels untouched

  Batch empty;
  EXPECT_THROW(augmentBatchImages(everything(), 1, 1, empty), Error);
  Batch labelsFirst = imageBatch(2, 1, 4, 4);
  std::swap(labelsFirst.tensors[0], labelsFirst.tensors[1]);
  EXPECT_THROW(augmentBatchImages(everything(), 1, 1, labelsFirst), Error);
  Batch rank3 = imageBatch(2, 1, 4, 4);
  rank3.tensors[0].shape = {2, 4, 4};
  EXPECT_THROW(augmentBatchImages(everything(), 1, 1, rank3), Error);
  Batch short_ = imageBatch(2, 1, 4, 4);
  short_.tensors[0].f32.pop_back();
  EXPECT_THROW(augmentBatchImages(everything(), 1, 1, short_), Error);
}

TEST(AugmentTest, AugmentImagesRejectsBadArguments) {
  std::vector<float> images(16, 1.0f);
  AugmentPolicy flip;
  flip.flipProbability = 0.5;
  EXPECT_THROW(augmentImages(flip, 0, 0, nullptr, 1, 1, 4, 4), Error);
  EXPECT_THROW(augmentImages(flip, 0, 0, images.data(), 0, 1, 4, 4), Error);
  EXPECT_THROW(augmentImages(flip, 0, 0, images.data(), 1, 0, 4, 4), Error);
  EXPECT_THROW(augmentImages(flip, 0, 0, images.data(), 1, 1, 0, 4), Error);
  EXPECT_THROW(augmentImages(flip, 0, 0, images.data(), 1, 1, 4, -1), Error);
  AugmentPolicy bad;
  bad.cropPadding = 65;
  EXPECT_THROW(augmentImages(bad, 0, 0, images.data(), 1, 1, 4, 4), Error);
  // An off policy still checks its arguments.
  EXPECT_THROW(augmentImages({}, 0, 0, nullptr, 1, 1, 4, 4), Error);
}

// The two halves a device uses (its kernel applies the host's draws):
// drawing then applying is augmentImages, bit for bit, and each draw is the
// documented formula's.
TEST(AugmentTest, DrawingThenApplyingIsAugmentImages) {
  const int64_t B = 24, C = 3, H = 13, W = 17;
  const std::vector<float> input = distinctImages(B, C, H, W);
  AugmentPolicy certain = everything();
  certain.eraseProbability = 1.0;
  for (const AugmentPolicy &policy : {everything(), certain}) {
    for (int64_t step : {int64_t(0), int64_t(7), int64_t(1) << 33}) {
      std::vector<int32_t> draws(size_t(B * kAugmentDrawWords), -99);
      drawAugmentation(policy, 42, step, B, H, W, draws.data());
      std::vector<float> applied = input, whole = input;
      applyAugmentation(draws.data(), applied.data(), B, C, H, W);
      augmentImages(policy, 42, step, whole.data(), B, C, H, W);
      EXPECT_TRUE(sameBits(applied, whole)) << "step " << step;
      for (int64_t b = 0; b < B; ++b) {
        const int32_t *d = draws.data() + b * kAugmentDrawWords;
        const Block u = philox4x32({uint32_t(b), uint32_t(uint64_t(step)),
                                    uint32_t(uint64_t(step) >> 32), 0},
                                   {42u, 0u});
        EXPECT_EQ(d[kDrawOffsetY], int32_t(below(u[0], 9)) - 4);
        EXPECT_EQ(d[kDrawOffsetX], int32_t(below(u[1], 9)) - 4);
        EXPECT_EQ(d[kDrawFlip], double(uniformFloat(u[2])) < 0.5 ? 1 : 0);
        const bool erase = double(uniformFloat(u[3])) < policy.eraseProbability;
        EXPECT_EQ(d[kDrawEraseHeight] > 0, erase) << "sample " << b;
        if (erase) { // within the image, and of the documented area
          EXPECT_LT(d[kDrawEraseTop] + d[kDrawEraseHeight], H + 1);
          EXPECT_LT(d[kDrawEraseLeft] + d[kDrawEraseWidth], W + 1);
          const double area = double(d[kDrawEraseHeight]) * d[kDrawEraseWidth] / double(H * W);
          EXPECT_GT(area, 0.0);
          EXPECT_LT(area, 0.5);
        }
      }
    }
  }
  // An off policy draws the identity.
  std::vector<int32_t> none(size_t(B * kAugmentDrawWords), -1);
  drawAugmentation({}, 42, 3, B, H, W, none.data());
  EXPECT_EQ(none, std::vector<int32_t>(none.size(), 0));
  std::vector<float> same = input;
  applyAugmentation(none.data(), same.data(), B, C, H, W);
  EXPECT_TRUE(sameBits(same, input));
}

// applyAugmentation on draws written here: what each word does, and a
// rectangle reaching past the image is clipped to it.
TEST(AugmentTest, ApplyFollowsEachDrawWord) {
  const int64_t C = 2, H = 4, W = 5;
  const std::vector<float> in = distinctImages(1, C, H, W);
  auto apply = [&](std::array<int32_t, kAugmentDrawWords> draw) {
    std::vector<float> out = in;
    applyAugmentation(draw.data(), out.data(), 1, C, H, W);
    return out;
  };
  auto at = [&](const std::vector<float> &v, int64_t c, int64_t y, int64_t x) {
    return v[size_t((c * H + y) * W + x)];
  };
  // Shift by (1, -2): out[y][x] = in[y + 1][x - 2], 0 outside.
  std::vector<float> shifted = apply({1, -2, 0, 0, 0, 0, 0});
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const bool inside = y + 1 < H && x - 2 >= 0;
        EXPECT_EQ(at(shifted, c, y, x), inside ? at(in, c, y + 1, x - 2) : 0.0f);
      }
  // Flip, then the offset: out[y][x] = in[y][(W - 1 - x) + 1].
  std::vector<float> flipped = apply({0, 1, 1, 0, 0, 0, 0});
  for (int64_t x = 0; x < W; ++x)
    EXPECT_EQ(at(flipped, 1, 2, x), W - x < W ? at(in, 1, 2, W - x) : 0.0f) << x;
  // Shifted past the image: all zero.
  EXPECT_EQ(apply({0, int32_t(W), 0, 0, 0, 0, 0}), std::vector<float>(in.size(), 0.0f));
  // Erase rows [1, 3) x columns [3, 8): clipped at W = 5.
  std::vector<float> erased = apply({0, 0, 0, 1, 3, 2, 5});
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const bool gone = y >= 1 && y < 3 && x >= 3;
        EXPECT_EQ(at(erased, c, y, x), gone ? 0.0f : at(in, c, y, x));
      }
}

TEST(AugmentTest, DrawAndApplyRejectBadArguments) {
  std::vector<int32_t> draws(kAugmentDrawWords);
  std::vector<float> images(16, 1.0f);
  EXPECT_THROW(drawAugmentation(everything(), 0, 0, 1, 4, 4, nullptr), Error);
  EXPECT_THROW(drawAugmentation(everything(), 0, 0, 0, 4, 4, draws.data()), Error);
  EXPECT_THROW(drawAugmentation(everything(), 0, 0, 1, 0, 4, draws.data()), Error);
  // Draws are int32: an image side beyond that is refused, not wrapped.
  EXPECT_THROW(drawAugmentation(everything(), 0, 0, 1, int64_t(1) << 31, 4, draws.data()), Error);
  AugmentPolicy bad;
  bad.flipProbability = 2;
  EXPECT_THROW(drawAugmentation(bad, 0, 0, 1, 4, 4, draws.data()), Error);
  EXPECT_THROW(applyAugmentation(nullptr, images.data(), 1, 1, 4, 4), Error);
  EXPECT_THROW(applyAugmentation(draws.data(), nullptr, 1, 1, 4, 4), Error);
  EXPECT_THROW(applyAugmentation(draws.data(), images.data(), 1, 1, 0, 4), Error);
}

// `stringrun train --augment SPEC`.
TEST(AugmentTest, ParsesThePolicyOfTheCommandLine) {
  AugmentPolicy all = parseAugmentPolicy("crop=4,flip=0.5,erase=0.25");
  EXPECT_EQ(all.cropPadding, 4);
  EXPECT_EQ(all.flipProbability, 0.5);
  EXPECT_EQ(all.eraseProbability, 0.25);
  AugmentPolicy flip = parseAugmentPolicy("flip=1");
  EXPECT_EQ(flip.cropPadding, 0);
  EXPECT_EQ(flip.flipProbability, 1.0);
  EXPECT_EQ(flip.eraseProbability, 0.0);
  EXPECT_FALSE(parseAugmentPolicy("none").enabled());
  EXPECT_FALSE(parseAugmentPolicy("crop=0").enabled());
  EXPECT_EQ(describeAugmentPolicy(parseAugmentPolicy("erase=0.5,crop=2")), "crop 2, erase 0.5");

  auto message = [](const char *spec) {
    try {
      parseAugmentPolicy(spec);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(""), "empty (expected none, or a comma list of crop=P, flip=p, erase=p)");
  EXPECT_EQ(message("rotate=3"),
            "unknown augmentation 'rotate' (expected none, or a comma list of crop=P, flip=p, "
            "erase=p)");
  EXPECT_EQ(message("crop=1,"), "unknown augmentation '' (expected none, or a comma list of "
                                "crop=P, flip=p, erase=p)");
  EXPECT_EQ(message("flip"), "'flip' needs a value (flip=p)");
  EXPECT_EQ(message("crop=1,crop=2"), "'crop' given twice");
  EXPECT_EQ(message("crop=1.5"), "crop needs an integer number of pixels, got '1.5'");
  EXPECT_EQ(message("crop="), "crop needs an integer number of pixels, got ''");
  EXPECT_EQ(message("erase=half"), "erase needs a probability, got 'half'");
  EXPECT_EQ(message("crop=65"), "augmentation crop padding must be in [0, 64], got 65");
  EXPECT_EQ(message("flip=1.5"), "augmentation flip probability must be in [0, 1], got 1.5");
  EXPECT_EQ(message("erase=nan"), "augmentation erase probability must be in [0, 1], got nan");
}

} // namespace
} // namespace stringrt
