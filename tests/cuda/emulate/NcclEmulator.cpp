// libstringrt_nccl_emulator.so: the NCCL calls the runtime makes
// (runtime/src/cuda/Nccl.h), over MPI, for the CUDA emulator, whose device
// memory is host memory (docs/distributed.md, "GPUs"). Loaded by the runtime
// through STRINGRT_NCCL in the emulated tests; the process must have joined
// MPI already (stringrun's ranks have: MpiCommunicator.cpp).
//
// A communicator is MPI_COMM_WORLD duplicated (so that its messages never
// meet the runtime's own); ncclCommInitRank checks that every rank was given
// rank 0's unique id (the runtime sends it by MPI_Bcast-like messages) and
// that the ranks are MPI's. ncclAllReduce (f32 sum) queues a host function
// on the stream (the emulator's cuLaunchHostFunc, named "ncclAllReduce (N
// floats)" in its trace: in stream order, and captured into a
// CUDA graph like NCCL's kernels): when the stream gets there, every rank
// sends its buffer to rank 0, which sums them in rank order (x0 + x1 + ...,
// left to right: deterministic) and sends the sum to every rank. A peer
// that sends nothing, or takes nothing, for STRINGRT_NCCL_EMULATOR_TIMEOUT
// seconds (default 300) puts the communicator in error (ncclRemoteError,
// ncclCommGetAsyncError), naming it in ncclGetLastError; its collectives
// then do nothing, as NCCL's do after an asynchronous error.
#include <cuda.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#define NCCL_EMU_EXPORT extern "C" __attribute__((visibility("default")))

// The emulator's cuLaunchHostFunc naming the operation (DriverStreams.cpp):
// "ncclAllReduce (N floats)" in its messages and trace.
extern "C" CUresult stringrt_emulator_launch_host_func(CUstream stream, CUhostFn fn,
                                                       void *userData, const char *what);

namespace {

// nccl.h's values (runtime/src/cuda/Nccl.h).
enum Result : int {
  Success = 0,
  UnhandledCudaError = 1,
  SystemError = 2,
  InternalError = 3,
  InvalidArgument = 4,
  InvalidUsage = 5,
  RemoteError = 6,
};
constexpr int kFloat32 = 7, kSum = 0;
struct UniqueId {
  char internal[128];
};
constexpr char kIdTag[] = "stringrt-nccl-emulator";

struct Comm;

// One all-reduce as queued (reused by every call with the same buffers: a
// graph replays the same one).
struct Job {
  Comm *comm;
  const float *send;
  float *receive;
  size_t count;
};

struct Comm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  double timeout = 300;
  Result error = Success;
  std::string lastError;
  std::deque<Job> jobs;
  std::vector<float> inbox, sum;
};

thread_local std::string noCommError;

Result fail(Comm *comm, Result result, const std::string &why) {
  (comm ? comm->lastError : noCommError) = why;
  return result;
}

double timeoutSeconds() {
  if (const char *value = std::getenv("STRINGRT_NCCL_EMULATOR_TIMEOUT")) {
    char *end = nullptr;
    const double seconds = std::strtod(value, &end);
    if (end != value && seconds > 0)
      return seconds;
  }
  return 300;
}

// Waits for `requests` (peer[i]: the rank of request i; the first
// `receives` receive), polling with a short sleep; false after setting the
// communicator's error when a peer is silent for the timeout.
bool waitAll(Comm &c, std::vector<MPI_Request> &requests, const std::vector<int> &peer,
             size_t receives) {
  using Clock = std::chrono::steady_clock;
  auto last = Clock::now();
  int pause = 1;
  for (;;) {
    int done = 0;
    size_t left = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i] == MPI_REQUEST_NULL)
        continue;
      int flag = 0;
      if (MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        c.error = RemoteError;
        c.lastError = "MPI failed in the all-reduce with rank " + std::to_string(peer[i]);
        return false;
      }
      if (flag)
        ++done;
      else
        ++left;
    }
    if (left == 0)
      return true;
    if (done > 0) {
      last = Clock::now();
      pause = 1;
      continue;
    }
    if (std::chrono::duration<double>(Clock::now() - last).count() > c.timeout) {
      std::string silent;
      bool receiving = false;
      for (size_t i = 0; i < receives; ++i)
        if (requests[i] != MPI_REQUEST_NULL) {
          silent += (silent.empty() ? "" : ", ") + std::to_string(peer[i]);
          receiving = true;
        }
      if (!receiving)
        for (size_t i = receives; i < requests.size(); ++i)
          if (requests[i] != MPI_REQUEST_NULL)
            silent += (silent.empty() ? "" : ", ") + std::to_string(peer[i]);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", c.timeout);
      c.error = RemoteError;
      c.lastError = std::string(receiving ? "nothing from rank " : "rank ") + silent +
                    (receiving ? "" : " took nothing from this rank") + " for " + seconds +
                    " s in an all-reduce: stopped, hung or dead (the NCCL stand-in's "
                    "STRINGRT_NCCL_EMULATOR_TIMEOUT)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause));
    pause = std::min(pause * 2, 1000);
  }
}

// The all-reduce of `job`, when its stream gets there.
void runAllReduce(void *data) {
  Job &job = *static_cast<Job *>(data);
  Comm &c = *job.comm;
  if (c.error != Success)
    return;
  const int count = int(job.count);
  constexpr int kTag = 4545;
  std::vector<MPI_Request> requests;
  std::vector<int> peer;
  if (c.rank == 0) {
    c.inbox.resize(job.count * size_t(c.size));
    for (int r = 1; r < c.size; ++r) {
      requests.emplace_back();
      peer.push_back(r);
      MPI_Irecv(c.inbox.data() + size_t(r) * job.count, count, MPI_FLOAT, r, kTag, c.mpi,
                &requests.back());
    }
    if (!waitAll(c, requests, peer, requests.size()))
      return;
    // x0 + x1 + ... + x(n-1), left to right, for every element.
    c.sum.assign(job.send, job.send + job.count);
    for (int r = 1; r < c.size; ++r) {
      const float *x = c.inbox.data() + size_t(r) * job.count;
      for (size_t i = 0; i < job.count; ++i)
        c.sum[i] += x[i];
    }
    requests.clear();
    peer.clear();
    for (int r = 1; r < c.size; ++r) {
      requests.emplace_back();
      peer.push_back(r);
      MPI_Isend(c.sum.data(), count, MPI_FLOAT, r, kTag, c.mpi, &requests.back());
    }
    if (!waitAll(c, requests, peer, 0))
      return;
    std::memcpy(job.receive, c.sum.data(), job.count * sizeof(float));
    return;
  }
  // The send buffer may be the receive buffer: the sum arrives elsewhere.
  c.sum.resize(job.count);
  requests.resize(2);
  peer = {0, 0};
  MPI_Irecv(c.sum.data(), count, MPI_FLOAT, 0, kTag, c.mpi, &requests[0]);
  MPI_Isend(job.send, count, MPI_FLOAT, 0, kTag, c.mpi, &requests[1]);
  if (!waitAll(c, requests, peer, 1))
    return;
  std::memcpy(job.receive, c.sum.data(), job.count * sizeof(float));
}

} // namespace

NCCL_EMU_EXPORT Result ncclGetUniqueId(UniqueId *id) {
  if (!id)
    return fail(nullptr, InvalidArgument, "ncclGetUniqueId: a null id");
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdTag, sizeof kIdTag);
  // Distinct per call, as NCCL's are: a rank given another id is refused.
  std::random_device entropy;
  const unsigned words[3] = {unsigned(getpid()), entropy(), entropy()};
  std::memcpy(id->internal + 64, words, sizeof words);
  return Success;
}

NCCL_EMU_EXPORT Result ncclCommInitRank(Comm **comm, int nranks, UniqueId id, int rank) {
  if (!comm)
    return fail(nullptr, InvalidArgument, "ncclCommInitRank: a null communicator");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return fail(nullptr, InvalidUsage,
                "the NCCL stand-in runs over MPI, which this process has not joined");
  if (std::memcmp(id.internal, kIdTag, sizeof kIdTag) != 0)
    return fail(nullptr, InvalidArgument,
                "ncclCommInitRank: the unique id is not one ncclGetUniqueId made");
  auto c = std::make_unique<Comm>();
  MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
  MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->mpi, &c->rank);
  MPI_Comm_size(c->mpi, &c->size);
  c->timeout = timeoutSeconds();
  if (nranks != c->size || rank != c->rank) {
    MPI_Comm_free(&c->mpi);
    return fail(nullptr, InvalidArgument,
                "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                    std::to_string(nranks) + ", but MPI says rank " + std::to_string(c->rank) +
                    " of " + std::to_string(c->size));
  }
  // Every rank must hold rank 0's id (NCCL would hang or fail otherwise).
  UniqueId root = id;
  MPI_Bcast(root.internal, sizeof root.internal, MPI_BYTE, 0, c->mpi);
  const int same = std::memcmp(root.internal, id.internal, sizeof id.internal) == 0;
  int all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, c->mpi);
  if (!all) {
    MPI_Comm_free(&c->mpi);
    return fail(nullptr, InvalidArgument,
                "ncclCommInitRank: the ranks were given different unique ids (rank 0's must "
                "go to every rank)");
  }
  *comm = c.release();
  return Success;
}

NCCL_EMU_EXPORT Result ncclAllReduce(const void *send, void *receive, size_t count, int type,
                                     int op, Comm *comm, CUstream stream) {
  if (!comm)
    return fail(nullptr, InvalidArgument, "ncclAllReduce: a null communicator");
  if (type != kFloat32 || op != kSum)
    return fail(comm, InvalidArgument,
                "the NCCL stand-in sums f32 only (ncclFloat32, ncclSum)");
  if (count > size_t(1) << 30)
    return fail(comm, InvalidArgument, "ncclAllReduce: over 2^30 elements");
  if (comm->error != Success)
    return comm->error;
  const auto *from = static_cast<const float *>(send);
  auto *to = static_cast<float *>(receive);
  auto same = std::find_if(comm->jobs.begin(), comm->jobs.end(), [&](const Job &j) {
    return j.send == from && j.receive == to && j.count == count;
  });
  Job *job = same != comm->jobs.end() ? &*same
                                      : &comm->jobs.emplace_back(Job{comm, from, to, count});
  const std::string what = "ncclAllReduce (" + std::to_string(count) + " floats)";
  if (stringrt_emulator_launch_host_func(stream, runAllReduce, job, what.c_str()) != CUDA_SUCCESS)
    return fail(comm, UnhandledCudaError, "cuLaunchHostFunc failed");
  return Success;
}

NCCL_EMU_EXPORT Result ncclCommDestroy(Comm *comm) {
  if (!comm)
    return fail(nullptr, InvalidArgument, "ncclCommDestroy: a null communicator");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm->error == Success)
    MPI_Comm_free(&comm->mpi);
  delete comm;
  return Success;
}

// Without waiting for anyone: its collectives, queued or captured, do
// nothing from now on. (The object stays, as queued host functions still
// name it: a small leak of a run that is ending.)
NCCL_EMU_EXPORT Result ncclCommAbort(Comm *comm) {
  if (!comm)
    return fail(nullptr, InvalidArgument, "ncclCommAbort: a null communicator");
  comm->error = InternalError;
  comm->lastError = "the communicator was aborted";
  return Success;
}

NCCL_EMU_EXPORT Result ncclCommGetAsyncError(Comm *comm, Result *error) {
  if (!comm || !error)
    return fail(comm, InvalidArgument, "ncclCommGetAsyncError: null arguments");
  *error = comm->error;
  return Success;
}

NCCL_EMU_EXPORT const char *ncclGetErrorString(Result result) {
  switch (result) {
  case Success:
    return "no error";
  case UnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case SystemError:
    return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case InternalError:
    return "internal error - please report this issue to the NCCL developers";
  case InvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case InvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case RemoteError:
    return "remote process exited or there was a network error";
  }
  return "unknown result code";
}

NCCL_EMU_EXPORT const char *ncclGetLastError(Comm *comm) {
  return comm ? comm->lastError.c_str() : noCommError.c_str();
}
