// Bilinear and bicubic resizing as torch's F.interpolate (align_corners =
// False, antialias = False), and the position-table resize built on the
// bicubic one. stringrt/Resize.h gives the conventions.
#include "stringrt/Resize.h"

#include "stringrt/Data.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace stringrt {

namespace {

// The input coordinate output index `i` samples (align_corners = False).
float sourceCoordinate(int64_t i, int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  return scale * (static_cast<float>(i) + 0.5f) - 0.5f;
}

// One axis of a bilinear resize: for each output index, its two input
// indices and their weights.
struct LinearTaps {
  std::vector<int64_t> lo, hi;
  std::vector<float> wlo, whi;
};

LinearTaps linearTaps(int64_t in, int64_t out) {
  LinearTaps t;
  for (int64_t i = 0; i < out; ++i) {
    float x = std::max(sourceCoordinate(i, in, out), 0.0f);
    auto x0 = static_cast<int64_t>(x); // floor: x >= 0
    x0 = std::min(x0, in - 1);
    const int64_t x1 = x0 + (x0 < in - 1 ? 1 : 0);
    const float l1 = x - static_cast<float>(x0);
    t.lo.push_back(x0);
    t.hi.push_back(x1);
    t.wlo.push_back(1.0f - l1);
    t.whi.push_back(l1);
  }
  return t;
}

// Keys' cubic convolution weights of the four taps around fraction t.
void cubicWeights(float t, float w[4]) {
  const float a = -0.75f;
  auto near = [a](float x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };          // |x| <= 1
  auto far = [a](float x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }; // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

void checkSizes(int64_t channels, int64_t rows, int64_t cols, int64_t newRows, int64_t newCols) {
  if (channels < 1 || rows < 1 || cols < 1 || newRows < 1 || newCols < 1)
    throw Error(fmt::format("cannot resize {} planes of {} x {} to {} x {}", channels, rows, cols,
                            newRows, newCols));
}

} // namespace

void resizeBilinear(const float *src, int64_t channels, int64_t rows, int64_t cols, float *dst,
                    int64_t newRows, int64_t newCols) {
  checkSizes(channels, rows, cols, newRows, newCols);
  const LinearTaps ty = linearTaps(rows, newRows);
  const LinearTaps tx = linearTaps(cols, newCols);
  for (int64_t c = 0; c < channels; ++c) {
    const float *plane = src + c * rows * cols;
    float *out = dst + c * newRows * newCols;
    for (int64_t i = 0; i < newRows; ++i) {
      const float *r0 = plane + ty.lo[i] * cols;
      const float *r1 = plane + ty.hi[i] * cols;
      for (int64_t j = 0; j < newCols; ++j) {
        // torch's order: each row's pair first, then the two rows.
        const float top = tx.wlo[j] * r0[tx.lo[j]] + tx.whi[j] * r0[tx.hi[j]];
        const float bottom = tx.wlo[j] * r1[tx.lo[j]] + tx.whi[j] * r1[tx.hi[j]];
        out[i * newCols + j] = ty.wlo[i] * top + ty.whi[i] * bottom;
      }
    }
  }
}

void resizeBicubic(const float *src, int64_t channels, int64_t rows, int64_t cols, float *dst,
                   int64_t newRows, int64_t newCols) {
  checkSizes(channels, rows, cols, newRows, newCols);
  auto clampIndex = [](int64_t i, int64_t n) { return std::min(std::max(i, int64_t(0)), n - 1); };
  for (int64_t c = 0; c < channels; ++c) {
    const float *plane = src + c * rows * cols;
    float *out = dst + c * newRows * newCols;
    for (int64_t i = 0; i < newRows; ++i) {
      const float y = sourceCoordinate(i, rows, newRows);
      const auto y0 = static_cast<int64_t>(std::floor(y));
      float wy[4];
      cubicWeights(y - static_cast<float>(y0), wy);
      for (int64_t j = 0; j < newCols; ++j) {
        const float x = sourceCoordinate(j, cols, newCols);
        const auto x0 = static_cast<int64_t>(std::floor(x));
        float wx[4];
        cubicWeights(x - static_cast<float>(x0), wx);
        float rowsSum[4];
        for (int k = 0; k < 4; ++k) {
          const float *row = plane + clampIndex(y0 - 1 + k, rows) * cols;
          rowsSum[k] = 0;
          for (int m = 0; m < 4; ++m)
            rowsSum[k] += wx[m] * row[clampIndex(x0 - 1 + m, cols)];
        }
        float v = 0;
        for (int k = 0; k < 4; ++k)
          v += wy[k] * rowsSum[k];
        out[i * newCols + j] = v;
      }
    }
  }
}

PositionTableLayout positionTableLayout(int64_t tokens) {
  auto squareSide = [](int64_t n) -> int64_t {
    if (n < 1)
      return 0;
    auto s = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
    return s * s == n ? s : 0;
  };
  if (int64_t side = squareSide(tokens - 1))
    return {1, side};
  if (int64_t side = squareSide(tokens))
    return {0, side};
  return {};
}

std::vector<float> resizePositionTable(const std::vector<float> &table, int64_t tokens, int64_t dim,
                                       int64_t newTokens) {
  const PositionTableLayout from = positionTableLayout(tokens);
  const PositionTableLayout to = positionTableLayout(newTokens);
  if (from.side == 0 || to.side == 0 || from.special != to.special)
    throw Error(fmt::format("a position table of {} rows cannot be resized to {} rows: each must "
                            "be a square grid of patches, after one class-token row or none, "
                            "the same in both",
                            tokens, newTokens));
  if (dim < 1 || static_cast<int64_t>(table.size()) != tokens * dim)
    throw Error(fmt::format("a position table of {} x {} holds {} values", tokens, dim,
                            table.size()));
  const int64_t special = from.special;
  std::vector<float> out(static_cast<size_t>(newTokens * dim));
  std::copy(table.begin(), table.begin() + special * dim, out.begin());
  // Rows are tokens, columns features: the grid resize wants a plane per
  // feature, as timm's permute(0, 3, 1, 2) gives it.
  const int64_t cells = from.side * from.side, newCells = to.side * to.side;
  std::vector<float> planes(static_cast<size_t>(dim * cells)), resized(static_cast<size_t>(dim * newCells));
  for (int64_t t = 0; t < cells; ++t)
    for (int64_t d = 0; d < dim; ++d)
      planes[d * cells + t] = table[(special + t) * dim + d];
  resizeBicubic(planes.data(), dim, from.side, from.side, resized.data(), to.side, to.side);
  for (int64_t t = 0; t < newCells; ++t)
    for (int64_t d = 0; d < dim; ++d)
      out[(special + t) * dim + d] = resized[d * newCells + t];
  return out;
}

DataSet DataSet::withTestImagesResized(int64_t rows, int64_t cols) const {
  if (text_)
    throw Error("only images can be resized; this data set is text");
  DataSet set;
  set.channels_ = channels_;
  set.rows_ = rows;
  set.cols_ = cols;
  const int64_t image = channels_ * rows_ * cols_, newImage = channels_ * rows * cols;
  const auto count = static_cast<int64_t>(test_.labels.size());
  set.test_.labels = test_.labels;
  set.test_.f32.resize(static_cast<size_t>(count * newImage));
  std::vector<float> pixels(static_cast<size_t>(image));
  for (int64_t i = 0; i < count; ++i) {
    // As a batch would feed it: u8 pixels / 255, f32 pixels as they are.
    test_.imageAsF32(uint64_t(i), uint64_t(image), pixels.data());
    resizeBilinear(pixels.data(), channels_, rows_, cols_, set.test_.f32.data() + i * newImage, rows,
                   cols);
  }
  return set;
}

} // namespace stringrt
