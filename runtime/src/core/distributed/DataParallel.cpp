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
// The evaluation is shared out the same way: rank r evaluates the r-th run of
// consecutive test batches, and every rank sums every batch's part in batch
// order (combineEvalParts), as evaluate() does.
#include "stringrt/Distributed.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

namespace stringrt {

RankShare rankShare(int64_t rows, int rank, int ranks) {
  const std::vector<int64_t> sizes = microBatchSizes(rows, ranks);
  RankShare share;
  for (int r = 0; r < rank; ++r)
    share.begin += sizes[static_cast<size_t>(r)];
  share.count = sizes[static_cast<size_t>(rank)];
  return share;
}

namespace {

class DataParallelBackend : public TrainBackend {
public:
  DataParallelBackend(Model &model, Communicator &comm)
      : model_(model), comm_(comm), ranks_(comm.size()), me_(comm.rank()) {}

  std::string name() const override { return ""; }

  void setAccumulate(int64_t parts) override {
    if (parts > 1)
      throw Error(fmt::format("--accumulate {} with {} ranks: the ranks already split each "
                              "batch as --accumulate {} does; give one or the other",
                              parts, ranks_, ranks_));
  }

  void start(const std::vector<float> &params, const Optimizer &optimizer) override {
    if (&params != &model_.parameters())
      model_.parameters() = params;
    optimizer_.emplace(optimizer);
    const size_t total = model_.parameters().size();
    sliceBegin_.assign(static_cast<size_t>(ranks_) + 1, 0);
    for (int k = 0; k <= ranks_; ++k)
      sliceBegin_[static_cast<size_t>(k)] =
          total * static_cast<size_t>(k) / static_cast<size_t>(ranks_);
  }

  BatchRows batchRows(int64_t rows) const override {
    if (rows < ranks_)
      throw Error(fmt::format("a batch of {} examples cannot be shared by {} ranks: give "
                              "--batch >= {}",
                              rows, ranks_, ranks_));
    globalRows_ = rows;
    const RankShare share = rankShare(rows, me_, ranks_);
    return {share.begin, share.count};
  }

  // `mine`: this rank's rows of the step's batch (batchRows).
  void queue(const std::map<std::string, HostTensor> &mine, const NextBatch &next,
             int64_t totalSteps, const StepKey &key) override {
    const int64_t rows = globalRows_;
    const RankShare share = rankShare(rows, me_, ranks_);
    if (rows < ranks_ || mine.begin()->second.shape.at(0) != share.count)
      throw Error(fmt::format("rank {}: a step's rows are {} of a batch of {}, not its share "
                              "of {} (batchRows)",
                              me_, mine.begin()->second.shape.at(0), rows, share.count));
    if (!memoryChecked_) {
      checkBatchMemory(model_, share.count, true, 0, "training");
      memoryChecked_ = true;
    }
    // The dropout masks of rows [begin, begin + count) of the whole batch.
    StepKey shareKey = key;
    shareKey.firstSample = key.firstSample + share.begin;
    model_.setStepKey(shareKey);
    float loss = 0;
    model_.gradients(mine, loss, shareGrads_);
    next(); // the trainer assembles the next batch after the step on the CPU
    combine(rows, loss, fmt::format("step {}", key.step + 1));
    info_ = {};
    if (std::isfinite(loss_))
      info_ = optimizer_->step(model_.parameters(), grads_, totalSteps);
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
    optimizer = *optimizer_;
  }

private:
  size_t sliceSize(int k) const {
    return sliceBegin_[static_cast<size_t>(k) + 1] - sliceBegin_[static_cast<size_t>(k)];
  }

  // grads_ and loss_ of the whole batch from every rank's share (the file's
  // comment says how).
  void combine(int64_t rows, float shareLoss, const std::string &step) {
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
    const std::vector<int64_t> sizes = microBatchSizes(rows, ranks_);
    std::vector<float> sum(mine, 0.0f);
    double loss = 0;
    for (size_t r = 0; r < n; ++r) {
      const float weight = static_cast<float>(sizes[r]) / static_cast<float>(rows);
      const bool own = static_cast<int>(r) == me_;
      const float *piece =
          own ? shareGrads_.data() + sliceBegin_[static_cast<size_t>(me_)]
              : inbox_.data() + r * (mine + 1);
      addWeighted(sum.data(), piece, weight, mine);
      loss += static_cast<double>(weight) * (own ? shareLoss : piece[mine]);
    }
    loss_ = static_cast<float>(loss);

    // Round 2: every rank every owner's sum.
    grads_.resize(total);
    std::copy(sum.begin(), sum.end(),
              grads_.begin() + static_cast<std::ptrdiff_t>(sliceBegin_[static_cast<size_t>(me_)]));
    for (size_t k = 0; k < n; ++k) {
      if (static_cast<int>(k) == me_)
        continue;
      send[k] = {sum.data(), mine * sizeof(float)};
      receive[k] = {grads_.data() + sliceBegin_[k], sliceSize(static_cast<int>(k)) * sizeof(float)};
    }
    comm_.exchange(send, receive, "the summed gradients of " + step);
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
  std::optional<Optimizer> optimizer_;
  std::vector<size_t> sliceBegin_;
  std::vector<float> shareGrads_, grads_, inbox_;
  std::vector<std::vector<float>> outbox_;
  float loss_ = 0;
  OptimizerStepInfo info_;
  bool memoryChecked_ = false;
  mutable int64_t globalRows_ = 0; // the step's whole batch (batchRows)
};

} // namespace

std::unique_ptr<TrainBackend> makeDataParallelBackend(Model &model, Communicator &comm) {
  if (comm.size() < 1 || comm.rank() < 0 || comm.rank() >= comm.size())
    throw Error(fmt::format("rank {} of {} ranks", comm.rank(), comm.size()));
  return std::make_unique<DataParallelBackend>(model, comm);
}

} // namespace stringrt
