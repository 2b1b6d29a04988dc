// ZeroShards.h: the norm's chain, the all-gather and the gather of the state.
#include "distributed/ZeroShards.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>

namespace stringrt::detail {

namespace {

// A round in which nothing moves but what the caller sets.
struct Round {
  explicit Round(size_t ranks) : send(ranks), receive(ranks) {
    for (Communicator::Send &s : send)
      s.skip = true;
    for (Communicator::Receive &r : receive)
      r.skip = true;
  }
  std::vector<Communicator::Send> send;
  std::vector<Communicator::Receive> receive;
};

} // namespace

std::vector<size_t> rankSlices(size_t total, int ranks) {
  std::vector<size_t> begin(static_cast<size_t>(ranks) + 1);
  for (int k = 0; k <= ranks; ++k)
    begin[static_cast<size_t>(k)] = total * static_cast<size_t>(k) / static_cast<size_t>(ranks);
  return begin;
}

double chainedSquaredNorm(const Optimizer &shard, const float *grads, Communicator &comm,
                          const std::string &what) {
  const size_t n = static_cast<size_t>(comm.size());
  const size_t me = static_cast<size_t>(comm.rank());
  const size_t last = n - 1;
  double sum = 0;
  if (me > 0) { // the sum of ranks 0 .. me - 1
    Round round(n);
    round.receive[me - 1] = {&sum, sizeof sum, false};
    comm.exchange(round.send, round.receive, what);
  }
  sum = shard.squaredNorm(grads, sum);
  if (n == 1)
    return sum;
  Round round(n);
  if (me == last) {
    for (size_t k = 0; k < last; ++k)
      round.send[k] = {&sum, sizeof sum, false};
    comm.exchange(round.send, round.receive, what);
    return sum;
  }
  const double partial = sum; // on to the next rank; the total comes back
  round.send[me + 1] = {&partial, sizeof partial, false};
  round.receive[last] = {&sum, sizeof sum, false};
  comm.exchange(round.send, round.receive, what);
  return sum;
}

void allGatherSlices(std::vector<float> &values, const std::vector<size_t> &slices,
                     Communicator &comm, const std::string &what) {
  const size_t n = static_cast<size_t>(comm.size());
  const size_t me = static_cast<size_t>(comm.rank());
  if (slices.size() != n + 1 || slices[n] != values.size())
    throw Error(fmt::format("{}: {} values in {} slices", what, values.size(), slices.size()));
  std::vector<Communicator::Send> send(n);
  std::vector<Communicator::Receive> receive(n);
  for (size_t k = 0; k < n; ++k) {
    send[k] = {values.data() + slices[me], (slices[me + 1] - slices[me]) * sizeof(float)};
    receive[k] = {values.data() + slices[k], (slices[k + 1] - slices[k]) * sizeof(float)};
  }
  comm.exchange(send, receive, what);
}

void gatherOptimizerState(const Optimizer &shard, const std::vector<size_t> &slices,
                          Optimizer &whole, Communicator &comm, const std::string &what) {
  const size_t n = static_cast<size_t>(comm.size());
  const size_t me = static_cast<size_t>(comm.rank());
  if (shard.stateBegin() != slices[me] || shard.stateEnd() != slices[me + 1])
    throw Error(fmt::format("{}: rank {} holds the state of [{}, {}), not its slice [{}, {})",
                            what, me, shard.stateBegin(), shard.stateEnd(), slices[me],
                            slices[me + 1]));
  const auto mine = shard.stateBuffers();
  std::vector<Optimizer::StateBuffer> all;
  if (me == 0) {
    whole = Optimizer(shard.config(), shard.slots(), shard.totalSize());
    whole.setStepCount(shard.stepCount());
    all = whole.stateBuffers();
  }
  for (size_t b = 0; b < mine.size(); ++b) {
    Round round(n);
    if (me == 0) {
      float *into = all[b].values->data();
      std::copy(mine[b].values->begin(), mine[b].values->end(), into + slices[0]);
      for (size_t k = 1; k < n; ++k)
        round.receive[k] = {into + slices[k], (slices[k + 1] - slices[k]) * sizeof(float),
                            false};
    } else {
      round.send[0] = {mine[b].values->data(), mine[b].values->size() * sizeof(float), false};
    }
    comm.exchange(round.send, round.receive,
                  fmt::format("{} ({}*)", what, mine[b].prefix));
  }
}

} // namespace stringrt::detail
