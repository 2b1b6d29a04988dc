// The buckets of a data-parallel GPU rank's gradient all-reduce and when the
// backward lets each start (docs/distributed.md, "GPUs"): the plan the rank
// step (runtime/src/cuda/DeviceRankStep.cpp) follows to launch each bucket's
// ncclAllReduce on a second stream as soon as its last gradient is final,
// overlapped with the rest of the backward. Pure functions of the package
// and the device layout (no device).
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/Manifest.h"
#include "stringrt/Optimizer.h"

#include <cstdint>
#include <vector>

namespace stringrt::cuda {

/// How many entries of a program's steps `entry`'s launch computes: a kernel
/// group's or a GEMM group's size on its first member (the loader checked
/// them: CudaLaunch::groupSize, CudaGemm::groupSize), 1 otherwise. The
/// device walk runs the group there and skips the other members' steps.
int64_t stepsComputedBy(const CudaOpSteps &entry);

/// For each value of `program` (by ValueId), the index of the op after which
/// the device walk of its steps (`steps`) has written it for the last time:
/// its producer's, or, for a member of a kernel or GEMM group, the group's
/// first member's (which computes every member); -1 for values no op writes
/// (inputs). Values are SSA: an op's result is written by that op alone.
std::vector<int64_t> valueFinalOps(const Program &program, const CudaProgramSteps &steps);

/// One all-reduce of the flat gradient buffer: floats [begin, begin + floats)
/// of the device layout, the padding between its parameters included.
struct GradientBucket {
  int64_t begin = 0, floats = 0;
  int64_t gradients = 0; // the gradient outputs in it
  int64_t readyOp = -1;  // the op of @gradients after which all of them are final
                         // (valueFinalOps); -1: none (zeros from the start)
};

/// PyTorch DDP's caps: the first bucket (the last parameters, whose
/// gradients the backward produces first) 1 MiB, the others 25 MiB. The
/// launch report's scaling prediction models the same buckets
/// (compiler/include/stringc/CudaGen/ScalingReport.h).
inline constexpr int64_t kFirstBucketFloats = int64_t(1) << 18;
inline constexpr int64_t kBucketFloats = int64_t(25) << 18;

/// The buckets of the flat gradient buffer of `total` floats holding
/// `slots` (the device layout: increasing offsets), where slot s's gradient
/// is final after op `readyOps[s]` (-1: the slot has no gradient output, its
/// floats stay zero). Cut as DDP cuts them: whole parameters in reverse
/// layout order, a bucket closed once its gradients reach `firstFloats` (the
/// first) or `floats` (the rest); a bucket's range also covers the padding
/// and gradient-less slots up to the next bucket, so that the buckets cover
/// [0, total) exactly, and a range without gradients joins its neighbour.
/// Returned in the order to launch them: by readyOp (the backward's order of
/// production), ties in cutting order. Throws Error for slots out of order
/// or outside the buffer, or caps below 1.
std::vector<GradientBucket> planGradientBuckets(const std::vector<OptimizerSlot> &slots,
                                                const std::vector<int64_t> &readyOps,
                                                int64_t total,
                                                int64_t firstFloats = kFirstBucketFloats,
                                                int64_t floats = kBucketFloats);

/// ZeRO-1 with the reduce-scatter overlapped (DeviceRankStep.cpp): each
/// bucket cut at the boundaries of the ranks' slices of `sliceFloats`
/// (deviceZeroSlices), so that every piece is summed on the one rank that
/// owns it (ncclReduce; DeepSpeed's ZeRO-1 and 2 reduce their buckets to
/// the partitions' owners alike). The pieces keep their bucket's readyOp
/// and launch order (a piece's `gradients`: its bucket's); throws Error for
/// a slice below 1 float.
std::vector<GradientBucket> splitGradientBuckets(const std::vector<GradientBucket> &buckets,
                                                 int64_t sliceFloats);

} // namespace stringrt::cuda
