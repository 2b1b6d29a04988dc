// ZeRO-1 on GPU ranks (DeviceOptions::zeroStage 1; docs/distributed.md,
// "ZeRO-1 on GPUs"): rank r holds the optimizer's moments of its slice of
// the flat buffers only (deviceZeroSlices: equal slices, the buffers padded
// with zeros, as NCCL's reduce-scatter and all-gather need one count for
// every rank). A step: the backward and the weighting of its gradients as
// without (DeviceRankStep.cpp, not overlapped), then
//
// 1. ncclReduceScatter of the whole padded gradient buffer, in place: rank r
//    has the summed gradients of its slice (the all-reduce's sums there);
// 2. pe_sumsq_partials over the slice into the rank's own run of partials,
//    and ncclAllGather of every rank's partials, so that
//    pe_optimizer_scalars adds them all (in f64, in rank order): the same
//    global norm, clipping factor and learning rate on every rank;
// 3. AdamW or SGD on the trainable runs inside the slice, the moments at
//    their offset in it;
// 4. ncclAllGather of the parameters, in place: every rank has them whole
//    for the next forward; then the EMA of the weights (kept whole) and the
//    bf16 copy of a bf16 package, over the whole buffer.
//
// The state goes in and out whole (setState, getState): each rank uploads
// its slice of the checkpoint's, and a checkpoint all-gathers the slices
// (the gradient buffer is the room, free between steps).
#include "DeviceModelImpl.h"

#include <algorithm>

namespace stringrt::cuda {

std::vector<Arena *> DeviceModel::Impl::shardedArenas() const {
  std::vector<Arena *> arenas = {moment1.get()};
  if (adamw())
    arenas.push_back(moment2.get());
  return arenas;
}

void DeviceModel::Impl::shardState(int rank, int ranks) {
  if (!buffers.empty() || !accumulated.empty() || !rankSteps.empty())
    throw Error("device executor: ZeRO-1 must be set up before any program runs");
  if (options.bucketBytes != 0)
    throw Error("device executor: ZeRO-1 reduce-scatters the gradients in one call after the "
                "backward, not in all-reduce buckets (bucketBytes)");
  options.overlapAllReduce = false; // (the reduce-scatter follows the backward)
  shard = deviceZeroSlices(total, ranks);
  shardBegin = int64_t(rank) * shard.floats;
  zero = true;
  sync("sharding the optimizer state");
  const uint64_t padded = uint64_t(shard.padded) * 4, slice = uint64_t(shard.floats) * 4;
  // The parameters, padded with zeros (the all-gather writes the padding
  // too: every rank's slice, whole).
  std::unique_ptr<Arena> whole = newArena(padded);
  zeroOnDevice(whole->at(0, padded), uint64_t(shard.padded), "padding the parameters");
  if (total > 0)
    copyOnDevice(whole->at(0, uint64_t(total) * 4), params->at(0, uint64_t(total) * 4),
                 uint64_t(total) * 4, "padding the parameters");
  sync("padding the parameters");
  params = std::move(whole);
  grads = newArena(padded);
  zeroOnDevice(grads->at(0, padded), uint64_t(shard.padded), "padding the gradients");
  // The moments of the slice alone (setState uploads them).
  moment1.reset();
  moment2.reset();
  moment1 = newArena(slice);
  if (adamw())
    moment2 = newArena(slice);
  for (Arena *arena : shardedArenas())
    zeroOnDevice(arena->at(0, slice), uint64_t(shard.floats), "zeroing the optimizer state");
  // Room for every rank's partials of the norm.
  partials = newArena(uint64_t(ranks) * kMaxPartials * 4);
  sync("sharding the optimizer state");
}

void DeviceModel::Impl::enqueueShardOptimizer(uint64_t loss) {
  const int ranksCount = ranks->size();
  const int64_t blocks = partialBlocks(shard.floats); // the same on every rank
  const uint64_t mine = uint64_t(ranks->rank()) * uint64_t(blocks) * 4;
  const uint64_t slice = uint64_t(shard.floats) * 4, padded = uint64_t(shard.padded) * 4;
  kernels->launch("pe_sumsq_partials",
                  {KernelArg::pointer(partials->at(mine, uint64_t(blocks) * 4)),
                   KernelArg::pointer(grads->at(uint64_t(shardBegin) * 4, slice)),
                   KernelArg::integer(shard.floats)},
                  "the gradient norm of this rank's slice", nullptr, stream);
  checkLaunch("the gradient norm (kernel pe_sumsq_partials)");
  const int64_t all = blocks * ranksCount;
  ranks->allGather(partials->at(mine, uint64_t(blocks) * 4),
                   partials->at(0, uint64_t(all) * 4), blocks, stream,
                   "the gradient norm's partial sums (ZeRO-1 all-gather)");
  const std::array<int64_t, 3> oneBlock = {1, 1, 1};
  kernels->launch("pe_optimizer_scalars",
                  {KernelArg::pointer(control->address()),
                   KernelArg::pointer(partials->at(0, uint64_t(all) * 4)),
                   KernelArg::integer(all), KernelArg::pointer(loss)},
                  "the optimizer's scalars", &oneBlock, stream);
  checkLaunch("the optimizer's scalars (kernel pe_optimizer_scalars)");
  // The trainable runs inside [shardBegin, shardBegin + floats).
  const size_t begin = size_t(shardBegin), end = begin + size_t(shard.floats);
  forTrainableRuns([&](size_t from, size_t n) {
    const size_t lo = std::max(from, begin), hi = std::min(from + n, end);
    if (lo < hi)
      launchUpdate(lo, hi - lo, lo - begin, false); // (the bf16 copy: whole, below)
  });
  checkLaunch(adamw() ? "the optimizer (kernel pe_adamw)" : "the optimizer (kernel pe_sgd)");
  ranks->allGather(params->at(uint64_t(shardBegin) * 4, slice), params->at(0, padded),
                   shard.floats, stream, "the updated parameters (ZeRO-1 all-gather)");
  launchEma();
  refreshBf16Params("the bf16 copy of the parameters");
}

void DeviceModel::Impl::uploadShard(Arena &arena, const float *packed, const char *what) {
  const std::vector<float> whole = toDeviceLayout(packed);
  std::vector<float> slice(size_t(shard.floats), 0.0f);
  const int64_t end = std::min<int64_t>(total, shardBegin + shard.floats);
  if (shardBegin < end)
    std::copy(whole.begin() + shardBegin, whole.begin() + end, slice.begin());
  arena.upload(0, slice.data(), slice.size() * 4, what);
}

void DeviceModel::Impl::gatherShards(const Arena &arena, float *packed, const char *what) {
  const uint64_t slice = uint64_t(shard.floats) * 4, padded = uint64_t(shard.padded) * 4;
  ranks->allGather(arena.at(0, slice), grads->at(0, padded), shard.floats, stream, what);
  sync(what);
  ranks->checkAsync(what);
  downloadFlat(*grads, packed, what);
}

} // namespace stringrt::cuda
