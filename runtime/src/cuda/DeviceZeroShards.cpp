// ZeRO-1 on GPU ranks (DeviceOptions::zeroStage 1; docs/distributed.md,
// "ZeRO-1 on GPUs"): rank r holds the optimizer's moments of its slice of
// the flat buffers only (deviceZeroSlices: equal slices, the buffers padded
// with zeros, as NCCL's reduce-scatter and all-gather need one count for
// every rank). A step: the backward and the weighting of its gradients as
// without (DeviceRankStep.cpp), then
//
// 1. the sums: overlapped with the backward (DeviceOptions::overlapAllReduce),
//    the all-reduce's buckets cut at the slices' boundaries
//    (splitGradientBuckets), each summed on its slice's owner alone
//    (ncclReduce) on the all-reduce's stream as soon as the backward has
//    finished it; else, after the backward, ncclReduceScatter of the whole
//    padded gradient buffer, in place. Either way rank r has the summed
//    gradients of its slice (the all-reduce's sums there);
// 2. pe_sumsq_partials over the slice into the rank's own run of partials,
//    and ncclAllGather of every rank's partials, so that
//    pe_optimizer_scalars adds them all (in f64, in rank order): the same
//    global norm, clipping factor and learning rate on every rank;
// 3. AdamW or SGD on the trainable runs inside the slice, the moments at
//    their offset in it;
// 4. an fp32 package: ncclAllGather of the parameters, in place: every rank
//    has them whole for the next forward; then the EMA of the weights (kept
//    whole). A bf16 package (a bf16 copy of the parameters: its GEMMs read
//    that) shards the f32 master weights and the EMA too: the update and the
//    EMA of the slice, the slice's bf16 copy (AdamW writes it as it
//    updates), ncclAllGather of the bf16 copy in place (half the f32
//    all-gather's bytes), and of the few parameters other kernels read in
//    f32 (ZeroMasterShards.h: packed, all-gathered, unpacked).
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
  if (shardMasters && keepsEma())
    arenas.push_back(ema.get());
  return arenas;
}

void DeviceModel::Impl::shardState(int rank, int ranks) {
  if (!buffers.empty() || !accumulated.empty() || !rankSteps.empty())
    throw Error("device executor: ZeRO-1 must be set up before any program runs");
  shard = deviceZeroSlices(total, ranks);
  shardBegin = int64_t(rank) * shard.floats;
  zero = true;
  shardMasters = paramsBf16 != nullptr;
  sync("sharding the optimizer state");
  const uint64_t padded = uint64_t(shard.padded) * 4, slice = uint64_t(shard.floats) * 4;
  // This rank's floats of the whole buffers: [shardBegin, inTotal).
  const int64_t inTotal = std::min<int64_t>(total, shardBegin + shard.floats);
  // A new arena of shard.padded elements of `elementBytes` (2: bf16, 4:
  // f32): zeros, then the first `total` elements of `from` (an all-gather
  // writes every rank's slice, the padding included).
  auto paddedCopy = [&](const Arena &from, uint64_t elementBytes, const char *what) {
    const uint64_t bytes = uint64_t(shard.padded) * elementBytes;
    std::unique_ptr<Arena> to = newArena(bytes);
    zeroOnDevice(to->at(0, bytes), bytes / 4, what);
    if (total > 0)
      copyOnDevice(to->at(0, uint64_t(total) * elementBytes),
                   from.at(0, uint64_t(total) * elementBytes), uint64_t(total) * elementBytes,
                   what);
    return to;
  };
  auto copySlice = [&](const Arena &to, const Arena &from, const char *what) {
    zeroOnDevice(to.at(0, slice), uint64_t(shard.floats), what);
    if (shardBegin < inTotal)
      copyOnDevice(to.at(0, uint64_t(inTotal - shardBegin) * 4),
                   from.at(uint64_t(shardBegin) * 4, uint64_t(inTotal - shardBegin) * 4),
                   uint64_t(inTotal - shardBegin) * 4, what);
  };
  if (shardMasters) {
    // The master weights of the slice; the parameters read in f32, packed;
    // the bf16 copy, padded (the all-gather writes every rank's slice).
    masters = newArena(slice);
    copySlice(*masters, *params, "sharding the master weights");
    f32Params = deviceF32Params(manifest, section, ranks);
    std::unique_ptr<Arena> readF32 = newArena(uint64_t(f32Params.floats) * 4);
    f32ParamAt.clear();
    for (size_t i = 0; i < slots.size(); ++i) {
      const int64_t at = f32Params.offsets.at(i);
      if (at < 0)
        continue;
      f32ParamAt[slots[i].offset * 4] = uint64_t(at) * 4;
      if (slots[i].size > 0)
        copyOnDevice(readF32->at(uint64_t(at) * 4, slots[i].size * 4),
                     params->at(slots[i].offset * 4, slots[i].size * 4), slots[i].size * 4,
                     "packing the parameters read in f32");
    }
    f32Staging = newArena(uint64_t(ranks) * uint64_t(f32Params.rankFloats) * 4);
    std::unique_ptr<Arena> bf16 = paddedCopy(*paramsBf16, 2, "padding the bf16 copy");
    if (keepsEma()) { // the slice alone, never the whole (setState uploads it)
      ema = newArena(slice);
      zeroOnDevice(ema->at(0, slice), uint64_t(shard.floats), "sharding the EMA of the weights");
    }
    sync("sharding the master weights");
    params = std::move(readF32);
    paramsBf16 = std::move(bf16);
  } else {
    // The parameters, padded with zeros (the all-gather writes the padding
    // too: every rank's slice, whole).
    std::unique_ptr<Arena> whole = paddedCopy(*params, 4, "padding the parameters");
    sync("padding the parameters");
    params = std::move(whole);
  }
  grads = newArena(padded);
  zeroOnDevice(grads->at(0, padded), uint64_t(shard.padded), "padding the gradients");
  // The moments of the slice alone (setState uploads them).
  moment1.reset();
  moment2.reset();
  moment1 = newArena(slice);
  if (adamw())
    moment2 = newArena(slice);
  for (Arena *arena : {moment1.get(), moment2.get()})
    if (arena)
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
  // The trainable runs inside [shardBegin, shardBegin + floats); with
  // sharded masters AdamW writes the slice's bf16 copy as it updates.
  const bool writesBf16 = shardMasters && adamWritesBf16();
  forTrainableSliceRuns([&](size_t lo, size_t n) {
    launchUpdate(lo, n, lo - size_t(shardBegin), writesBf16);
  });
  checkLaunch(adamw() ? "the optimizer (kernel pe_adamw)" : "the optimizer (kernel pe_sgd)");
  if (shardMasters) {
    launchEma(); // (of the slice)
    publishMasters(writesBf16, "the updated parameters");
    return;
  }
  ranks->allGather(params->at(uint64_t(shardBegin) * 4, slice), params->at(0, padded),
                   shard.floats, stream, "the updated parameters (ZeRO-1 all-gather)");
  launchEma();
  refreshBf16Params("the bf16 copy of the parameters");
}

void DeviceModel::Impl::publishMasters(bool bf16Written, const char *what) {
  const int64_t floats = shard.floats; // a multiple of 64: the bf16 slice is f32 words
  const uint64_t bf16Slice = uint64_t(floats) * 2, bf16Padded = uint64_t(shard.padded) * 2;
  if (!bf16Written)
    kernels->launch(kBf16ParamsKernel,
                    {KernelArg::pointer(paramsBf16->at(uint64_t(shardBegin) * 2, bf16Slice)),
                     KernelArg::pointer(masters->at(0, uint64_t(floats) * 4)),
                     KernelArg::integer(floats), KernelArg::integer(floats)},
                    fmt::format("{}: the bf16 copy of this rank's slice", what), nullptr,
                    stream);
  // (An all-gather moves bytes and adds nothing: the bf16 pairs travel as
  // f32 words, half the count.)
  ranks->allGather(paramsBf16->at(uint64_t(shardBegin) * 2, bf16Slice),
                   paramsBf16->at(0, bf16Padded), floats / 2, stream,
                   fmt::format("{}: the bf16 copy (ZeRO-1 all-gather)", what));
  if (f32Params.floats == 0)
    return;
  const int me = ranks->rank();
  const int64_t part = f32Params.rankFloats;
  for (const DeviceF32Params::Piece &piece : f32Params.pieces)
    if (piece.rank == me)
      copyOnDevice(f32Staging->at(uint64_t(piece.staged) * 4, uint64_t(piece.floats) * 4),
                   masters->at(uint64_t(piece.layout - shardBegin) * 4,
                               uint64_t(piece.floats) * 4),
                   uint64_t(piece.floats) * 4, what);
  ranks->allGather(f32Staging->at(uint64_t(me) * uint64_t(part) * 4, uint64_t(part) * 4),
                   f32Staging->at(0, uint64_t(ranks->size()) * uint64_t(part) * 4), part, stream,
                   fmt::format("{}: those read in f32 (ZeRO-1 all-gather)", what));
  for (const DeviceF32Params::Piece &piece : f32Params.pieces)
    copyOnDevice(params->at(uint64_t(piece.packed) * 4, uint64_t(piece.floats) * 4),
                 f32Staging->at(uint64_t(piece.staged) * 4, uint64_t(piece.floats) * 4),
                 uint64_t(piece.floats) * 4, what);
}

EvalResult DeviceModel::Impl::evaluateShardedEma(const std::function<EvalResult()> &evaluate) {
  auto each = [&](const std::function<void(uint64_t, uint64_t, uint64_t)> &copy) {
    forTrainableSliceRuns([&](size_t lo, size_t n) {
      copy(uint64_t(lo) * 4, uint64_t(lo - size_t(shardBegin)) * 4, uint64_t(n) * 4);
    });
  };
  auto weightsBack = [&] {
    each([&](uint64_t whole, uint64_t at, uint64_t bytes) {
      copyOnDevice(masters->at(at, bytes), grads->at(whole, bytes), bytes,
                   "putting the weights back");
    });
  };
  each([&](uint64_t whole, uint64_t at, uint64_t bytes) {
    copyOnDevice(grads->at(whole, bytes), masters->at(at, bytes), bytes,
                 "keeping the weights aside");
    copyOnDevice(masters->at(at, bytes), ema->at(at, bytes), bytes,
                 "putting the EMA in place of the weights");
  });
  publishMasters(false, "putting the EMA in place of the weights");
  EvalResult result;
  try {
    result = evaluate();
  } catch (...) {
    weightsBack(); // (not published: no collective on the way out of an error)
    throw;
  }
  weightsBack();
  publishMasters(false, "putting the weights back");
  result.ema = true;
  return result;
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
