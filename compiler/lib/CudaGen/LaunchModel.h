//===- LaunchModel.h - the launch report's time model, by part -*- C++ -*-===//
//
// The parts of the launch report's model (LaunchReport.h has the formula,
// docs/cuda.md "Launch report" the constants and their sources):
// - KernelModel.cpp: occupancy from registers, shared memory and threads,
//   Little's law for memory, the compute roofline; puts the terms together;
// - MeasuredKernels.cpp: cuBLAS GEMMs and the attention kernels from the
//   times the 2026-11-25 H100 profiles measured (tests/perf/records/);
// - SerialChains.cpp: kernels whose block runs a long dependent sequence
//   (the Cayley solve, generator_exp) and the relative attention's re-reads.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_LAUNCHMODEL_H
#define STRINGC_CUDAGEN_LAUNCHMODEL_H

#include "stringc/CudaGen/LaunchReport.h"

#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace stringc::cudagen {

/// Resident blocks and warps per SM of a kernel, and what limits them
/// ("warps", "blocks", "registers", "shared").
struct Occupancy {
  int64_t blocksPerSM = 0, warpsPerSM = 0;
  const char *limit = "";
};
Occupancy occupancyOf(const KernelResources &resources, int64_t threadsPerBlock,
                      const GpuMachineModel &machine);

/// A term of a launch that its bytes and FLOPs do not show: seconds and what
/// it counts (one line for the report).
struct ExtraTerm {
  double seconds = 0;
  std::string what;
};

/// The measured time of a cuBLAS GEMM launch of `flops` and `bytes` at
/// `arithmetic` (MeasuredKernels.cpp).
ExtraTerm gemmTime(LaunchArithmetic arithmetic, double flops, double bytes,
                   const GpuMachineModel &machine);

/// The measured-rate time of an attention kernel launch of `op` (forward or
/// backward, FMA or tensor-core), none for other kernels.
std::optional<ExtraTerm> attentionTime(mlir::Operation &op, const LaunchEstimate &launch,
                                       int64_t batch, const GpuMachineModel &machine);

/// The serial chain of a launch of `op` (SerialChains.cpp), none for kernels
/// without one.
std::optional<ExtraTerm> serialChain(mlir::Operation &op, const LaunchEstimate &launch,
                                     const GpuMachineModel &machine);

/// Fills a generated kernel's occupancy, memory, compute, chain and
/// predicted times (its blocks, threads, bytes, FLOPs and read streams set).
void applyKernelModel(mlir::Operation *op, LaunchEstimate &launch, int64_t batch,
                      const KernelResources *resources, const GpuMachineModel &machine);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_LAUNCHMODEL_H
