// NcclRanks.h.
#include "NcclRanks.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>

namespace stringrt::cuda {

nccl::UniqueId NcclRanks::newId() {
  nccl::UniqueId id{};
  const nccl::Result made = nccl::require().getUniqueId(&id);
  if (made != nccl::Success)
    throw Error("ncclGetUniqueId failed: " + nccl::describe(made));
  return id;
}

NcclRanks::NcclRanks(const nccl::UniqueId &id, int rank, int ranks) : rank_(rank), size_(ranks) {
  const nccl::Api &api = nccl::require();
  const nccl::Result joined = api.commInitRank(&comm_, ranks, id, rank);
  if (joined != nccl::Success) {
    comm_ = nullptr;
    throw Error(fmt::format("ncclCommInitRank (rank {} of {}) failed: {}", rank, ranks,
                            nccl::describe(joined)));
  }
}

NcclRanks::~NcclRanks() {
  if (comm_)
    if (const nccl::Api *api = nccl::api())
      api->commDestroy(comm_);
}

void NcclRanks::fail(const std::string &what, nccl::Result result) {
  const std::string why = nccl::describe(result, comm_);
  abort();
  throw Error(fmt::format("NCCL failed during {}: {}", what, why));
}

void NcclRanks::allReduce(uint64_t buffer, int64_t floats, CUstream stream,
                          const std::string &what) {
  if (!comm_)
    throw Error(fmt::format("{}: the NCCL communicator was aborted", what));
  void *at = reinterpret_cast<void *>(buffer);
  const nccl::Result queued =
      nccl::require().allReduce(at, at, size_t(floats), nccl::Float32, nccl::Sum, comm_, stream);
  if (queued != nccl::Success)
    fail(what + " (ncclAllReduce)", queued);
}

void NcclRanks::allReduceInPieces(uint64_t buffer, int64_t floats, CUstream stream,
                                  const std::string &what) {
  for (int64_t begin = 0; begin < floats; begin += kPieceFloats)
    allReduce(buffer + uint64_t(begin) * 4, std::min(kPieceFloats, floats - begin), stream, what);
}

void NcclRanks::reduce(uint64_t buffer, int64_t floats, int root, CUstream stream,
                       const std::string &what) {
  if (!comm_)
    throw Error(fmt::format("{}: the NCCL communicator was aborted", what));
  const nccl::Result queued = nccl::require().reduce(
      reinterpret_cast<const void *>(buffer), reinterpret_cast<void *>(buffer), size_t(floats),
      nccl::Float32, nccl::Sum, root, comm_, stream);
  if (queued != nccl::Success)
    fail(what + " (ncclReduce)", queued);
}

void NcclRanks::reduceScatter(uint64_t send, uint64_t receive, int64_t floats, CUstream stream,
                              const std::string &what) {
  if (!comm_)
    throw Error(fmt::format("{}: the NCCL communicator was aborted", what));
  const nccl::Result queued = nccl::require().reduceScatter(
      reinterpret_cast<const void *>(send), reinterpret_cast<void *>(receive), size_t(floats),
      nccl::Float32, nccl::Sum, comm_, stream);
  if (queued != nccl::Success)
    fail(what + " (ncclReduceScatter)", queued);
}

void NcclRanks::allGather(uint64_t send, uint64_t receive, int64_t floats, CUstream stream,
                          const std::string &what) {
  if (!comm_)
    throw Error(fmt::format("{}: the NCCL communicator was aborted", what));
  const nccl::Result queued =
      nccl::require().allGather(reinterpret_cast<const void *>(send),
                                reinterpret_cast<void *>(receive), size_t(floats), nccl::Float32,
                                comm_, stream);
  if (queued != nccl::Success)
    fail(what + " (ncclAllGather)", queued);
}

void NcclRanks::checkAsync(const std::string &what) {
  if (!comm_)
    throw Error(fmt::format("{}: the NCCL communicator was aborted", what));
  nccl::Result async = nccl::Success;
  const nccl::Result asked = nccl::require().commGetAsyncError(comm_, &async);
  if (asked != nccl::Success)
    fail(what + " (ncclCommGetAsyncError)", asked);
  if (async != nccl::Success && async != nccl::InProgress)
    fail(what, async);
}

void NcclRanks::abort() {
  if (!comm_)
    return;
  if (const nccl::Api *api = nccl::api())
    api->commAbort(comm_);
  comm_ = nullptr;
}

} // namespace stringrt::cuda
