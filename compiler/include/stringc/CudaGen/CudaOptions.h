//===- CudaOptions.h - what stringc --target=cuda makes, and how -*- C++ -*-===//
//
// The CUDA target's options (docs/cuda.md), free of MLIR types so that the
// driver's public header and stringc can use them.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_CUDAOPTIONS_H
#define STRINGC_CUDAGEN_CUDAOPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace stringc {

/// What --target=cuda produces.
enum class CudaEmit {
  /// The kernels after convert-gpu-to-nvvm (the NVVM and LLVM dialects).
  NVVM,
  /// The PTX of every kernel, each after a `// kernel: NAME` line.
  PTX,
  /// The package: manifest, kernel table, PTX and cubin per kernel.
  Package,
  /// The launch report of one training step (LaunchReport.h), as text.
  LaunchReport,
};

struct CudaOptions {
  /// The GPU architecture the cubins are built for (ptxas -arch).
  std::string arch = "sm_90";
  /// Also generate the kernels no op of the model uses (with no uses in the
  /// kernel table): every kernel the generator has, for testing it.
  bool allKernels = false;
  /// More kernels to generate without uses (stringc --gpu-kernel=NAME): a
  /// kernel or a bf16-storage variant such as pe_attention_mma_d16__bfff,
  /// for testing it.
  std::vector<std::string> extraKernels;
  /// The attention kernels' arithmetic: "fp32" (FMA) or "bf16" (tensor-core
  /// mma.sync, bf16 operands and f32 accumulation; sm_80 and newer).
  /// Recorded in the package's cuda section as "precision".
  std::string precision = "fp32";
  /// The batch size of CudaEmit::LaunchReport.
  int64_t reportBatch = 128;
  /// CudaEmit::LaunchReport as "text" or "json" (LaunchReport.h).
  std::string reportFormat = "text";
  /// The GPU CudaEmit::LaunchReport predicts for: "h100" or "h200", then
  /// optional ",KEY=VALUE" overrides (gpuMachineByName, LaunchReport.h).
  std::string reportMachine = "h100";
  /// > 0: the launch report adds the data-parallel scaling on this many
  /// GPUs (ScalingReport.h) over `reportInterconnect` ("nvlink", "ib", or
  /// "": NVLink up to 8 GPUs, InfiniBand beyond).
  int64_t reportRanks = 0;
  std::string reportInterconnect;
};

} // namespace stringc

#endif // STRINGC_CUDAGEN_CUDAOPTIONS_H
