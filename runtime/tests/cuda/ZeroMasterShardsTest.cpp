// ZeRO-1 with sharded master weights (ZeroMasterShards.h): which parameters
// stay f32 on every rank, where they are packed, and the pieces each rank
// sends of them. No GPU needed.
#include "TestFiles.h"
#include "TestPackages.h"

#include "stringrt/Package.h"
#include "stringrt/cuda/ZeroMasterShards.h"

#include <gtest/gtest.h>

namespace stringrt::test {
namespace {

using Piece = cuda::DeviceF32Params::Piece;

// The tiny linear model with w [40, 3] (120 floats at 0 of the device
// layout) and b [3] (at 128): 192 floats.
class ZeroMasterShardsTest : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string path = dir.file("tiny.pkg");
    writePackageFile(path, tinyLinearManifest(linearForwardProgram(4, 3)));
    manifest = Package::load(path).manifest();
    manifest.params[0].shape = {40, 3};
    section.steps.push_back({"forward", {}, {}});
    for (const ProgramOp &op : manifest.program("forward").ops)
      if (op.is(OpCode::GetParam) && op.getString("param") == "w")
        wValue = op.results[0];
    ASSERT_GE(wValue, 0);
  }
  TempDir dir;
  Manifest manifest;
  CudaSection section;
  int64_t wValue = -1;
};

void expectPiece(const Piece &p, int rank, int64_t layout, int64_t staged, int64_t packed,
                 int64_t floats) {
  EXPECT_EQ(p.rank, rank);
  EXPECT_EQ(p.layout, layout);
  EXPECT_EQ(p.staged, staged);
  EXPECT_EQ(p.packed, packed);
  EXPECT_EQ(p.floats, floats);
}

// Everything read in f32 (an fp32 package): every parameter packed, w cut
// at the slices' boundaries (3 slices of 64 floats).
TEST_F(ZeroMasterShardsTest, CutsTheF32ParametersAtTheSlices) {
  EXPECT_FALSE(cuda::usesBf16Params(manifest, section));
  const cuda::DeviceF32Params plan = cuda::deviceF32Params(manifest, section, 3);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 128}));
  EXPECT_EQ(plan.floats, 192);
  EXPECT_EQ(plan.rankFloats, 64);
  ASSERT_EQ(plan.pieces.size(), 3u);
  expectPiece(plan.pieces[0], 0, 0, 0, 0, 64);
  expectPiece(plan.pieces[1], 1, 64, 64, 64, 56);
  expectPiece(plan.pieces[2], 2, 128, 128, 128, 3);
}

// w read in bf16 only (a bf16 package's GEMM weight): b alone stays f32,
// sent by rank 1, whose slice (128 floats from 128) holds it.
TEST_F(ZeroMasterShardsTest, KeepsOnlyWhatKernelsReadInF32) {
  section.steps[0].valueDTypes = {{wValue, DType::BF16}};
  EXPECT_TRUE(cuda::usesBf16Params(manifest, section));
  const cuda::DeviceF32Params plan = cuda::deviceF32Params(manifest, section, 2);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{-1, 0}));
  EXPECT_EQ(plan.floats, 64);
  EXPECT_EQ(plan.rankFloats, 64);
  ASSERT_EQ(plan.pieces.size(), 1u);
  expectPiece(plan.pieces[0], 1, 128, 64, 0, 3);
}

} // namespace
} // namespace stringrt::test
