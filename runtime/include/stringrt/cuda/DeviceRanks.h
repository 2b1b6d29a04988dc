// Data-parallel training on GPUs (docs/distributed.md, "GPUs"): one process
// per GPU under an MPI launcher, each with the whole model on its device, as
// train()'s backend. Rank r takes the r-th share of every global batch
// (rankShare: the micro-batches of --accumulate N), runs @gradients on it
// with the dropout masks those rows draw in the whole batch, weights its
// loss and gradients by share / batch, and the ranks sum them on the
// devices with NCCL (all-reduce in buckets on the step's stream, inside the
// step's CUDA graph); then every rank takes the same optimizer step
// (replicated). So N ranks train as one process with --accumulate N, within
// float rounding (the sum's order and the GEMMs' fused multiply-adds differ
// from the accumulation's; docs/distributed.md says how much). With
// --accumulate A each rank runs its share (micro-batches [r A, (r + 1) A) of
// the global batch in N A) as A micro-batches, accumulating on its GPU, and
// the all-reduce follows the last: one process's --accumulate N A. With
// DeviceOptions::zeroStage 1 (ZeRO-1, DeviceZeroShards.cpp) each GPU holds
// the optimizer's moments of its slice of the parameters only: the
// gradients are reduce-scattered after the backward, each rank updates its
// slice, and the parameters are all-gathered.
//
// The NCCL unique id goes from rank 0 to the others through `comm` (MPI's
// messages); NCCL itself is opened with dlopen (libnccl.so.2, or
// STRINGRT_NCCL), so the runtime runs without it until a run asks for ranks.
// Every rank evaluates the whole test split on its GPU (the same parameters:
// the same result; the others would wait for rank 0 anyway); only rank 0
// writes checkpoints (the one-process format: --resume works with any N or
// as one process).
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/Distributed.h"
#include "stringrt/Manifest.h"
#include "stringrt/cuda/DeviceExecutor.h"

#include <memory>

namespace stringrt::cuda {

// This process's rank among those of its machine, from the launcher's
// environment (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID,
// PMIX_LOCAL_RANK; else `rank`): it takes device local rank modulo the
// devices the driver shows (CUDA_VISIBLE_DEVICES applies).
int localRank(int rank);

// The backend of `comm`'s rank; `options.device` is replaced by the local
// rank's device; `options.zeroStage` 1: ZeRO-1 (DeviceOptions), the state
// each rank holds reported by optimizerStateMemory(). `rankTimeoutSeconds` bounds a step's wait for the other
// ranks (stringrun --rank-timeout). Refuses a batch smaller than the ranks
// times --accumulate (rankShare).
std::unique_ptr<DataParallelBackend>
makeDeviceDataParallelBackend(const Manifest &manifest, const CudaSection &section,
                              DeviceOptions options, Communicator &comm,
                              double rankTimeoutSeconds);

} // namespace stringrt::cuda
