// NCCL, opened with dlopen like cuBLAS (Blas.h), so that the runtime builds
// and runs without it: only a data-parallel run on GPUs (DeviceRanks.h) asks
// for it, and a missing library is an error naming it. STRINGRT_NCCL names
// the library to open instead of libnccl.so.2 (then libnccl.so): the
// emulator's stand-in in the tests (tests/cuda/emulate/NcclEmulator.cpp).
//
// The toolkit here ships no nccl.h, so the few types and entry points used
// are declared below with nccl.h's definitions (NCCL 2.x ABI: the enums'
// values, the 128-byte unique id, opaque communicators).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

namespace stringrt::cuda::nccl {

struct Comm; // ncclComm
using comm_t = Comm *;
struct UniqueId {
  char internal[128]; // NCCL_UNIQUE_ID_BYTES
};
enum Result : int {
  Success = 0,
  UnhandledCudaError = 1,
  SystemError = 2,
  InternalError = 3,
  InvalidArgument = 4,
  InvalidUsage = 5,
  RemoteError = 6,
  InProgress = 7,
};
enum DataType : int { Float32 = 7 }; // ncclFloat32
enum RedOp : int { Sum = 0 };        // ncclSum

// The entry points used, with nccl.h's prototypes (the stream is a
// cudaStream_t, the driver's CUstream).
struct Api {
  Result (*getUniqueId)(UniqueId *id);
  Result (*commInitRank)(comm_t *comm, int nranks, UniqueId id, int rank);
  Result (*allReduce)(const void *send, void *receive, size_t count, DataType type, RedOp op,
                      comm_t comm, CUstream stream);
  // ZeRO-1 (DeviceOptions::zeroStage): `recvcount` per rank of the sum of
  // every rank's recvcount x ranks; every rank's `sendcount`, side by side.
  Result (*reduceScatter)(const void *send, void *receive, size_t recvcount, DataType type,
                          RedOp op, comm_t comm, CUstream stream);
  Result (*allGather)(const void *send, void *receive, size_t sendcount, DataType type,
                      comm_t comm, CUstream stream);
  // ZeRO-1's overlapped buckets: the sum of every rank's `count` on rank
  // `root` alone.
  Result (*reduce)(const void *send, void *receive, size_t count, DataType type, RedOp op,
                   int root, comm_t comm, CUstream stream);
  Result (*commDestroy)(comm_t comm);
  Result (*commAbort)(comm_t comm);
  Result (*commGetAsyncError)(comm_t comm, Result *error);
  const char *(*getErrorString)(Result result);
  const char *(*getLastError)(comm_t comm); // the last error's details
};

// The API, or nullptr with `why` set (library or symbol missing). Loaded
// once per process.
const Api *api(std::string *why = nullptr);
// The API; throws Error("NCCL is not available: <why>") when missing.
const Api &require();

// "ncclRemoteError (remote process exited or there was a network error):
// <the communicator's last error>" (`comm` may be null).
std::string describe(Result result, comm_t comm = nullptr);

} // namespace stringrt::cuda::nccl
