// One GPU's NCCL communicator in a data-parallel run (DeviceRanks.h): the
// gradient all-reduce of each step, queued on the streams of the step
// (inside its CUDA graph: NCCL's collectives can be captured), and the checks of a run
// whose peers may have died or hung. Private to runtime/src/cuda.
#pragma once

#include "Nccl.h"

#include <cstdint>
#include <string>

namespace stringrt::cuda {

class NcclRanks {
public:
  // The unique id rank 0 makes and sends to every rank (NCCL must be
  // available: else Error "NCCL is not available: ...").
  static nccl::UniqueId newId();
  // Joins the communicator of `ranks` GPUs as `rank` (collective: every
  // rank calls it with rank 0's id). The current CUDA context's device is
  // this rank's.
  NcclRanks(const nccl::UniqueId &id, int rank, int ranks);
  ~NcclRanks(); // ncclCommDestroy, or nothing after abort()
  NcclRanks(const NcclRanks &) = delete;
  NcclRanks &operator=(const NcclRanks &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Queues the sum across the ranks of the `floats` f32 at device address
  // `buffer`, in place, on `stream`: one ncclAllReduce (a bucket of the
  // overlapped gradients' sum, GradientBuckets.h; the loss). `what` names it
  // in errors.
  void allReduce(uint64_t buffer, int64_t floats, CUstream stream, const std::string &what);
  // The same in pieces of at most kPieceFloats, one call each, in order:
  // the whole gradient buffer after the backward when the all-reduce is not
  // overlapped (DeviceOptions::overlapAllReduce off).
  static constexpr int64_t kPieceFloats = int64_t(1) << 20; // 4 MiB
  void allReduceInPieces(uint64_t buffer, int64_t floats, CUstream stream,
                         const std::string &what);

  // ZeRO-1 (DeviceOptions::zeroStage): queues, on `stream`, the sum across
  // the ranks of the `floats` x ranks f32 at `send`, of which this rank
  // receives elements [rank floats, (rank + 1) floats) at `receive`
  // (ncclReduceScatter; in place when receive = send + rank x floats).
  void reduceScatter(uint64_t send, uint64_t receive, int64_t floats, CUstream stream,
                     const std::string &what);
  // ZeRO-1 with the reduce-scatter overlapped: queues the sum across the
  // ranks of the `floats` f32 at `buffer` into `buffer` on rank `root`
  // alone (ncclReduce, in place; the others' buffers unchanged): a bucket
  // of the gradients inside root's slice, on `stream`.
  void reduce(uint64_t buffer, int64_t floats, int root, CUstream stream,
              const std::string &what);
  // Queues every rank's `floats` f32 at `send` into `receive`, rank r's at
  // r x floats (ncclAllGather; in place when send = receive + rank x floats).
  void allGather(uint64_t send, uint64_t receive, int64_t floats, CUstream stream,
                 const std::string &what);

  // Throws Error naming `what` when NCCL reports an asynchronous error (a
  // peer died, a network failure): after abort(), as a rank stops.
  void checkAsync(const std::string &what);
  // Ends the communicator without waiting for the peers (ncclCommAbort).
  void abort();

private:
  [[noreturn]] void fail(const std::string &what, nccl::Result result);

  nccl::comm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

} // namespace stringrt::cuda
