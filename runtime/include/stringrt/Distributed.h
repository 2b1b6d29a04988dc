// Data-parallel training on ranks (docs/distributed.md): N processes, each
// with the whole model, train as one process with --accumulate N does. Rank r
// takes the r-th micro-batch (microBatchSizes) of every global batch, computes
// that share's mean gradient, and the ranks combine the shares' gradients and
// losses in the accumulation's fixed order (rank order), so the result is
// bit for bit the one-process --accumulate N step; then every rank takes the
// same optimizer step (replicated), or each rank its slice of it (ZeRO-1 and
// ZeRO-2, DataParallelOptions). The transport is a Communicator: MPI's
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

  // `skip`: no message to (from) that rank in this round; the other rank
  // skips it too.
  struct Send {
    const void *data = nullptr;
    size_t bytes = 0;
    bool skip = false;
  };
  struct Receive {
    void *data = nullptr;
    size_t bytes = 0;
    bool skip = false;
  };
  // One round of messages: sends send[k] to every rank k != rank() and
  // receives from every rank r != rank() its message into receive[r] (its
  // size must be the one sent), but those skipped; send[rank()] and
  // receive[rank()] are not used. Returns when all have arrived. A rank whose message has not
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
// `ranks` takes when each rank runs its share in `parts` micro-batches (GPU
// ranks with --accumulate `parts`; 1 otherwise): micro-batches
// [rank * parts, (rank + 1) * parts) of microBatchSizes(rows, ranks * parts),
// so that microBatchSizes(count, parts) are those micro-batches in order and
// the run is one process's --accumulate ranks * parts. Throws Error when
// rows < ranks * parts (a micro-batch would be empty).
struct RankShare {
  int64_t begin = 0;
  int64_t count = 0;
};
RankShare rankShare(int64_t rows, int rank, int ranks, int64_t parts = 1);

// Whether this process was started by an MPI launcher (mpirun, mpiexec,
// srun with PMI/PMIx), from its environment: nullopt when not; else the
// number of ranks when the launcher says (OMPI_COMM_WORLD_SIZE, PMI_SIZE),
// 0 when it does not (PMIx).
std::optional<int> launcherRanks();

// How the ranks hold the optimizer state (stringrun train --zero).
struct DataParallelOptions {
  // 0: every rank holds all of it and takes the same whole step (replicated).
  // 1 (ZeRO stage 1): rank k holds only the state of the k-th slice of the
  // parameters (AdamW's m and v, SGD's u, the EMA of the weights) and
  // updates only that slice: the summed gradients stay on their owner (no
  // all-gather of them); the global gradient norm is summed along the ranks
  // in order (one process's additions, so its bits); then every rank sends
  // its updated slice of the parameters to every rank. The same bits as 0.
  // The parameters themselves (f32, which the CPU step computes in) stay
  // whole on every rank: its forward and backward need them.
  // 2 (ZeRO stage 2): stage 1, and the gradients sharded: once the shares'
  // gradients are summed (each owner its slice, in rank order), each rank
  // keeps only the summed gradient of its slice and frees every
  // gradient-sized buffer (its share's gradient, the messages), so the
  // gradient memory that outlives the sum is 1/N (the backward of the next
  // step writes the whole share's gradient again). The same bits as 0.
  int zeroStage = 0;
};

// The bytes of optimizer state each rank holds (4 per element of each
// state buffer), and the whole state's; and where a backend shards the f32
// master weights too (GPU ranks, a bf16 package), the bytes of them each
// rank holds and the whole weights' (empty and 0: whole on every rank);
// and with ZeRO-2 the bytes of gradients each rank holds between steps
// (its slice of the summed gradient) and the whole gradient's (what a
// replicated rank's summed gradient takes; empty and 0 without ZeRO-2).
struct OptimizerStateMemory {
  std::vector<size_t> rankBytes; // per rank
  size_t wholeBytes = 0;
  std::vector<size_t> masterRankBytes; // per rank
  size_t masterWholeBytes = 0;
  std::vector<size_t> gradientRankBytes; // per rank
  size_t gradientWholeBytes = 0;
  size_t largestRankBytes() const;
  size_t largestMasterRankBytes() const;
  size_t largestGradientRankBytes() const;
};

// The CPU trainer on the ranks of `comm`: give it to train() on every rank.
// The model's parameters stay equal on every rank, and so does the
// optimizer state, or each rank's shard of it is the one process's (ZeRO-1).
// The evaluation is shared out: each rank evaluates a run of consecutive
// test batches and every rank sums all batches' parts in batch order, so
// every rank gets evaluate()'s result bit for bit. Only rank 0 writes the
// checkpoints (the one-process format; with ZeRO-1 and 2 it gathers the
// state first). Refuses a batch smaller than the ranks (times
// --accumulate) and a ZeRO stage other than 0, 1 and 2.
class DataParallelBackend : public TrainBackend {
public:
  // What each rank's backend holds of the optimizer state of `model`: from
  // its manifest's optimizer and parameter count, so known before start(),
  // which checks that this rank holds that. (Replicated, train() holds a
  // second copy; with ZeRO-1 it holds none.) With ZeRO-2 also the gradients
  // each rank holds between steps, which every step checks.
  virtual OptimizerStateMemory optimizerStateMemory() const = 0;
};
std::unique_ptr<DataParallelBackend> makeDataParallelBackend(Model &model, Communicator &comm,
                                                             const DataParallelOptions &options =
                                                                 {});

} // namespace stringrt
