// Resizing images and learned position tables, to evaluate a model trained
// at one image size on another (docs/experiments.md, "Another resolution").
//
// Both follow PyTorch's F.interpolate with align_corners=False and
// antialias=False, so a model resized here sees what a torch pipeline would
// feed it: output pixel i samples the input at (i + 0.5) * in / out - 0.5.
// - bilinear (the images): that coordinate clamped below at 0, its two
//   neighbours (the upper one clamped to the last row or column) weighted
//   linearly;
// - bicubic (position tables, as DeiT and timm resize ViT position
//   embeddings): the cubic convolution of Keys with a = -0.75 over the four
//   neighbours, indices clamped to the border.
// tests/oracle/test_resize.py checks both against torch.
#pragma once

#include <cstdint>
#include <vector>

namespace stringrt {

// `channels` planes of rows x cols floats -> planes of newRows x newCols.
void resizeBilinear(const float *src, int64_t channels, int64_t rows, int64_t cols, float *dst,
                    int64_t newRows, int64_t newCols);
void resizeBicubic(const float *src, int64_t channels, int64_t rows, int64_t cols, float *dst,
                   int64_t newRows, int64_t newCols);

// How a learned position table [T, D] lies on the patch grid: its first
// `special` rows belong to tokens without a place (the class token), the
// other T - special rows to a side x side grid, row-major.
struct PositionTableLayout {
  int64_t special = 0;
  int64_t side = 0;
};

// The layout of a table of `tokens` rows: one leading special row when
// tokens - 1 is a positive square (the class token, as in the ViT
// examples), else none when tokens is a square; nullopt-like {0, 0} when
// neither.
PositionTableLayout positionTableLayout(int64_t tokens);

// A position table [tokens, dim] resized to [newTokens, dim] (DeiT's and
// timm's resample_abs_pos_embed): the special rows kept as they are, the
// grid part resized bicubically from side x side to newSide x newSide, each
// of the dim features as one plane. Both sizes must have a layout with the
// same number of special rows (stringrt::Error otherwise).
std::vector<float> resizePositionTable(const std::vector<float> &table, int64_t tokens, int64_t dim,
                                       int64_t newTokens);

} // namespace stringrt
