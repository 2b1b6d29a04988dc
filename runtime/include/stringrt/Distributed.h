// Data-parallel training on ranks (docs/distributed.md): N processes, each
// with the whole model, train as one process with --accumulate N does. Rank r
// takes the r-th micro-batch (microBatchSizes) of every global batch, computes
// that share's mean gradient, and the ranks combine the shares' gradients and
// losses in the accumulation's fixed order (rank order), so the result is
// bit for bit the one-process --accumulate N step; then every rank takes the
// same optimizer step (replicated). The transport is a Communicator: MPI's
// (stringrt/MpiCommunicator.h, where the runtime is built with MPI) or any
// other that moves bytes between ranks.
#pragma once

#include "stringrt/Trainer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stringrt {

// Point-to-point messages between the ranks of one run.
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  struct Send {
    const void *data = nullptr;
    size_t bytes = 0;
  };
  struct Receive {
    void *data = nullptr;
    size_t bytes = 0;
  };
  // One round of messages: sends send[k] to every rank k != rank() and
  // receives from every rank r != rank() its message into receive[r] (its
  // size must be the one sent); send[rank()] and receive[rank()] are not
  // used. Returns when all have arrived. A rank whose message has not
  // arrived, or that has not taken this rank's, within the communicator's
  // timeout is an Error naming it; `what` names the round in errors ("the
  // gradients of step 12").
  virtual void exchange(const std::vector<Send> &send, const std::vector<Receive> &receive,
                        const std::string &what) = 0;
  // Ends the whole run at once with `code` (every rank exits): after an
  // error on one rank, so that the others do not wait for it.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The rows [begin, begin + count) of a global batch of `rows` that `rank` of
// `ranks` takes: the rank-th of microBatchSizes(rows, ranks).
struct RankShare {
  int64_t begin = 0;
  int64_t count = 0;
};
RankShare rankShare(int64_t rows, int rank, int ranks);

// Whether this process was started by an MPI launcher (mpirun, mpiexec,
// srun with PMI/PMIx), from its environment: nullopt when not; else the
// number of ranks when the launcher says (OMPI_COMM_WORLD_SIZE, PMI_SIZE),
// 0 when it does not (PMIx).
std::optional<int> launcherRanks();

// The CPU trainer on the ranks of `comm`: give it to train() on every rank.
// The model's parameters and the optimizer state stay equal on every rank.
// The evaluation is shared out: each rank evaluates a run of consecutive
// test batches and every rank sums all batches' parts in batch order, so
// every rank gets evaluate()'s result bit for bit. Refuses --accumulate (the
// ranks already split each batch) and a batch smaller than the ranks.
std::unique_ptr<TrainBackend> makeDataParallelBackend(Model &model, Communicator &comm);

} // namespace stringrt
