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
// left to right: deterministic) and sends the sum to every rank.
// ncclReduceScatter (f32 sum; "ncclReduceScatter (N floats)", N the
// receive count) is the same sum of every rank's N x ranks floats, rank r
// receiving elements [r N, (r + 1) N) of it: the all-reduce's bits on its
// slice. ncclAllGather (f32; "ncclAllGather (N floats)", N the send count)
// gives every rank the ranks' N floats in rank order (rank 0 assembles them
// and sends the whole to every rank). ncclReduce (f32 sum; "ncclReduce (N
// floats to rank R)") is the all-reduce's sum on the root alone: the
// others' receive buffers are left alone. As NCCL allows, a call may be in place
// (all-reduce: receive == send; reduce-scatter: receive == send + rank N;
// all-gather: send == receive + rank N): what a rank sends has left before
// anything arrives in its receive buffer. A peer
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

// The collectives (their names in the trace and in errors).
enum class Kind { AllReduce, ReduceScatter, AllGather, Reduce };

const char *nameOf(Kind kind) {
  switch (kind) {
  case Kind::AllReduce:
    return "ncclAllReduce";
  case Kind::ReduceScatter:
    return "ncclReduceScatter";
  case Kind::AllGather:
    return "ncclAllGather";
  case Kind::Reduce:
    return "ncclReduce";
  }
  return "?";
}

// One collective as queued (reused by every call of the same kind with the
// same buffers: a graph replays the same one). `count`: the call's (the
// all-reduce's elements, the reduce-scatter's receive count, the
// all-gather's send count).
struct Job {
  Comm *comm;
  Kind kind;
  const float *send;
  float *receive;
  size_t count;
  int root; // the reduce's (0 for the others)
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
        c.lastError = "MPI failed in a collective with rank " + std::to_string(peer[i]);
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
                    " s in a collective: stopped, hung or dead (the NCCL stand-in's "
                    "STRINGRT_NCCL_EMULATOR_TIMEOUT)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause));
    pause = std::min(pause * 2, 1000);
  }
}

// The collective of `job`, when its stream gets there: every rank sends
// rank 0 what it contributes (`up` floats), rank 0 forms the result (the sum
// in rank order, or the contributions side by side) and sends each rank its
// part (`down` floats).
void runCollective(void *data) {
  Job &job = *static_cast<Job *>(data);
  Comm &c = *job.comm;
  if (c.error != Success)
    return;
  const size_t n = size_t(c.size);
  const size_t up = job.kind == Kind::ReduceScatter ? job.count * n : job.count;
  const size_t down = job.kind == Kind::AllGather ? job.count * n : job.count;
  constexpr int kTag = 4545;
  std::vector<MPI_Request> requests;
  std::vector<int> peer;
  if (c.rank == 0) {
    c.inbox.resize(up * n);
    std::memcpy(c.inbox.data(), job.send, up * sizeof(float));
    for (int r = 1; r < c.size; ++r) {
      requests.emplace_back();
      peer.push_back(r);
      MPI_Irecv(c.inbox.data() + size_t(r) * up, int(up), MPI_FLOAT, r, kTag, c.mpi,
                &requests.back());
    }
    if (!waitAll(c, requests, peer, requests.size()))
      return;
    const float *result = c.inbox.data(); // the all-gather's: side by side
    if (job.kind != Kind::AllGather) {
      // x0 + x1 + ... + x(n-1), left to right, for every element.
      c.sum.assign(c.inbox.begin(), c.inbox.begin() + std::ptrdiff_t(up));
      for (size_t r = 1; r < n; ++r) {
        const float *x = c.inbox.data() + r * up;
        for (size_t i = 0; i < up; ++i)
          c.sum[i] += x[i];
      }
      result = c.sum.data();
    }
    // Rank r's part: the reduce-scatter's r-th slice, else the whole.
    auto part = [&](size_t r) {
      return result + (job.kind == Kind::ReduceScatter ? r * job.count : 0);
    };
    requests.clear();
    peer.clear();
    for (int r = 1; r < c.size; ++r) {
      if (job.kind == Kind::Reduce && r != job.root)
        continue;
      requests.emplace_back();
      peer.push_back(r);
      MPI_Isend(part(size_t(r)), int(down), MPI_FLOAT, r, kTag, c.mpi, &requests.back());
    }
    if (!waitAll(c, requests, peer, 0))
      return;
    if (job.kind != Kind::Reduce || job.root == 0)
      std::memcpy(job.receive, part(0), down * sizeof(float));
    return;
  }
  if (job.kind == Kind::Reduce && c.rank != job.root) { // sends only
    requests.resize(1);
    peer = {0};
    MPI_Isend(job.send, int(up), MPI_FLOAT, 0, kTag, c.mpi, &requests[0]);
    waitAll(c, requests, peer, 0);
    return;
  }
  // The send buffer may overlap the receive buffer: the result arrives elsewhere.
  c.sum.resize(down);
  requests.resize(2);
  peer = {0, 0};
  MPI_Irecv(c.sum.data(), int(down), MPI_FLOAT, 0, kTag, c.mpi, &requests[0]);
  MPI_Isend(job.send, int(up), MPI_FLOAT, 0, kTag, c.mpi, &requests[1]);
  if (!waitAll(c, requests, peer, 1))
    return;
  std::memcpy(job.receive, c.sum.data(), down * sizeof(float));
}

// Queues `kind` on `stream` (the checks every collective makes first).
Result queue(Kind kind, const void *send, void *receive, size_t count, int type, Comm *comm,
             CUstream stream, int root = 0) {
  const std::string name = nameOf(kind);
  if (!comm)
    return fail(nullptr, InvalidArgument, name + ": a null communicator");
  if (type != kFloat32)
    return fail(comm, InvalidArgument, "the NCCL stand-in moves f32 only (ncclFloat32)");
  if (count > (size_t(1) << 30) / size_t(comm->size))
    return fail(comm, InvalidArgument, name + ": over 2^30 elements");
  if (comm->error != Success)
    return comm->error;
  if (root < 0 || root >= comm->size)
    return fail(comm, InvalidArgument, name + ": root " + std::to_string(root) + " of " +
                                           std::to_string(comm->size) + " ranks");
  const auto *from = static_cast<const float *>(send);
  auto *to = static_cast<float *>(receive);
  // NCCL's rule for buffers that overlap: exactly its in-place layout.
  const size_t n = size_t(comm->size), me = size_t(comm->rank);
  const size_t sent = kind == Kind::ReduceScatter ? count * n : count;
  const size_t got = kind == Kind::AllGather ? count * n : count;
  const bool overlap = from < to + got && to < from + sent;
  const float *inPlace = kind == Kind::ReduceScatter ? to - me * count
                         : kind == Kind::AllGather   ? to + me * count
                                                     : to;
  if (overlap && from != inPlace)
    return fail(comm, InvalidArgument,
                name + ": the send and receive buffers overlap, but not in NCCL's in-place "
                       "layout");
  auto same = std::find_if(comm->jobs.begin(), comm->jobs.end(), [&](const Job &j) {
    return j.kind == kind && j.send == from && j.receive == to && j.count == count &&
           j.root == root;
  });
  Job *job = same != comm->jobs.end()
                 ? &*same
                 : &comm->jobs.emplace_back(Job{comm, kind, from, to, count, root});
  const std::string what =
      name + " (" + std::to_string(count) + " floats" +
      (kind == Kind::Reduce ? " to rank " + std::to_string(root) : std::string()) + ")";
  if (stringrt_emulator_launch_host_func(stream, runCollective, job, what.c_str()) !=
      CUDA_SUCCESS)
    return fail(comm, UnhandledCudaError, "cuLaunchHostFunc failed");
  return Success;
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
  if (comm && op != kSum)
    return fail(comm, InvalidArgument, "the NCCL stand-in sums only (ncclSum)");
  return queue(Kind::AllReduce, send, receive, count, type, comm, stream);
}

// recvcount floats to each rank: the sum of every rank's recvcount x ranks.
NCCL_EMU_EXPORT Result ncclReduceScatter(const void *send, void *receive, size_t recvcount,
                                         int type, int op, Comm *comm, CUstream stream) {
  if (comm && op != kSum)
    return fail(comm, InvalidArgument, "the NCCL stand-in sums only (ncclSum)");
  return queue(Kind::ReduceScatter, send, receive, recvcount, type, comm, stream);
}

// sendcount floats from each rank: every rank receives sendcount x ranks.
NCCL_EMU_EXPORT Result ncclAllGather(const void *send, void *receive, size_t sendcount, int type,
                                     Comm *comm, CUstream stream) {
  return queue(Kind::AllGather, send, receive, sendcount, type, comm, stream);
}

// count floats from each rank: their sum on rank root.
NCCL_EMU_EXPORT Result ncclReduce(const void *send, void *receive, size_t count, int type, int op,
                                  int root, Comm *comm, CUstream stream) {
  if (comm && op != kSum)
    return fail(comm, InvalidArgument, "the NCCL stand-in sums only (ncclSum)");
  return queue(Kind::Reduce, send, receive, count, type, comm, stream, root);
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
