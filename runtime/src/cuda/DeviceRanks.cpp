// The data-parallel GPU backend (stringrt/cuda/DeviceRanks.h).
#include "stringrt/cuda/DeviceRanks.h"

#include "DriverApi.h"
#include "stringrt/Error.h"
#include "stringrt/cuda/StepBinding.h"
#include "stringrt/cuda/ZeroMasterShards.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace stringrt::cuda {

int localRank(int rank) {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMIX_LOCAL_RANK"})
    if (const char *value = std::getenv(name)) {
      char *end = nullptr;
      const long local = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && local >= 0 && local < (1 << 24))
        return int(local);
    }
  return rank;
}

namespace {

class DeviceRankBackend : public DataParallelBackend {
public:
  DeviceRankBackend(const Manifest &manifest, const CudaSection &section, DeviceOptions options,
                    Communicator &comm, double timeout)
      : manifest_(manifest), section_(section), options_(options), comm_(comm),
        timeout_(timeout) {
    DeviceModel::checkPackage(manifest_, section_);
    DeviceModel::checkAccumulation(manifest_); // the shares split the inputs' first dimension
    int count = 0;
    driver::check(driver::require().deviceGetCount(&count), "choosing this rank's GPU",
                  "cuDeviceGetCount");
    if (count < 1)
      throw Error("the CUDA driver reports no device");
    options_.device = localRank(comm_.rank()) % count;
  }

  std::string name() const override {
    if (!device_)
      return "CUDA";
    auto onOff = [](bool on) { return on ? "on" : "off"; };
    const DeviceOptions &options = device_->options();
    const std::string sum =
        options.zeroStage == 1
            ? std::string("ZeRO-1: ") +
                  (options.overlapAllReduce ? "overlapped reduce to the slices' owners"
                                            : "reduce-scatter") +
                  ", all-gather" +
                  (shardsMasters() ? " of the bf16 copy, f32 master weights sharded" : "")
            : fmt::format("overlapped all-reduce {}", onOff(options.overlapAllReduce));
    return fmt::format("{} (CUDA: {} GEMMs, graphs {}, overlapped upload {}; {} ranks, NCCL, "
                       "{})",
                       device_->deviceName(), device_->gemmPrecision(), onOff(options.graphs),
                       onOff(options.overlapUpload), comm_.size(), sum);
  }

  // ZeRO-1 in a bf16 package: the f32 master weights and the EMA sharded
  // too (DeviceZeroShards.cpp).
  bool shardsMasters() const {
    return options_.zeroStage == 1 && usesBf16Params(manifest_, section_);
  }

  // The device's optimizer state (device layout: 4 bytes per float of each
  // buffer, the padding between parameters included): AdamW's m and v or
  // SGD's u, whole or (ZeRO-1) this rank's slice of the padded buffers, and
  // the EMA of the weights, whole on every rank but with sharded masters;
  // and then the masters: the slice, the parameters read in f32 packed
  // whole, their all-gather's room (ZeroMasterShards.h).
  OptimizerStateMemory optimizerStateMemory() const override {
    const int64_t total = deviceParameterLayout(manifest_).total;
    const bool adamw = manifest_.optimizer.kind == OptimizerKind::AdamW;
    const size_t moments = adamw ? 2 : 1, ema = manifest_.optimizer.emaDecay > 0 ? 1 : 0;
    const size_t whole = size_t(std::max<int64_t>(total, 1)) * 4; // (an arena's least)
    size_t slice = whole;
    if (options_.zeroStage == 1)
      slice = size_t(deviceZeroSlices(total, comm_.size()).floats) * 4;
    const size_t n = size_t(comm_.size());
    OptimizerStateMemory memory;
    memory.wholeBytes = (moments + ema) * whole;
    memory.rankBytes.assign(n, moments * slice + ema * (shardsMasters() ? slice : whole));
    if (shardsMasters()) {
      const DeviceF32Params f32 = deviceF32Params(manifest_, section_, comm_.size());
      auto arena = [](size_t bytes) { return std::max<size_t>(bytes, kDeviceAlignment); };
      memory.masterWholeBytes = whole;
      memory.masterRankBytes.assign(n, slice + arena(size_t(f32.floats) * 4) +
                                           arena(n * size_t(f32.rankFloats) * 4));
    }
    return memory;
  }

  void start(const std::vector<float> &params, const Optimizer &optimizer) override {
    if (!device_) {
      device_ = std::make_unique<DeviceModel>(manifest_, section_, params, options_);
      device_->joinRanks(sharedId(), comm_.rank(), comm_.size(), timeout_);
      const OptimizerStateMemory memory = optimizerStateMemory();
      const size_t reported = memory.rankBytes[size_t(comm_.rank())];
      if (device_->optimizerStateBytes() != reported)
        throw Error(fmt::format("rank {} holds {} bytes of optimizer state on its GPU, not the "
                                "{} it reports",
                                comm_.rank(), device_->optimizerStateBytes(), reported));
      if (!memory.masterRankBytes.empty() &&
          device_->masterWeightBytes() != memory.masterRankBytes[size_t(comm_.rank())])
        throw Error(fmt::format("rank {} holds {} bytes of master weights on its GPU, not the "
                                "{} it reports",
                                comm_.rank(), device_->masterWeightBytes(),
                                memory.masterRankBytes[size_t(comm_.rank())]));
    }
    device_->setState(params, optimizer);
  }

  // Each rank runs its share in `parts` micro-batches, accumulating on its
  // GPU, then one all-reduce a step: one process's --accumulate ranks x parts.
  void setAccumulate(int64_t parts) override {
    accumulate_ = parts; // (train() refuses parts < 1; checkAccumulation: the constructor)
  }

  BatchRows batchRows(int64_t rows) const override {
    const RankShare share = shareOf(rows); // (refuses rows < ranks x micro-batches)
    globalRows_ = rows;
    return {share.begin, share.count};
  }

  void queue(const std::map<std::string, HostTensor> &batch, const NextBatch &next,
             int64_t totalSteps, const StepKey &key) override {
    DeviceModel &device = started();
    const RankShare share = shareOf(globalRows_);
    device.setGlobalBatch(globalRows_);
    // The dropout masks of rows [begin, begin + count) of the whole batch
    // (an accumulated step offsets each micro-batch's from there).
    StepKey shareKey = key;
    shareKey.firstSample = key.firstSample + share.begin;
    device.setStepKey(shareKey);
    if (!device.hasStagedBatch())
      device.stage(batch);
    device.queueStep(totalSteps, accumulate_);
    if (const std::map<std::string, HostTensor> *inputs = next())
      device.stage(*inputs);
  }

  OptimizerStepInfo collect(float &loss) override {
    StepOutcome outcome = started().collectStep();
    loss = outcome.loss;
    return outcome.info;
  }
  int64_t stepsAhead() const override { return int64_t(kStepsInFlight) - 1; }

  EvalResult evaluate(const DataSet &data, int64_t batch) override {
    return started().evaluate(data, batch);
  }
  EvalResult evaluateEma(const DataSet &data, int64_t batch) override {
    return started().evaluateEma(data, batch);
  }
  void fetch(std::vector<float> &params, Optimizer &optimizer) override {
    started().getState(params, optimizer);
  }
  bool writesCheckpoints() const override { return comm_.rank() == 0; }

private:
  RankShare shareOf(int64_t rows) const {
    return rankShare(rows, comm_.rank(), comm_.size(), accumulate_);
  }

  DeviceModel &started() const {
    if (!device_)
      throw Error("the GPU ranks' backend was used before start()");
    return *device_;
  }

  // Rank 0's NCCL unique id, on every rank (one round of messages).
  DeviceModel::RanksId sharedId() {
    DeviceModel::RanksId id{};
    const size_t n = size_t(comm_.size());
    std::vector<Communicator::Send> send(n);
    std::vector<Communicator::Receive> receive(n);
    if (comm_.rank() == 0) {
      id = DeviceModel::newRanksId();
      for (size_t k = 1; k < n; ++k)
        send[k] = {id.data(), id.size()};
      for (size_t k = 1; k < n; ++k)
        receive[k].skip = true;
    } else {
      for (size_t k = 0; k < n; ++k)
        send[k].skip = true;
      for (size_t k = 1; k < n; ++k)
        receive[k].skip = true;
      receive[0] = {id.data(), id.size()};
    }
    comm_.exchange(send, receive, "the NCCL unique id");
    return id;
  }

  Manifest manifest_;
  CudaSection section_;
  DeviceOptions options_;
  Communicator &comm_;
  double timeout_;
  std::unique_ptr<DeviceModel> device_;
  mutable int64_t globalRows_ = 0; // the step's whole batch (batchRows)
  int64_t accumulate_ = 1;         // micro-batches of a rank's share (setAccumulate)
};

} // namespace

std::unique_ptr<DataParallelBackend>
makeDeviceDataParallelBackend(const Manifest &manifest, const CudaSection &section,
                              DeviceOptions options, Communicator &comm,
                              double rankTimeoutSeconds) {
  if (comm.size() < 1 || comm.rank() < 0 || comm.rank() >= comm.size())
    throw Error(fmt::format("rank {} of {} ranks", comm.rank(), comm.size()));
  return std::make_unique<DeviceRankBackend>(manifest, section, options, comm,
                                             rankTimeoutSeconds);
}

} // namespace stringrt::cuda
