// The data-parallel CPU trainer (stringrt/Distributed.h).
//
// A step: rank r computes the mean gradient and loss of its share (the r-th
// micro-batch of --accumulate N). The sum over the shares, weighted by their
// sizes in rank order, is the one-process accumulation's; computing it in
// that order on one rank for every element keeps its bits. So each rank owns
// a slice of the gradient vector: every rank sends each owner its share's
// gradient on that slice (round 1), the owner sums the N pieces in rank order
// (addWeighted, as the CPU trainer does), and sends the sum back to every rank
// (round 2): 2 (N - 1) / N of the gradient's bytes out of each rank, as a ring
// all-reduce moves, and a result that does not depend on the transport's
// order. The losses travel whole in round 1 and are summed in double in rank
// order, as the accumulation does.
//
// With --accumulate A each rank computes its share's mean in A micro-batches
// (micro-batches [r A, (r + 1) A) of the batch in N A, accumulatedGradients),
// then the step goes on as above: one process's --accumulate N A within
// float rounding, not bit for bit (the A pieces are summed on the rank, then
// weighted by the share's size; one process weights and sums all N A).
//
// With ZeRO-1 (DataParallelOptions::zeroStage 1) round 2 is not sent: each
// owner updates its slice of the parameters from its summed slice, with the
// state of that slice only (an Optimizer shard), after the global norm went
// along the ranks (ZeroShards.h); then every owner sends its updated slice
// to every rank: the same bytes as round 2, and one process's step.
//
// With ZeRO-2 (zeroStage 2) the step is ZeRO-1's, and once the owner has
// summed its slice every gradient-sized buffer is freed (the share's
// gradient, round 1's messages): between steps a rank holds the summed
// gradient of its slice alone, 1/N of the gradient (the next backward
// writes its share's whole gradient again; the CPU's gradients program
// gives it in one piece). The bits are ZeRO-1's.
//
// The evaluation is shared out the same way: rank r evaluates the r-th run of
// consecutive test batches, and every rank sums every batch's part in batch
// order (combineEvalParts), as evaluate() does.
#include "stringrt/Distributed.h"

#include "distributed/ZeroShards.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

namespace stringrt {

RankShare rankShare(int64_t rows, int rank, int ranks, int64_t parts) {
  if (ranks < 1 || rank < 0 || rank >= ranks || parts < 1)
    throw Error(fmt::format("rank {} of {} ranks in {} micro-batches each", rank, ranks, parts));
  const int64_t micro = int64_t(ranks) * parts;
  if (rows < micro) {
    if (parts == 1)
      throw Error(fmt::format("a batch of {} examples cannot be shared by {} ranks: give "
                              "--batch >= {}",
                              rows, ranks, ranks));
    throw Error(fmt::format("a batch of {} examples cannot be shared by {} ranks in {} "
                            "micro-batches each (--accumulate {}): give --batch >= {}",
                            rows, ranks, parts, parts, micro));
  }
  const std::vector<int64_t> sizes = microBatchSizes(rows, micro);
  RankShare share;
  const int64_t first = int64_t(rank) * parts;
  for (int64_t k = 0; k < first; ++k)
    share.begin += sizes[static_cast<size_t>(k)];
  for (int64_t k = first; k < first + parts; ++k)
    share.count += sizes[static_cast<size_t>(k)];
  return share;
}

size_t OptimizerStateMemory::largestRankBytes() const {
  return rankBytes.empty() ? 0 : *std::max_element(rankBytes.begin(), rankBytes.end());
}
size_t OptimizerStateMemory::largestMasterRankBytes() const {
  return masterRankBytes.empty()
             ? 0
             : *std::max_element(masterRankBytes.begin(), masterRankBytes.end());
}
size_t OptimizerStateMemory::largestGradientRankBytes() const {
  return gradientRankBytes.empty()
             ? 0
             : *std::max_element(gradientRankBytes.begin(), gradientRankBytes.end());
}

namespace {

class RankBackend : public DataParallelBackend {
public:
  RankBackend(Model &model, Communicator &comm, const DataParallelOptions &options)
      : model_(model), comm_(comm), ranks_(comm.size()), me_(comm.rank()),
        zero_(options.zeroStage >= 1), shardGradients_(options.zeroStage == 2),
        sliceBegin_(detail::rankSlices(model.parameters().size(), ranks_)) {
    if (options.zeroStage < 0 || options.zeroStage > 2)
      throw Error(fmt::format("ZeRO stage {}: stages 1 (the optimizer state sharded) and 2 "
                              "(and the gradients) are built; stage 3 (the parameters) is not",
                              options.zeroStage));
  }

  std::string name() const override { return ""; }

  OptimizerStateMemory optimizerStateMemory() const override {
    // The state buffers per element (Optimizer::stateBuffers) of this
    // model's optimizer.
    const size_t buffers =
        Optimizer(model_.manifest().optimizer, {}, 0).stateBuffers().size();
    OptimizerStateMemory memory;
    memory.wholeBytes = buffers * model_.parameters().size() * sizeof(float);
    for (int k = 0; k < ranks_; ++k)
      memory.rankBytes.push_back(zero_ ? buffers * sliceSize(k) * sizeof(float)
                                       : memory.wholeBytes);
    if (shardGradients_) { // ZeRO-2: the summed gradient of the slice
      memory.gradientWholeBytes = model_.parameters().size() * sizeof(float);
      for (int k = 0; k < ranks_; ++k)
        memory.gradientRankBytes.push_back(sliceSize(k) * sizeof(float));
    }
    return memory;
  }

  // The whole state (replicated) or this rank's slice (ZeRO-1), either way
  // the trainer need not keep its copy.
  bool holdsOptimizerState() const override { return true; }
  bool writesCheckpoints() const override { return me_ == 0; }

  void setAccumulate(int64_t parts) override { parts_ = parts; }

  void start(const std::vector<float> &params, const Optimizer &optimizer) override {
    if (&params != &model_.parameters())
      model_.parameters() = params;
    if (optimizer.totalSize() != model_.parameters().size())
      throw Error(fmt::format("the optimizer was built for {} parameters, the model has {}",
                              optimizer.totalSize(), model_.parameters().size()));
    if (!zero_) {
      optimizer_.emplace(optimizer);
      return;
    }
    optimizer_.emplace(optimizer.shard(sliceBegin_[static_cast<size_t>(me_)],
                                       sliceBegin_[static_cast<size_t>(me_) + 1]));
    size_t held = 0;
    for (const auto &buffer : optimizer_->stateBuffers())
      held += buffer.values->size() * sizeof(float);
    if (held != optimizerStateMemory().rankBytes[static_cast<size_t>(me_)])
      throw Error(fmt::format("rank {} holds {} bytes of optimizer state, not the {} it "
                              "reports",
                              me_, held, optimizerStateMemory().rankBytes[static_cast<size_t>(me_)]));
  }

  BatchRows batchRows(int64_t rows) const override {
    // (refuses rows < ranks * parts)
    const RankShare share = rankShare(rows, me_, ranks_, parts_);
    globalRows_ = rows;
    return {share.begin, share.count};
  }

  // `mine`: this rank's rows of the step's batch (batchRows).
  void queue(const std::map<std::string, HostTensor> &mine, const NextBatch &next,
             int64_t totalSteps, const StepKey &key) override {
    if (!optimizer_)
      throw Error("data-parallel step: the optimizer state was fetched and not returned");
    const int64_t rows = globalRows_;
    const RankShare share = rankShare(rows, me_, ranks_, parts_);
    if (mine.begin()->second.shape.at(0) != share.count)
      throw Error(fmt::format("rank {}: a step's rows are {} of a batch of {}, not its share "
                              "of {} (batchRows)",
                              me_, mine.begin()->second.shape.at(0), rows, share.count));
    if (!memoryChecked_) { // (a share in micro-batches runs its largest at a time)
      checkBatchMemory(model_, (share.count + parts_ - 1) / parts_, true, 0, "training");
      memoryChecked_ = true;
    }
    // The dropout masks of rows [begin, begin + count) of the whole batch.
    StepKey shareKey = key;
    shareKey.firstSample = key.firstSample + share.begin;
    model_.setStepKey(shareKey);
    float loss = 0;
    if (parts_ > 1) // the share's mean gradient, as --accumulate parts_ on its rows
      loss = accumulatedGradients(model_, mine, shareKey, parts_, shareGrads_, microGrads_);
    else
      model_.gradients(mine, loss, shareGrads_);
    next(); // the trainer assembles the next batch after the step on the CPU
    const std::string step = fmt::format("step {}", key.step + 1);
    reduceScatter(rows, loss, step);
    if (shardGradients_)
      keepOnlyTheSlice(step);
    info_ = {};
    if (!zero_) {
      allGatherGradients(step);
      if (std::isfinite(loss_))
        info_ = optimizer_->step(model_.parameters(), shareGrads_, totalSteps);
      return;
    }
    if (!std::isfinite(loss_))
      return; // (every rank has the loss: all skip the step)
    const double sumSq =
        detail::chainedSquaredNorm(*optimizer_, sum_.data(), comm_, "the gradient norm of " + step);
    info_ = optimizer_->stepShard(model_.parameters(), sum_.data(), sumSq, totalSteps);
    detail::allGatherSlices(model_.parameters(), sliceBegin_, comm_,
                            "the updated parameters of " + step);
  }

  OptimizerStepInfo collect(float &loss) override {
    loss = loss_;
    return info_;
  }

  EvalResult evaluate(const DataSet &data, int64_t batch) override {
    return sharedEvaluation(data, batch, "the evaluation");
  }

  // The EMA weights in place of the raw ones, then back.
  EvalResult evaluateEma(const DataSet &data, int64_t batch) override {
    std::vector<float> raw = model_.parameters();
    model_.parameters() = optimizer_->emaParameters(raw);
    EvalResult ema;
    try {
      if (zero_) // each rank replaced its slice
        detail::allGatherSlices(model_.parameters(), sliceBegin_, comm_,
                                "the EMA weights for the evaluation");
      ema = sharedEvaluation(data, batch, "the evaluation of the EMA weights");
    } catch (...) {
      model_.parameters() = std::move(raw);
      throw;
    }
    model_.parameters() = std::move(raw);
    return ema;
  }

  void fetch(std::vector<float> &params, Optimizer &optimizer) override {
    if (&params != &model_.parameters())
      params = model_.parameters();
    if (zero_) {
      detail::gatherOptimizerState(*optimizer_, sliceBegin_, optimizer, comm_,
                                   "the gathering of the optimizer state");
    } else if (writesCheckpoints()) { // the other ranks' copies would go unused
      // Moved, not copied (holdsOptimizerState): returnState() gives it back.
      optimizer = std::move(*optimizer_);
      optimizer_.reset();
    }
  }

  void returnState(Optimizer &optimizer) override {
    if (!optimizer_) // fetch() moved it out
      optimizer_.emplace(std::move(optimizer));
    optimizer = optimizer_->shard(0, 0);
  }

private:
  size_t sliceSize(int k) const {
    return sliceBegin_[static_cast<size_t>(k) + 1] - sliceBegin_[static_cast<size_t>(k)];
  }

  // sum_ (this rank's slice of the whole batch's gradient) and loss_ from
  // every rank's share: rounds 1 and the owner's sum (the file's comment).
  void reduceScatter(int64_t rows, float shareLoss, const std::string &step) {
    const size_t total = model_.parameters().size();
    if (shareGrads_.size() != total)
      throw Error(fmt::format("{}: the gradients program gave {} gradients for {} parameters",
                              step, shareGrads_.size(), total));
    const size_t n = static_cast<size_t>(ranks_);
    const size_t mine = sliceSize(me_);
    // Round 1: each owner its slice of this share's gradient, and every
    // rank this share's loss (after the slice, in the same message).
    std::vector<std::vector<float>> &out = outbox_;
    out.resize(n);
    std::vector<Communicator::Send> send(n);
    std::vector<Communicator::Receive> receive(n);
    inbox_.assign(n * (mine + 1), 0.0f);
    for (size_t k = 0; k < n; ++k) {
      if (static_cast<int>(k) == me_)
        continue;
      const size_t size = sliceSize(static_cast<int>(k));
      out[k].assign(shareGrads_.begin() + static_cast<std::ptrdiff_t>(sliceBegin_[k]),
                    shareGrads_.begin() + static_cast<std::ptrdiff_t>(sliceBegin_[k] + size));
      out[k].push_back(shareLoss);
      send[k] = {out[k].data(), out[k].size() * sizeof(float)};
      receive[k] = {inbox_.data() + k * (mine + 1), (mine + 1) * sizeof(float)};
    }
    comm_.exchange(send, receive, "the gradients of " + step);

    // This rank's slice: the weighted shares in rank order.
    sum_.assign(mine, 0.0f);
    double loss = 0;
    for (size_t r = 0; r < n; ++r) {
      const float weight = static_cast<float>(rankShare(rows, int(r), ranks_, parts_).count) /
                           static_cast<float>(rows);
      const bool own = static_cast<int>(r) == me_;
      const float *piece =
          own ? shareGrads_.data() + sliceBegin_[static_cast<size_t>(me_)]
              : inbox_.data() + r * (mine + 1);
      addWeighted(sum_.data(), piece, weight, mine);
      loss += static_cast<double>(weight) * (own ? shareLoss : piece[mine]);
    }
    loss_ = static_cast<float>(loss);
  }

  // ZeRO-2: frees every gradient-sized buffer but the summed slice (sum_),
  // and checks that what this rank holds of gradients is what it reports.
  void keepOnlyTheSlice(const std::string &step) {
    std::vector<float>().swap(shareGrads_);
    std::vector<float>().swap(microGrads_);
    std::vector<float>().swap(inbox_);
    std::vector<std::vector<float>>().swap(outbox_);
    if (sum_.capacity() != sum_.size()) // (the slice is the same size every step)
      std::vector<float>(sum_).swap(sum_);
    const size_t held = heldGradientBytes();
    const size_t reported = optimizerStateMemory().gradientRankBytes[static_cast<size_t>(me_)];
    if (held != reported)
      throw Error(fmt::format("{}: rank {} holds {} bytes of gradients after the sum, not the "
                              "{} it reports (ZeRO-2)",
                              step, me_, held, reported));
  }

  // The bytes of every gradient-sized buffer this rank holds.
  size_t heldGradientBytes() const {
    size_t floats = shareGrads_.capacity() + microGrads_.capacity() + inbox_.capacity() +
                    sum_.capacity();
    for (const std::vector<float> &message : outbox_)
      floats += message.capacity();
    return floats * sizeof(float);
  }

  // The whole batch's gradient on every rank, in shareGrads_ (which round 1
  // has consumed, so one gradient-sized buffer serves both): round 2, every
  // rank every owner's sum.
  void allGatherGradients(const std::string &step) {
    std::copy(sum_.begin(), sum_.end(),
              shareGrads_.begin() +
                  static_cast<std::ptrdiff_t>(sliceBegin_[static_cast<size_t>(me_)]));
    detail::allGatherSlices(shareGrads_, sliceBegin_, comm_, "the summed gradients of " + step);
  }

  // evaluate() shared out: rank r evaluates the r-th of `ranks_` runs of
  // consecutive test batches, every rank gets every batch's part, and each
  // sums them in batch order as evaluate() does: its result, bit for bit.
  EvalResult sharedEvaluation(const DataSet &data, int64_t batch, const std::string &what) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t count = data.count(Split::Test);
    if (count == 0)
      throw Error("evaluation: the test split is empty");
    if (batch < 1)
      throw Error(fmt::format("evaluation batch must be >= 1, got {}", batch));
    const int64_t batches = (count + batch - 1) / batch;
    const size_t n = static_cast<size_t>(ranks_);
    auto first = [&](size_t r) { return batches * static_cast<int64_t>(r) / ranks_; };
    std::vector<EvalPart> parts(static_cast<size_t>(batches));
    Batch spare;
    for (int64_t b = first(static_cast<size_t>(me_)); b < first(static_cast<size_t>(me_) + 1);
         ++b)
      parts[static_cast<size_t>(b)] =
          evalBatch(model_, data, b * batch, std::min(count, (b + 1) * batch), spare);
    std::vector<Communicator::Send> send(n);
    std::vector<Communicator::Receive> receive(n);
    const size_t mine = static_cast<size_t>(first(static_cast<size_t>(me_)));
    const size_t myCount = static_cast<size_t>(first(static_cast<size_t>(me_) + 1)) - mine;
    for (size_t r = 0; r < n; ++r) {
      if (static_cast<int>(r) == me_)
        continue;
      send[r] = {parts.data() + mine, myCount * sizeof(EvalPart)};
      const size_t theirs = static_cast<size_t>(first(r));
      receive[r] = {parts.data() + theirs,
                    (static_cast<size_t>(first(r + 1)) - theirs) * sizeof(EvalPart)};
    }
    comm_.exchange(send, receive, what);
    EvalResult result = combineEvalParts(parts, data);
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  Model &model_;
  Communicator &comm_;
  int ranks_, me_;
  bool zero_;           // ZeRO-1 or 2: optimizer_ is this rank's shard
  bool shardGradients_; // ZeRO-2: only sum_ outlives the sum (keepOnlyTheSlice)
  std::vector<size_t> sliceBegin_; // detail::rankSlices
  std::optional<Optimizer> optimizer_;
  // shareGrads_: this rank's share's gradient, then (replicated, after
  // round 2) the whole batch's; sum_: this rank's slice of the sum.
  std::vector<float> shareGrads_, sum_, inbox_;
  std::vector<float> microGrads_; // a micro-batch's gradient (parts_ > 1)
  int64_t parts_ = 1;             // micro-batches of this rank's share (--accumulate)
  std::vector<std::vector<float>> outbox_;
  float loss_ = 0;
  OptimizerStepInfo info_;
  bool memoryChecked_ = false;
  mutable int64_t globalRows_ = 0; // the step's whole batch (batchRows)
};

} // namespace

std::unique_ptr<DataParallelBackend> makeDataParallelBackend(Model &model, Communicator &comm,
                                                             const DataParallelOptions &options) {
  if (comm.size() < 1 || comm.rank() < 0 || comm.rank() >= comm.size())
    throw Error(fmt::format("rank {} of {} ranks", comm.rank(), comm.size()));
  return std::make_unique<RankBackend>(model, comm, options);
}

} // namespace stringrt
