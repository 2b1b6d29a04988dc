// The NCCL stand-in's own checks (NcclEmulator.cpp), under mpirun -np N:
// ncclReduceScatter and ncclAllGather with NCCL's semantics (counts per
// rank, the buffers' layout, out of place and in place), the reduce-scatter
// the all-reduce's bits on each slice, ncclReduce (in place) the
// all-reduce's bits on the root alone, overlapping buffers other than
// NCCL's in-place layout refused. Each rank prints what failed and exits 1; rank 0
// prints "ok: ..." when every rank passed.
#include <cuda.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// nccl.h's types and the entry points checked (runtime/src/cuda/Nccl.h).
struct UniqueId {
  char internal[128];
};
struct Comm;
constexpr int kFloat32 = 7, kSum = 0, kInvalidArgument = 4;

} // namespace

extern "C" {
int ncclGetUniqueId(UniqueId *id);
int ncclCommInitRank(Comm **comm, int nranks, UniqueId id, int rank);
int ncclAllReduce(const void *send, void *receive, size_t count, int type, int op, Comm *comm,
                  CUstream stream);
int ncclReduceScatter(const void *send, void *receive, size_t recvcount, int type, int op,
                      Comm *comm, CUstream stream);
int ncclAllGather(const void *send, void *receive, size_t sendcount, int type, Comm *comm,
                  CUstream stream);
int ncclReduce(const void *send, void *receive, size_t count, int type, int op, int root,
               Comm *comm, CUstream stream);
int ncclCommDestroy(Comm *comm);
}

namespace {

int failures = 0;

void check(bool ok, int rank, const std::string &what) {
  if (ok)
    return;
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  ++failures;
}

// Rank q's element i: not exactly representable sums, so that the order of
// the additions shows in the bits.
float value(int q, size_t i) { return 0.1f * float(q + 1) + 1.0f / float(i + 3); }

// The device buffers of a test (the emulator's device memory is the host's).
struct Buffers {
  std::vector<CUdeviceptr> all;
  float *make(size_t floats, float fill) {
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, floats * sizeof(float)) != CUDA_SUCCESS)
      return nullptr;
    all.push_back(p);
    auto *at = reinterpret_cast<float *>(p);
    for (size_t i = 0; i < floats; ++i)
      at[i] = fill;
    return at;
  }
  ~Buffers() {
    for (CUdeviceptr p : all)
      cuMemFree(p);
  }
};

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS ||
      cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    std::fprintf(stderr, "rank %d: the CUDA emulator did not start\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  UniqueId id{};
  if (rank == 0)
    ncclGetUniqueId(&id);
  MPI_Bcast(id.internal, sizeof id.internal, MPI_BYTE, 0, MPI_COMM_WORLD);
  Comm *comm = nullptr;
  if (ncclCommInitRank(&comm, ranks, id, rank) != 0) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const size_t n = size_t(ranks), me = size_t(rank);
  const size_t count = 5; // per rank: the whole is not a power of two
  auto sync = [&](const char *what) {
    check(cuStreamSynchronize(stream) == CUDA_SUCCESS, rank, std::string(what) + ": sync failed");
  };
  Buffers buffers;

  // The sum of every rank's element i, in rank order (the all-reduce's).
  auto sum = [&](size_t i) {
    float s = value(0, i);
    for (int q = 1; q < ranks; ++q)
      s += value(q, i);
    return s;
  };

  // Reduce-scatter, out of place: rank r gets elements [r count, (r + 1)
  // count) of the sum of every rank's count x ranks.
  {
    float *send = buffers.make(count * n, 0), *receive = buffers.make(count, -1);
    for (size_t i = 0; i < count * n; ++i)
      send[i] = value(rank, i);
    check(ncclReduceScatter(send, receive, count, kFloat32, kSum, comm, stream) == 0, rank,
          "ncclReduceScatter (out of place) refused");
    sync("ncclReduceScatter");
    for (size_t j = 0; j < count; ++j)
      check(receive[j] == sum(me * count + j), rank,
            "reduce-scatter (out of place): element " + std::to_string(j) + " is " +
                std::to_string(receive[j]) + ", not " + std::to_string(sum(me * count + j)));
    for (size_t i = 0; i < count * n; ++i)
      check(send[i] == value(rank, i), rank, "reduce-scatter changed its send buffer");
  }
  // In place (receive = send + rank x count), against the all-reduce of the
  // same values: its bits on this rank's slice.
  {
    float *buffer = buffers.make(count * n, 0), *reduced = buffers.make(count * n, 0);
    for (size_t i = 0; i < count * n; ++i)
      buffer[i] = reduced[i] = value(rank, i);
    check(ncclReduceScatter(buffer, buffer + me * count, count, kFloat32, kSum, comm, stream) ==
              0,
          rank, "ncclReduceScatter (in place) refused");
    check(ncclAllReduce(reduced, reduced, count * n, kFloat32, kSum, comm, stream) == 0, rank,
          "ncclAllReduce refused");
    sync("ncclReduceScatter in place");
    for (size_t j = 0; j < count; ++j)
      check(std::memcmp(&buffer[me * count + j], &reduced[me * count + j], sizeof(float)) == 0,
            rank, "reduce-scatter (in place): element " + std::to_string(j) +
                      " differs from the all-reduce's");
  }
  // Reduce in place to each root in turn: the all-reduce's bits there, every
  // other rank's buffer left alone; a root out of range refused.
  for (int root = 0; root < ranks; ++root) {
    float *buffer = buffers.make(count, 0), *reduced = buffers.make(count, 0);
    for (size_t j = 0; j < count; ++j)
      buffer[j] = reduced[j] = value(rank, j);
    check(ncclReduce(buffer, buffer, count, kFloat32, kSum, root, comm, stream) == 0, rank,
          "ncclReduce refused");
    check(ncclAllReduce(reduced, reduced, count, kFloat32, kSum, comm, stream) == 0, rank,
          "ncclAllReduce refused");
    sync("ncclReduce");
    for (size_t j = 0; j < count; ++j)
      check(rank == root ? std::memcmp(&buffer[j], &reduced[j], sizeof(float)) == 0
                         : buffer[j] == value(rank, j),
            rank, "reduce to rank " + std::to_string(root) + ": element " + std::to_string(j) +
                      (rank == root ? " differs from the all-reduce's" : " was changed"));
  }
  {
    float *buffer = buffers.make(count, 0);
    check(ncclReduce(buffer, buffer, count, kFloat32, kSum, ranks, comm, stream) ==
              kInvalidArgument,
          rank, "a reduce to a root past the ranks was not refused");
  }
  // All-gather, out of place: every rank gets rank q's count at q count.
  {
    float *send = buffers.make(count, 0), *receive = buffers.make(count * n, -1);
    for (size_t j = 0; j < count; ++j)
      send[j] = value(rank, j);
    check(ncclAllGather(send, receive, count, kFloat32, comm, stream) == 0, rank,
          "ncclAllGather (out of place) refused");
    sync("ncclAllGather");
    for (size_t q = 0; q < n; ++q)
      for (size_t j = 0; j < count; ++j)
        check(receive[q * count + j] == value(int(q), j), rank,
              "all-gather (out of place): rank " + std::to_string(q) + "'s element " +
                  std::to_string(j) + " is " + std::to_string(receive[q * count + j]));
  }
  // In place (send = receive + rank x count), the rest holding stale values.
  {
    float *buffer = buffers.make(count * n, -1);
    for (size_t j = 0; j < count; ++j)
      buffer[me * count + j] = value(rank, j);
    check(ncclAllGather(buffer + me * count, buffer, count, kFloat32, comm, stream) == 0, rank,
          "ncclAllGather (in place) refused");
    sync("ncclAllGather in place");
    for (size_t q = 0; q < n; ++q)
      for (size_t j = 0; j < count; ++j)
        check(buffer[q * count + j] == value(int(q), j), rank,
              "all-gather (in place): rank " + std::to_string(q) + "'s element " +
                  std::to_string(j) + " is " + std::to_string(buffer[q * count + j]));
  }
  // Overlapping buffers other than the in-place layout: refused, on every
  // rank alike (nothing queued).
  {
    float *buffer = buffers.make(count * n + 1, 0);
    check(ncclAllGather(buffer + me * count + 1, buffer, count, kFloat32, comm, stream) ==
              kInvalidArgument,
          rank, "an all-gather whose send buffer overlaps its receive buffer off the in-place "
                "place was not refused");
    check(ncclReduceScatter(buffer, buffer + 1, count, kFloat32, kSum, comm, stream) ==
              kInvalidArgument,
          rank, "a reduce-scatter whose receive buffer overlaps its send buffer off the "
                "in-place place was not refused");
  }
  ncclCommDestroy(comm);
  cuStreamDestroy(stream);
  int failed = failures > 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rank == 0 && !any)
    std::printf("ok: %d ranks: ncclReduceScatter and ncclAllGather, out of place and in place, "
                "the reduce-scatter the all-reduce's bits on each slice, ncclReduce's on each "
                "root alone, bad overlaps and roots refused\n",
                ranks);
  MPI_Finalize();
  return any ? 1 : 0;
}
