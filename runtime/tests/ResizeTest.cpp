// The resizes of stringrt/Resize.h: identities and hand-computed cases here;
// tests/oracle/test_resize.py compares them with torch's F.interpolate.
#include "stringrt/Resize.h"

#include "stringrt/Data.h"
#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <numeric>

namespace stringrt {
namespace {

TEST(Resize, TheSameSizeIsTheIdentityBitForBit) {
  std::vector<float> image(2 * 3 * 5);
  for (size_t i = 0; i < image.size(); ++i)
    image[i] = 0.1f * static_cast<float>(i * 7 % 11) - 0.3f;
  std::vector<float> out(image.size());
  resizeBilinear(image.data(), 2, 3, 5, out.data(), 3, 5);
  EXPECT_EQ(out, image);
  resizeBicubic(image.data(), 2, 3, 5, out.data(), 3, 5);
  for (size_t i = 0; i < image.size(); ++i)
    EXPECT_NEAR(out[i], image[i], 1e-6) << i;
}

TEST(Resize, BilinearAsTorchWithoutAlignedCorners) {
  // torch.nn.functional.interpolate(x, size=(4, 4), mode="bilinear",
  // align_corners=False) of [[0, 1], [2, 3]]: samples at -0.25 (clamped to
  // 0), 0.25, 0.75 and 1.25 (its upper neighbour clamped) on each axis.
  const float in[4] = {0, 1, 2, 3};
  float out[16];
  resizeBilinear(in, 1, 2, 2, out, 4, 4);
  const float want[16] = {0, 0.25f, 0.75f, 1, 0.5f, 0.75f, 1.25f, 1.5f,
                          1.5f, 1.75f, 2.25f, 2.5f, 2, 2.25f, 2.75f, 3};
  for (int i = 0; i < 16; ++i)
    EXPECT_FLOAT_EQ(out[i], want[i]) << i;
  // A constant stays constant, either way.
  std::vector<float> flat(9, 0.5f), up(49), down(4);
  resizeBilinear(flat.data(), 1, 3, 3, up.data(), 7, 7);
  resizeBicubic(flat.data(), 1, 3, 3, down.data(), 2, 2);
  for (float v : up)
    EXPECT_FLOAT_EQ(v, 0.5f);
  for (float v : down)
    EXPECT_NEAR(v, 0.5f, 1e-6);
}

TEST(Resize, PositionTablesKeepTheClassRow) {
  EXPECT_EQ(positionTableLayout(50).special, 1);
  EXPECT_EQ(positionTableLayout(50).side, 7);
  EXPECT_EQ(positionTableLayout(49).special, 0);
  EXPECT_EQ(positionTableLayout(49).side, 7);
  EXPECT_EQ(positionTableLayout(7).side, 0);
  // [1 + 2*2, 3] -> [1 + 3*3, 3]: the class row as it was; a table whose
  // features are constant over the grid stays so.
  std::vector<float> table = {9, 8, 7};
  for (int t = 0; t < 4; ++t)
    table.insert(table.end(), {1, 2, 3});
  std::vector<float> out = resizePositionTable(table, 5, 3, 10);
  ASSERT_EQ(out.size(), 30u);
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 3), (std::vector<float>{9, 8, 7}));
  for (int t = 1; t < 10; ++t)
    for (int d = 0; d < 3; ++d)
      EXPECT_NEAR(out[t * 3 + d], 1.0f + d, 1e-5) << t << " " << d; // weights sum to 1 in floats
  EXPECT_THROW(resizePositionTable(table, 5, 3, 9), Error); // 9 = 3*3 without a class row
  EXPECT_THROW(resizePositionTable(table, 5, 3, 7), Error); // no grid at all
}

TEST(Resize, TestImagesOfADataSet) {
  ImageSplit train, test;
  train.u8 = {0, 255, 0, 255};
  train.labels = {1};
  test.u8 = {0, 51, 102, 153, 255, 255, 255, 255};
  test.labels = {0, 1};
  DataSet data = DataSet::images(1, 2, 2, train, test);
  DataSet resized = data.withTestImagesResized(4, 4);
  EXPECT_EQ(resized.count(Split::Train), 0);
  EXPECT_EQ(resized.count(Split::Test), 2);
  EXPECT_EQ(resized.exampleShapes()[0], (std::vector<int64_t>{1, 4, 4}));
  Batch batch = resized.range(Split::Test, 0, 2);
  ASSERT_EQ(batch.tensors[0].f32.size(), 32u);
  // The first image is [[0, 0.2], [0.4, 0.6]] as fed: its corners survive;
  // pixel (1, 1) samples (0.25, 0.25): 0.75 (0.75 * 0 + 0.25 * 0.2) +
  // 0.25 (0.75 * 0.4 + 0.25 * 0.6) = 0.15. The second is constant.
  EXPECT_FLOAT_EQ(batch.tensors[0].f32[0], 0.0f);
  EXPECT_FLOAT_EQ(batch.tensors[0].f32[15], 0.6f);
  EXPECT_NEAR(batch.tensors[0].f32[5], 0.15f, 1e-6);
  for (int p = 16; p < 32; ++p)
    EXPECT_FLOAT_EQ(batch.tensors[0].f32[p], 1.0f);
  EXPECT_EQ(batch.tensors[1].i32, (std::vector<int32_t>{0, 1}));
  // At its own size the images are what a plain batch feeds, bit for bit.
  Batch same = data.withTestImagesResized(2, 2).range(Split::Test, 0, 2);
  EXPECT_EQ(same.tensors[0].f32, data.range(Split::Test, 0, 2).tensors[0].f32);
}

} // namespace
} // namespace stringrt
