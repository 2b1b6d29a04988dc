// The gradient all-reduce's buckets and when each may start
// (stringrt/cuda/GradientBuckets.h).
#include "stringrt/cuda/GradientBuckets.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace stringrt::cuda {

int64_t stepsComputedBy(const CudaOpSteps &entry) {
  if (entry.launches.size() != 1)
    return 1;
  const CudaLaunch &launch = entry.launches[0];
  if (launch.groupSize > 1)
    return launch.groupSize;
  if (launch.gemm && launch.gemm->groupSize > 1)
    return launch.gemm->groupSize;
  return 1;
}

std::vector<int64_t> valueFinalOps(const Program &program, const CudaProgramSteps &steps) {
  // The op whose place in the walk runs each op's launches.
  std::vector<int64_t> runsAt(program.ops.size());
  std::iota(runsAt.begin(), runsAt.end(), int64_t(0));
  for (size_t s = 0; s < steps.ops.size();) {
    const size_t n = size_t(stepsComputedBy(steps.ops[s]));
    if (s + n > steps.ops.size())
      throw Error(fmt::format("cuda.steps.{}: a group at entry {} runs past the steps",
                              steps.program, s));
    for (size_t m = s; m < s + n; ++m) {
      const int64_t op = steps.ops[m].op;
      if (op < 0 || size_t(op) >= program.ops.size())
        throw Error(fmt::format("cuda.steps.{}: entry {} names op {} of {}", steps.program, m,
                                op, program.ops.size()));
      runsAt[size_t(op)] = steps.ops[s].op;
    }
    s += n;
  }
  std::vector<int64_t> final(program.values.size(), -1);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const ProgramOp &op = program.ops[i];
    if (op.is(OpCode::GetParam)) // a view of the parameters: never written by the walk
      continue;
    for (ValueId r : op.results)
      if (size_t(r) < final.size())
        final[size_t(r)] = runsAt[i];
  }
  return final;
}

std::vector<GradientBucket> planGradientBuckets(const std::vector<OptimizerSlot> &slots,
                                                const std::vector<int64_t> &readyOps,
                                                int64_t total, int64_t firstFloats,
                                                int64_t floats) {
  if (readyOps.size() != slots.size())
    throw Error(fmt::format("gradient buckets: {} ready ops for {} parameters", readyOps.size(),
                            slots.size()));
  if (firstFloats < 1 || floats < 1)
    throw Error(fmt::format("gradient buckets: caps of {} and {} floats", firstFloats, floats));
  std::vector<GradientBucket> cut; // in cutting order: from the end of the layout down
  GradientBucket open;
  int64_t end = total, gradientFloats = 0;
  for (size_t k = slots.size(); k-- > 0;) {
    const OptimizerSlot &slot = slots[k];
    const int64_t offset = int64_t(slot.offset), size = int64_t(slot.size);
    const int64_t limit = k + 1 < slots.size() ? int64_t(slots[k + 1].offset) : total;
    if (offset < 0 || size < 0 || offset + size > limit)
      throw Error(fmt::format("gradient buckets: parameter '{}' at [{}, {}) overlaps the next "
                              "or passes the {} floats of the buffer",
                              slot.name, offset, offset + size, total));
    open.begin = offset;
    if (readyOps[k] >= 0) {
      ++open.gradients;
      gradientFloats += size;
      open.readyOp = std::max(open.readyOp, readyOps[k]);
    }
    if (open.gradients > 0 && gradientFloats >= (cut.empty() ? firstFloats : floats)) {
      open.floats = end - open.begin;
      cut.push_back(open);
      end = open.begin;
      open = {};
      gradientFloats = 0;
    }
  }
  if (end > 0) { // [0, end): the first parameters' bucket, or gradient-less floats
    open.begin = 0;
    open.floats = end;
    if (open.gradients > 0 || cut.empty()) {
      cut.push_back(open);
    } else {
      cut.back().begin = 0;
      cut.back().floats += end;
    }
  }
  std::stable_sort(cut.begin(), cut.end(), [](const GradientBucket &a, const GradientBucket &b) {
    return a.readyOp < b.readyOp;
  });
  return cut;
}

std::vector<GradientBucket> splitGradientBuckets(const std::vector<GradientBucket> &buckets,
                                                 int64_t sliceFloats) {
  if (sliceFloats < 1)
    throw Error(fmt::format("gradient buckets: slices of {} floats", sliceFloats));
  std::vector<GradientBucket> pieces;
  for (const GradientBucket &bucket : buckets)
    for (int64_t at = bucket.begin, end = bucket.begin + bucket.floats; at < end;) {
      const int64_t cut = std::min(end, (at / sliceFloats + 1) * sliceFloats);
      GradientBucket piece = bucket;
      piece.begin = at;
      piece.floats = cut - at;
      pieces.push_back(piece);
      at = cut;
    }
  return pieces;
}

} // namespace stringrt::cuda
