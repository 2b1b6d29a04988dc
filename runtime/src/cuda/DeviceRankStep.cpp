// A data-parallel rank's training step on the device (DeviceExecutor.h,
// joinRanks; DeviceRanks.h): @gradients on this rank's share, its loss and
// gradients weighted by share / global rows, summed across the ranks by
// NCCL, the optimizer. The sums overlap the backward: each bucket of the
// gradient buffer (GradientBuckets.h) is all-reduced on a second stream as
// soon as the walk has written its last gradient, and the step's stream
// waits for the last all-reduce before the optimizer (a fork and a join of
// streams). With ZeRO-1 the buckets are cut at the slices' boundaries and
// each is summed on its slice's owner alone (ncclReduce) instead. Captured into the step's CUDA graph like the rest (NCCL's
// collectives can be; the emulator's stand-in queues them as host
// functions, which can too).
#include "DeviceModelImpl.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace stringrt::cuda {

DeviceModel::RanksId DeviceModel::newRanksId() {
  const nccl::UniqueId id = NcclRanks::newId();
  RanksId bytes;
  static_assert(sizeof id.internal == std::tuple_size_v<RanksId>);
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

void DeviceModel::joinRanks(const RanksId &id, int rank, int ranks, double timeoutSeconds) {
  Impl &m = *impl_;
  if (m.ranks)
    throw Error("device executor: joinRanks called twice");
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw Error(fmt::format("device executor: rank {} of {} ranks", rank, ranks));
  if (!(timeoutSeconds > 0))
    throw Error(fmt::format("device executor: a rank timeout of {} s", timeoutSeconds));
  if (m.options.bucketBytes < 0 || m.options.bucketBytes % 4 != 0)
    throw Error(fmt::format("device executor: all-reduce buckets of {} bytes (a multiple of 4, "
                            "or 0 for the defaults)",
                            m.options.bucketBytes));
  if (m.options.zeroStage != 0 && m.options.zeroStage != 1)
    throw Error(fmt::format("device executor: ZeRO stage {}: only stage 1 (the optimizer state "
                            "sharded) is built",
                            m.options.zeroStage));
  nccl::UniqueId ncclId;
  std::memcpy(ncclId.internal, id.data(), id.size());
  m.sync("joining the ranks");
  if (m.options.zeroStage == 1)
    m.shardState(rank, ranks);
  if (m.options.overlapAllReduce) {
    const driver::Api &api = driver::require();
    driver::check(api.streamCreate(&m.commStream, CU_STREAM_NON_BLOCKING),
                  "creating the all-reduce's stream", "cuStreamCreate");
    driver::check(api.eventCreate(&m.forkEvent, CU_EVENT_DISABLE_TIMING),
                  "creating the all-reduce's events", "cuEventCreate");
    driver::check(api.eventCreate(&m.joinEvent, CU_EVENT_DISABLE_TIMING),
                  "creating the all-reduce's events", "cuEventCreate");
  }
  m.ranks = std::make_unique<NcclRanks>(ncclId, rank, ranks);
  m.rankLoss = m.newArena(4);
  m.rankTimeout = timeoutSeconds;
}

void DeviceModel::setGlobalBatch(int64_t rows) {
  if (rows < 1)
    throw Error(fmt::format("device executor: a global batch of {} rows", rows));
  impl_->globalRows = rows;
}

void DeviceModel::Impl::enqueueRankStep(BatchBuffers &b, int64_t batch, float weight) {
  inTrainingStep = true;
  auto zero = [&] {
    if (total > 0)
      zeroOnDevice(grads->at(0, uint64_t(gradFloats()) * 4), uint64_t(gradFloats()),
                   "zeroing the gradients");
    zeroOnDevice(rankLoss->at(0, 4), 1, "zeroing the loss");
  };
  if (options.overlapAllReduce) {
    timed("gradient copies", zero);
    enqueueOverlappedSum(b, batch, weight, rankLoss->at(0, 4), "gradient copies",
                         "weighting this rank's gradients");
  } else {
    walk("gradients", b, batch);
    timed("gradient copies", [&] {
      zero();
      forEachGradientOutput(b, [&](const OptimizerSlot &slot, uint64_t from) {
        gemm->axpy(int64_t(slot.size), weight, from,
                   grads->at(slot.offset * 4, uint64_t(slot.size) * 4),
                   "weighting this rank's gradients");
      });
      gemm->axpy(1, weight, lossAddress(b), rankLoss->at(0, 4), "weighting this rank's loss");
    });
    enqueueRankSum(rankLoss->at(0, 4));
  }
  timed("optimizer", [&] { enqueueOptimizer(rankLoss->at(0, 4)); });
  inTrainingStep = false;
}

void DeviceModel::Impl::enqueueRankSum(uint64_t loss) {
  timed("all-reduce", [&] {
    if (zero) // ZeRO-1: each rank the sums of its slice (DeviceZeroShards.cpp)
      ranks->reduceScatter(grads->at(0, uint64_t(shard.padded) * 4),
                           grads->at(uint64_t(shardBegin) * 4, uint64_t(shard.floats) * 4),
                           shard.floats, stream, "the gradients' reduce-scatter (ZeRO-1)");
    else if (total > 0)
      ranks->allReduceInPieces(grads->at(0, uint64_t(total) * 4), total, stream,
                               "the gradients' all-reduce");
    ranks->allReduce(loss, 1, stream, "the loss's all-reduce");
  });
}

const DeviceModel::Impl::RankSumPlan &DeviceModel::Impl::rankSumPlan() {
  if (rankPlan)
    return *rankPlan;
  RankSumPlan plan;
  const Program &p = program("gradients");
  const std::vector<int64_t> final = valueFinalOps(p, *section.stepsOf("gradients"));
  std::vector<int64_t> ready(slots.size(), -1); // -1: no gradient output
  for (const ProgramOutput &out : p.outputs) {
    if (!out.isGrad())
      continue;
    const size_t s = size_t(&gradientSlot(out) - slots.data());
    // (planGradientBuckets reads -1 as "no gradient": one that no op writes,
    // were there such, is added after op 0.)
    ready[s] = std::max<int64_t>(final.at(out.value), 0);
    plan.afterOp[ready[s]].gradients.push_back({s, out.value});
  }
  plan.afterOp[final.at(p.outputs.at(0).value)].loss = true;
  const int64_t cap = options.bucketBytes / 4;
  plan.buckets = planGradientBuckets(slots, ready, total, cap > 0 ? cap : kFirstBucketFloats,
                                     cap > 0 ? cap : kBucketFloats);
  if (zero) // each piece reduced to its slice's owner
    plan.buckets = splitGradientBuckets(plan.buckets, shard.floats);
  for (size_t k = 0; k < plan.buckets.size(); ++k)
    plan.afterOp[plan.buckets[k].readyOp].buckets.push_back(k);
  rankPlan = std::move(plan);
  return *rankPlan;
}

void DeviceModel::Impl::enqueueOverlappedSum(BatchBuffers &b, int64_t batch, float weight,
                                             uint64_t loss, const std::string &kind,
                                             const std::string &what) {
  const RankSumPlan &plan = rankSumPlan();
  const driver::Api &api = driver::require();
  // The comm stream's next work waits for the step's stream's work so far.
  auto fork = [&] {
    driver::check(api.eventRecord(forkEvent, stream), "the overlapped all-reduce",
                  "cuEventRecord");
    driver::check(api.streamWaitEvent(commStream, forkEvent, 0), "the overlapped all-reduce",
                  "cuStreamWaitEvent");
  };
  auto after = [&](int64_t op) {
    auto at = plan.afterOp.find(op);
    if (at == plan.afterOp.end())
      return;
    const RankSumPlan::AfterOp &now = at->second;
    for (const RankSumPlan::Gradient &g : now.gradients) {
      const OptimizerSlot &slot = slots[g.slot];
      if (b.placement.values[g.value].bytes != uint64_t(slot.size) * 4)
        throw Error(fmt::format("the gradient of '{}' has the wrong size", slot.name));
      timed(kind, [&] {
        gemm->axpy(int64_t(slot.size), weight, address(b, g.value),
                   grads->at(slot.offset * 4, uint64_t(slot.size) * 4), what);
      });
    }
    if (now.loss)
      timed(kind, [&] { gemm->axpy(1, weight, lossAddress(b), loss, "weighting the loss"); });
    if (!now.loss && now.buckets.empty())
      return;
    fork();
    if (now.loss)
      ranks->allReduce(loss, 1, commStream, "the loss's all-reduce");
    for (size_t k : now.buckets) {
      const GradientBucket &bucket = plan.buckets[k];
      const uint64_t at = grads->at(uint64_t(bucket.begin) * 4, uint64_t(bucket.floats) * 4);
      if (zero) // ZeRO-1: the sums on the slice's owner alone
        ranks->reduce(at, bucket.floats, int(bucket.begin / shard.floats), commStream,
                      fmt::format("the gradients' reduce to their slice's owner (bucket {} of "
                                  "{}, ZeRO-1)",
                                  k + 1, plan.buckets.size()));
      else
        ranks->allReduce(at, bucket.floats, commStream,
                         fmt::format("the gradients' all-reduce (bucket {} of {})", k + 1,
                                     plan.buckets.size()));
    }
  };
  after(-1);
  walk("gradients", b, batch, after);
  // The join, before the optimizer reads the sums (profiled: how long the
  // step's stream waits for the all-reduce after the backward).
  timed("all-reduce", [&] {
    driver::check(api.eventRecord(joinEvent, commStream), "the overlapped all-reduce",
                  "cuEventRecord");
    driver::check(api.streamWaitEvent(stream, joinEvent, 0), "the overlapped all-reduce",
                  "cuStreamWaitEvent");
  });
}

void DeviceModel::Impl::awaitRankStep(const std::string &step) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int pause = 1; // microseconds, growing to 1 ms: an oversubscribed host does not spin
  const std::string what = fmt::format("{} (the gradients' all-reduce)", step);
  for (;;) {
    ranks->checkAsync(what);
    if (control->oldestArrived(step))
      break;
    if (std::chrono::duration<double>(Clock::now() - start).count() > rankTimeout) {
      ranks->abort();
      throw Error(fmt::format("{} has not finished after {:g} s: a rank stopped, hung or died "
                              "(--rank-timeout); NCCL aborted",
                              step, rankTimeout));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause));
    pause = std::min(pause * 2, 1000);
  }
  ranks->checkAsync(what); // an error the step's last all-reduce met
}

} // namespace stringrt::cuda
