//===- LaunchReport.h - a training step's launches against a roofline -*- C++ -*-===//
//
// `stringc MODEL.pe --target=cuda --launch-report [--batch=N]` (docs/cuda.md,
// "Launch report"): every launch of one training step on the device (the
// @gradients step program, then the runtime's gradient norm and optimizer
// launches) with its grid, the bytes it moves, its FLOPs and a roofline time
// on a model of an H100, so that GPU speed problems show without a GPU.
//
// The model (docs/cuda.md, "Launch report", has the table and the sources of
// the constants), per launch of a generated kernel:
//   occupancy = resident blocks and warps per SM from ptxas -v's registers
//               and shared memory and the block's threads (KernelResources.h);
//   memory    = bytes / min(bandwidth, resident warps x bytes a warp keeps in
//               flight / memory latency)     (Little's law, over the SMs the
//               grid fills);
//   compute   = FLOPs / (peak x the fraction of SMs the grid fills);
//   chain     = the kernel's serial chain where it has one (SerialChains.cpp:
//               a block-serial solve, the relative attention's re-reads),
//               or its measured time per work (MeasuredKernels.cpp: the
//               attention kernels);
//   predicted = max(minimum, memory, compute, chain).
// A cuBLAS GEMM: the table of GEMMs measured on an H100 (MeasuredKernels.cpp),
// by arithmetic, FLOPs and bytes. The step's prediction is the sum of its
// launches'; its bound the sum of max(bytes / bandwidth, FLOPs / peak).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_LAUNCHREPORT_H
#define STRINGC_CUDAGEN_LAUNCHREPORT_H

#include "stringc/CudaGen/GPUKernels.h"
#include "stringc/CudaGen/KernelResources.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stringc::cudagen {

/// The GPU the report predicts for. Defaults: NVIDIA H100 SXM (dense peaks);
/// every constant's source is in docs/cuda.md ("Launch report").
struct GpuMachineModel {
  std::string name = "H100 SXM";
  int64_t sms = 132;
  double clockHz = 1.98e9;             // boost clock (67 TFLOP/s f32 = 132 x 128 x 2 x 1.98 GHz)
  double bytesPerSecond = 3.35e12;     // HBM3
  double f32FlopsPerSecond = 67e12;
  double f64FlopsPerSecond = 34e12;
  double tf32FlopsPerSecond = 495e12;
  double bf16FlopsPerSecond = 989e12;
  double minLaunchSeconds = 3e-6;
  double l2BytesPerSecond = 5.5e12;    // L2 hits (re-read tables, SerialChains.cpp)
  /// Little's law: a load's latency from DRAM (unloaded, ~600 cycles) and
  /// the bytes one warp keeps in flight per operand stream it reads (32
  /// lanes x 4 bytes: the generated kernels load one f32 per lane per
  /// stream before they use it).
  double memoryLatencySeconds = 600 / 1.98e9;
  double bytesInFlightPerWarpStream = 128;
  /// Per-SM limits of sm_90 (CUDA C Programming Guide, compute capability 9.0).
  int64_t registersPerSM = 65536;
  int64_t maxWarpsPerSM = 64;
  int64_t maxBlocksPerSM = 32;
  int64_t sharedBytesPerSM = 228 * 1024;
  int64_t sharedReservedPerBlock = 1024;
  /// Latencies of the serial chains (SerialChains.cpp), in cycles: a dependent
  /// f32 FMA, an f64 FMA, a shared-memory load, a block barrier, and the
  /// issue cycles of one warp's 64-bit integer division or remainder (an
  /// emulated sequence of ~70 instructions on sm_90: no hardware i64 divide).
  double fmaCycles = 4, f64FmaCycles = 8, sharedLoadCycles = 30, barrierCycles = 20;
  double i64DivideCycles = 70;
};

/// A machine by name: "h100" (H100 SXM, the default) or "h200" (H200 SXM:
/// the same GH100 chip and clocks, 4.8 TB/s of HBM3e), then optional
/// ",KEY=VALUE" overrides of its constants (for the calibration's tests):
/// bandwidth (B/s), latency_ns, min_us, f32, tf32, bf16 (FLOP/s), sms.
mlir::FailureOr<GpuMachineModel> gpuMachineByName(const std::string &spec, std::string &message);

/// The arithmetic a launch's FLOPs run at.
enum class LaunchArithmetic { F32, TF32, BF16 };
const char *launchArithmeticName(LaunchArithmetic arithmetic); // "f32", "tf32", "bf16"

struct LaunchEstimate {
  std::string program;  // "gradients", "optimizer" or "data"
  int64_t op = -1;      // op index in the program; -1 for the optimizer's launches
  std::string opName;   // "pe.layer_norm_grad", or "optimizer"
  std::string kernel;   // kernel name, or "cublas gemm"
  // A grouped GEMM (one cublasGemmBatchedEx, stringrt::CudaGemm::groupSize):
  // the op index of every member, `op` first; its bytes and FLOPs are the
  // members' sums. Empty otherwise.
  std::vector<int64_t> groupOps;
  int64_t blocks = -1;  // -1: chosen by cuBLAS (counted as filling the GPU)
  int64_t threadsPerBlock = 0;
  double bytes = 0, flops = 0;
  LaunchArithmetic arithmetic = LaunchArithmetic::F32;
  double boundSeconds = 0;     // the roofline time on the whole GPU
  double predictedSeconds = 0; // with the fraction of the SMs its grid fills
  bool growsWithBatch = false; // the bytes it moves depend on the batch
  // The model's terms (LaunchReport.h's header), in seconds, and the one
  // that sets predictedSeconds: "min", "memory", "compute", "chain", "gemm".
  int64_t readStreams = 0;     // operand buffers it reads (Little's law)
  // The bytes one warp keeps in flight over all its read streams: 32 lanes
  // x the elements a lane loads per stream before using them (1; 8 for the
  // vectorised kernels, KernelDef::elementsPerLoad) x the stream's element
  // size (a scalar bf16 stream 64 B, an f32 one 128 B); 0 (the optimizer's
  // and augmentation's launches): readStreams x
  // GpuMachineModel::bytesInFlightPerWarpStream.
  double bytesInFlightPerWarp = 0;
  std::vector<int64_t> integers; // its i64 arguments at the batch, in order
  int registers = 0;           // from ptxas -v; 0: not known
  int64_t sharedBytes = 0;     // static shared memory, from ptxas -v
  int64_t blocksPerSM = 0, warpsPerSM = 0; // resident (occupancy); 0: not known
  double memorySeconds = 0, computeSeconds = 0, chainSeconds = 0;
  // A column sum's finish (a launch taking tickets): the chunks its last
  // blocks add, and the time that finish adds after the rest of the launch
  // (included in predictedSeconds).
  int64_t finishChunks = 0;
  double finishSeconds = 0;
  const char *limit = "min";
  std::string chain;           // what the chain term counts, when it has one
  /// Whether it grows with the batch yet runs on fewer blocks than SMs, and
  /// that costs time: at its fraction of the GPU it takes longer than the
  /// shortest kernel (a copy of a few KB on 128 blocks does not count).
  bool underfilled(const GpuMachineModel &machine) const {
    return growsWithBatch && blocks >= 0 && blocks < machine.sms &&
           predictedSeconds > machine.minLaunchSeconds;
  }
  /// Whether it grows with the batch and its warps cannot keep enough bytes
  /// in flight (Little's law): its memory time, which sets its predicted
  /// time, is over twice its bytes at the full bandwidth and loses more than
  /// 20 us to that (a few-KB gather on 256 blocks does not count).
  bool latencyBound(const GpuMachineModel &machine) const {
    double full = bytes / machine.bytesPerSecond;
    return growsWithBatch && std::string_view(limit) == "memory" && memorySeconds > 2 * full &&
           memorySeconds - full > 20e-6;
  }
};

struct StepEstimate {
  int64_t batch = 0;
  /// Where the kernels' registers and shared memory came from ("ptxas -v
  /// sm_90"), or why they are not known (then every kernel counts as fully
  /// occupying its SMs).
  std::string occupancy = "not known";
  std::vector<LaunchEstimate> launches;
  double boundSeconds = 0, predictedSeconds = 0;
  /// pe_augment_images, when the plan has it (program "data"): the runtime
  /// launches it as each batch enters its step, only in runs that augment,
  /// so it is not in `launches` or the step's times.
  std::optional<LaunchEstimate> augmentation;
};

/// The launches of one training step at `batch` (the module must be the one
/// `plan` was made from). Fails with a diagnostic on the module for an op
/// the plan does not cover.
/// `resources`: each kernel's registers and shared memory (KernelResources.h,
/// from ptxas -v); kernels not in it count as fully occupying the SMs.
mlir::FailureOr<StepEstimate> estimateTrainingStep(mlir::ModuleOp train, const KernelPlan &plan,
                                                   GpuPrecision precision, int64_t batch,
                                                   const GpuMachineModel &machine = {},
                                                   const KernelResourceTable *resources = nullptr);

/// The report: one line per launch, the share of each op kind, the step's
/// predicted time and roofline bound, and the under-filled launches.
void printLaunchReport(const StepEstimate &step, const GpuMachineModel &machine,
                       llvm::raw_ostream &os);

/// The same as one JSON object (`--launch-report=json`): the machine, the
/// step's totals, and every launch with its terms (for tests/perf/calibrate.py).
void printLaunchReportJson(const StepEstimate &step, const GpuMachineModel &machine,
                           llvm::raw_ostream &os);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_LAUNCHREPORT_H
