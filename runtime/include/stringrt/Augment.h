// Deterministic image augmentation of training batches: random crop with
// zero padding, horizontal flip and random erasing (Zhong et al. 2017,
// torchvision RandomErasing defaults).
//
// Every random quantity of sample b of training step `step` of a run with
// seed `seed` comes from Philox4x32-10 (Philox.h) with
//   key     = (uint32 seed, uint32 (seed >> 32))
//   counter = (uint32 b, uint32 step, uint32 (step >> 32), draw)
// so it depends only on (seed, step, b), never on threads, batch splitting or
// the machine, and a GPU kernel can reproduce it from the same formula. Block
// draw = 0 gives words u0..u3; with P the padding, q the flip probability:
//   crop  (P > 0): dy = below(u0, 2P + 1), dx = below(u1, 2P + 1);
//                  out[c][y][x] = in[c][y + dy - P][x + dx - P], 0 outside;
//   flip  (q > 0): when uniformFloat(u2) < q, mirror x (after the crop);
//   erase (p > 0): when uniformFloat(u3) < p, attempts a = 1..10 each use
//                  block draw = a, words w0..w3, in double:
//                    area  = 0.02 + (0.33 - 0.02) uniformFloat(w0)
//                    ratio = exp(log 0.3 + (log 3.3 - log 0.3) uniformFloat(w1))
//                    h = lround(sqrt(area H W ratio)), w = lround(sqrt(area H W / ratio))
//                  the first attempt with 0 < h < H and 0 < w < W sets rows
//                  [top, top + h) x columns [left, left + w) of every channel
//                  to 0, top = below(w2, H - h + 1), left = below(w3, W - w + 1);
//                  none is erased when all ten fail.
// Crop, then flip, then erase; a component that is off draws nothing (block
// 0 is the same whichever components are on).
#pragma once

#include "stringrt/OdsDefaults.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace stringrt {

struct Batch;

struct AugmentPolicy {
  // Random crop with this zero padding on every side (0: off).
  int64_t cropPadding = 0;
  // Probability of a horizontal flip (0: off; torchvision's default is 0.5).
  double flipProbability = 0;
  // Probability of random erasing (0: off).
  double eraseProbability = 0;

  bool enabled() const {
    return cropPadding > 0 || flipProbability > 0 || eraseProbability > 0;
  }
};

// The largest crop padding accepted: pe.dataset's bound (PE_DatasetLimits in
// PEModuleOps.td, generated into OdsDefaults.h).
constexpr int64_t kMaxCropPadding = ods::kMaxCropPadding;

// Throws Error unless cropPadding is in [0, kMaxCropPadding] and
// flipProbability and eraseProbability are finite numbers in [0, 1].
void checkAugmentPolicy(const AugmentPolicy &policy);

// The components that are on, e.g. "crop 4, flip 0.5, erase 0.25"; "none"
// when the policy is off.
std::string describeAugmentPolicy(const AugmentPolicy &policy);

// A policy from its command-line text (`stringrun train --augment`): "none",
// or a comma list of crop=P, flip=p, erase=p, each at most once; the ones
// not named are off. Throws Error saying what is wrong; checks the values.
AugmentPolicy parseAugmentPolicy(std::string_view spec);

// Augments `images`, f32 [B, C, H, W] row-major (B * C * H * W floats), in
// place as the header comment describes; sample b uses the counter of index
// firstSample + b (< 2^32): rows [firstSample, firstSample + B) of a step's
// batch get the draws they get in the whole batch. Checks the policy and
// that B, C, H, W >= 1 and images is not null (Error otherwise). Does
// nothing when the policy is off.
void augmentImages(const AugmentPolicy &policy, uint64_t seed, int64_t step,
                   float *images, int64_t B, int64_t C, int64_t H, int64_t W,
                   int64_t firstSample = 0);

// Each sample's draws (the parameters the header comment's formula draws
// for it), kAugmentDrawWords int32 per sample, in this order. A device
// applies them in a kernel (pe_augment_images): the exp and log of the
// erase draw are computed once, here, so both devices use the same bits.
enum AugmentDrawWord : int64_t {
  kDrawOffsetY,     // crop: the source row of output row y is y + offsetY
  kDrawOffsetX,     // and of output column x, (flipped x) + offsetX
  kDrawFlip,        // 1: mirror x (x -> W - 1 - x) before the offset
  kDrawEraseTop,    // the erased rectangle: rows [top, top + height),
  kDrawEraseLeft,   // columns [left, left + width); height 0: none
  kDrawEraseHeight,
  kDrawEraseWidth,
  kAugmentDrawWords
};

// Writes the draws of samples [firstSample, firstSample + B) of `step` (B *
// kAugmentDrawWords int32) for images of H x W pixels. Checks as
// augmentImages does (C is not needed), and that H and W fit an int32. An
// off policy draws zeros (the identity).
void drawAugmentation(const AugmentPolicy &policy, uint64_t seed, int64_t step, int64_t B,
                      int64_t H, int64_t W, int32_t *draws, int64_t firstSample = 0);

// Applies the draws of drawAugmentation to `images` (f32 [B, C, H, W]), in
// place: out[c][y][x] = 0 inside the erased rectangle, else
// in[c][y + offsetY][x' + offsetX] (x' = W - 1 - x when flipped), 0 when that
// is outside the image. Exact: pixels are copied or zeroed, never computed.
void applyAugmentation(const int32_t *draws, float *images, int64_t B, int64_t C, int64_t H,
                       int64_t W);

// augmentImages on the images of a batch of an image set (Data.h): its first
// tensor, which must be f32 [B, C, H, W] (Error otherwise); the batch holds
// rows [firstSample, firstSample + B) of the step's batch.
void augmentBatchImages(const AugmentPolicy &policy, uint64_t seed,
                        int64_t step, Batch &batch, int64_t firstSample = 0);

} // namespace stringrt
