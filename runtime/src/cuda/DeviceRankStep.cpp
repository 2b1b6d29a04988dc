// A data-parallel rank's training step on the device (DeviceExecutor.h,
// joinRanks; DeviceRanks.h): @gradients on this rank's share, its loss and
// gradients weighted by share / global rows, summed across the ranks by
// NCCL on the step's stream, the optimizer. Captured into the step's CUDA
// graph like the rest (NCCL's collectives can be; the emulator's stand-in
// queues them as host functions, which can too).
#include "DeviceModelImpl.h"

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
  nccl::UniqueId ncclId;
  std::memcpy(ncclId.internal, id.data(), id.size());
  m.sync("joining the ranks");
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
  walk("gradients", b, batch);
  const uint64_t gradBytes = uint64_t(total) * 4;
  timed("gradient copies", [&] {
    if (total > 0)
      zeroOnDevice(grads->at(0, gradBytes), uint64_t(total), "zeroing the gradients");
    zeroOnDevice(rankLoss->at(0, 4), 1, "zeroing the loss");
    forEachGradientOutput(b, [&](const OptimizerSlot &slot, uint64_t from) {
      gemm->axpy(int64_t(slot.size), weight, from,
                 grads->at(slot.offset * 4, uint64_t(slot.size) * 4),
                 "weighting this rank's gradients");
    });
    gemm->axpy(1, weight, lossAddress(b), rankLoss->at(0, 4), "weighting this rank's loss");
  });
  enqueueRankSum(rankLoss->at(0, 4));
  timed("optimizer", [&] { enqueueOptimizer(rankLoss->at(0, 4)); });
  inTrainingStep = false;
}

void DeviceModel::Impl::enqueueRankSum(uint64_t loss) {
  timed("all-reduce", [&] {
    if (total > 0)
      ranks->allReduce(grads->at(0, uint64_t(total) * 4), total, stream,
                       "the gradients' all-reduce");
    ranks->allReduce(loss, 1, stream, "the loss's all-reduce");
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
