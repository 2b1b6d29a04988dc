// The GPU ranks' all-reduce buckets (stringrt/cuda/GradientBuckets.h): the
// cut (DDP's: whole parameters in reverse layout order, caps, the padding
// covered), the launch order (the backward's order of production) and when
// the walk of @gradients has written each value (a kernel group's members at
// their group's launch). No GPU: tests/distributed/test_gpu_ranks.py's
// `overlap` mode runs the plan on the emulated ranks.
#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cuda/GradientBuckets.h"
#include "stringrt/cuda/StepBinding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace stringrt::test {
namespace {

using cuda::GradientBucket;
using cuda::planGradientBuckets;

OptimizerSlot slot(const char *name, size_t offset, size_t size) {
  OptimizerSlot s;
  s.name = name;
  s.offset = offset;
  s.size = size;
  return s;
}

// The buckets cover [0, total) once each, with no gap.
void expectCover(std::vector<GradientBucket> buckets, int64_t total) {
  std::sort(buckets.begin(), buckets.end(),
            [](const GradientBucket &a, const GradientBucket &b) { return a.begin < b.begin; });
  int64_t at = 0;
  for (const GradientBucket &b : buckets) {
    EXPECT_EQ(b.begin, at);
    EXPECT_GT(b.floats, 0);
    at = b.begin + b.floats;
  }
  EXPECT_EQ(at, total);
}

TEST(GradientBuckets, CutInReverseLayoutOrderAtTheCapsAndLaunchedByReadiness) {
  // a [0, 100), frozen [128, 178), c [192, 492), d [512, 522); 576 floats.
  std::vector<OptimizerSlot> slots = {slot("a", 0, 100), slot("frozen", 128, 50),
                                      slot("c", 192, 300), slot("d", 512, 10)};
  // d and c fill the first bucket (310 >= 200 floats); a and the frozen
  // parameter (no gradient) the second, ready when a is.
  std::vector<GradientBucket> buckets = planGradientBuckets(slots, {9, -1, 5, 2}, 576, 200, 200);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].begin, 192);
  EXPECT_EQ(buckets[0].floats, 576 - 192); // d's padding up to the end included
  EXPECT_EQ(buckets[0].gradients, 2);
  EXPECT_EQ(buckets[0].readyOp, 5); // c's, the later of c and d
  EXPECT_EQ(buckets[1].begin, 0);
  EXPECT_EQ(buckets[1].floats, 192);
  EXPECT_EQ(buckets[1].gradients, 1);
  EXPECT_EQ(buckets[1].readyOp, 9);
  expectCover(buckets, 576);

  // The first cap is the first bucket's alone: 10 >= 10 closes d's; the
  // rest stay under 1000.
  buckets = planGradientBuckets(slots, {9, -1, 5, 2}, 576, 10, 1000);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].begin, 512);
  EXPECT_EQ(buckets[0].readyOp, 2);
  EXPECT_EQ(buckets[1].begin, 0);
  EXPECT_EQ(buckets[1].gradients, 2);
  EXPECT_EQ(buckets[1].readyOp, 9);
  expectCover(buckets, 576);
}

TEST(GradientBuckets, LaunchOrderIsTheOrderOfProductionNotOfTheLayout) {
  std::vector<OptimizerSlot> slots = {slot("a", 0, 64), slot("b", 64, 64), slot("c", 128, 64),
                                      slot("d", 192, 64)};
  // One parameter a bucket; produced b, d, a, c.
  std::vector<GradientBucket> buckets = planGradientBuckets(slots, {7, 1, 9, 4}, 256, 1, 1);
  std::vector<int64_t> begins, ready;
  for (const GradientBucket &b : buckets) {
    begins.push_back(b.begin);
    ready.push_back(b.readyOp);
  }
  EXPECT_EQ(begins, (std::vector<int64_t>{64, 192, 0, 128}));
  EXPECT_EQ(ready, (std::vector<int64_t>{1, 4, 7, 9}));
  expectCover(buckets, 256);
}

TEST(GradientBuckets, GradientlessRangesJoinANeighbourAndNothingIsLeftOut) {
  // The last and the first parameters frozen: their floats join the
  // buckets next to them.
  std::vector<OptimizerSlot> slots = {slot("frozen0", 0, 64), slot("a", 64, 64),
                                      slot("b", 128, 64), slot("frozen1", 192, 64)};
  std::vector<GradientBucket> buckets = planGradientBuckets(slots, {-1, 3, 2, -1}, 256, 1, 1);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].begin, 128);
  EXPECT_EQ(buckets[0].floats, 128);
  EXPECT_EQ(buckets[1].begin, 0);
  EXPECT_EQ(buckets[1].floats, 128);
  // No gradient at all: one bucket of zeros, ready before the walk.
  buckets = planGradientBuckets(slots, {-1, -1, -1, -1}, 256, 1, 1);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].floats, 256);
  EXPECT_EQ(buckets[0].readyOp, -1);
  EXPECT_TRUE(planGradientBuckets({}, {}, 0).empty());
}

TEST(GradientBuckets, RefusesSlotsOutOfOrderOrOutsideTheBuffer) {
  std::vector<OptimizerSlot> overlapping = {slot("a", 0, 100), slot("b", 64, 64)};
  EXPECT_THROW(planGradientBuckets(overlapping, {1, 2}, 256), Error);
  std::vector<OptimizerSlot> past = {slot("a", 0, 300)};
  EXPECT_THROW(planGradientBuckets(past, {1}, 256), Error);
  EXPECT_THROW(planGradientBuckets(past, {1, 2}, 512), Error);
  EXPECT_THROW(planGradientBuckets(past, {1}, 512, 0, 1), Error);
}

const char *packageIn(const char *variable) {
  const char *path = std::getenv(variable);
  return path && *path && std::filesystem::exists(path) ? path : nullptr;
}

// valueFinalOps of @gradients: each value's producer, except a kernel or GEMM
// group's later members, which their group's first member computes.
void expectFinalOps(const char *path, bool expectGroupMembers) {
  Package package = Package::load(path);
  const Program &p = package.manifest().gradients;
  const CudaProgramSteps &steps = *package.cuda()->stepsOf("gradients");
  std::vector<int64_t> final = cuda::valueFinalOps(p, steps);
  ASSERT_EQ(final.size(), p.values.size());
  std::vector<int64_t> leaderOf(p.ops.size(), -1);
  for (size_t s = 0; s < steps.ops.size();) {
    const int64_t n = cuda::stepsComputedBy(steps.ops[s]);
    for (size_t m = s; m < s + size_t(n); ++m)
      leaderOf[size_t(steps.ops[m].op)] = steps.ops[s].op;
    s += size_t(n);
  }
  int64_t earlier = 0; // gradient outputs written before their own op
  for (const ProgramOutput &out : p.outputs) {
    int64_t producer = -1;
    for (size_t i = 0; i < p.ops.size(); ++i)
      for (ValueId r : p.ops[i].results)
        if (r == out.value)
          producer = int64_t(i);
    ASSERT_GE(producer, 0) << out.key();
    const int64_t expected =
        leaderOf[size_t(producer)] >= 0 ? leaderOf[size_t(producer)] : producer;
    EXPECT_EQ(final[size_t(out.value)], expected) << out.key();
    if (out.isGrad() && final[size_t(out.value)] < producer)
      ++earlier;
  }
  if (expectGroupMembers)
    EXPECT_GT(earlier, 0) << "no gradient of a group's later member";
  for (ValueId v : p.inputs)
    EXPECT_EQ(final[size_t(v)], -1);
}

// ZeRO-1's overlapped sums: every bucket cut at the slices' boundaries, the
// pieces in the buckets' launch order with their readiness; no piece spans
// two slices and together they are the buckets.
TEST(GradientBuckets, ZeroSplitsTheBucketsAtTheSlices) {
  const std::vector<cuda::GradientBucket> buckets = {{128, 200, 2, 3}, {0, 128, 1, 7}};
  const std::vector<cuda::GradientBucket> pieces = cuda::splitGradientBuckets(buckets, 64);
  const std::vector<std::array<int64_t, 4>> want = {
      {128, 64, 2, 3}, {192, 64, 2, 3}, {256, 64, 2, 3}, {320, 8, 2, 3},
      {0, 64, 1, 7},   {64, 64, 1, 7}};
  ASSERT_EQ(pieces.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(pieces[i].begin, want[i][0]) << i;
    EXPECT_EQ(pieces[i].floats, want[i][1]) << i;
    EXPECT_EQ(pieces[i].gradients, want[i][2]) << i;
    EXPECT_EQ(pieces[i].readyOp, want[i][3]) << i;
  }
  // A slice larger than every bucket leaves them whole, but at its boundary.
  EXPECT_EQ(cuda::splitGradientBuckets(buckets, 256).size(), 3u);
  EXPECT_THROW(cuda::splitGradientBuckets(buckets, 0), Error);
}

TEST(GradientBuckets, FinalOpsAreTheProducersOrTheirGroupsLaunch) {
  const char *vit = packageIn("STRINGRT_CUDA_VIT_PACKAGE");
  const char *cayley = packageIn("STRINGRT_CUDA_CAYLEY_PACKAGE");
  if (!vit || !cayley)
    GTEST_SKIP() << "STRINGRT_CUDA_VIT_PACKAGE and STRINGRT_CUDA_CAYLEY_PACKAGE name no packages";
  expectFinalOps(vit, false);
  // vit_cayley's skew gradients are kernel groups (pe-cluster-cayley).
  expectFinalOps(cayley, true);
}

TEST(GradientBuckets, VitRopesBucketsFollowItsBackward) {
  const char *path = packageIn("STRINGRT_CUDA_VIT_PACKAGE");
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_VIT_PACKAGE names no package";
  Package package = Package::load(path);
  const Manifest &manifest = package.manifest();
  const Program &p = manifest.gradients;
  std::vector<int64_t> final = cuda::valueFinalOps(p, *package.cuda()->stepsOf("gradients"));
  cuda::DeviceParamLayout layout = cuda::deviceParameterLayout(manifest);
  std::vector<OptimizerSlot> slots;
  std::vector<int64_t> ready;
  for (size_t i = 0; i < manifest.params.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : manifest.params[i].shape)
      n *= d;
    slots.push_back(slot(manifest.params[i].name.c_str(), size_t(layout.offsets[i]), size_t(n)));
    ready.push_back(-1);
    for (const ProgramOutput &out : p.outputs)
      if (out.grad == manifest.params[i].name)
        ready.back() = final[size_t(out.value)];
  }
  // With DDP's caps vit_rope's 0.5 MB of gradients are one bucket, ready
  // when the backward's last gradient is.
  std::vector<GradientBucket> one = planGradientBuckets(slots, ready, layout.total);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].readyOp, *std::max_element(ready.begin(), ready.end()));
  // With 4 KiB ones (the distributed test's --bucket-kib 4), several, in
  // the order the backward completes them, the first well before its end.
  std::vector<GradientBucket> small = planGradientBuckets(slots, ready, layout.total, 1024, 1024);
  ASSERT_GT(small.size(), 8u);
  expectCover(small, layout.total);
  for (size_t k = 1; k < small.size(); ++k)
    EXPECT_LE(small[k - 1].readyOp, small[k].readyOp);
  std::set<int64_t> distinct;
  for (const GradientBucket &b : small)
    distinct.insert(b.readyOp);
  EXPECT_GE(distinct.size(), 4u) << "the buckets are not spread over the backward";
  EXPECT_LT(small.front().readyOp, small.back().readyOp);
}

} // namespace
} // namespace stringrt::test
