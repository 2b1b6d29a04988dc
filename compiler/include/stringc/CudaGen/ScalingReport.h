//===- ScalingReport.h - data-parallel scaling of a training step -*- C++ -*-===//
//
// `stringc MODEL.pe --target=cuda --launch-report --ranks N
// [--interconnect nvlink|ib]` (docs/distributed.md, "Scaling predicted"):
// after the launch report, what N data-parallel ranks (one GPU each, the
// --batch per GPU) add to its step: the gradients' all-reduce and how much of
// it hides behind the backward.
//
// The model:
//   gradient bytes G  = 4 x the trainable parameters (f32 gradients)
//   ring all-reduce   = 2 (N - 1) / N x G out of (and into) every GPU
//   a bucket's time   = 2 (N - 1) x hop latency + 2 (N - 1) / N x its bytes
//                       / the link's bandwidth one way
//   buckets           = the gradients in reverse parameter order, cut at
//                       1 MiB (the first) and 25 MiB (the rest), as PyTorch
//                       DDP does; a bucket is ready when the launch report's
//                       timeline has run the op that produces its last
//                       gradient; one all-reduce at a time, in the order
//                       they become ready, on a stream of its own beside the
//                       backward: what the runtime's GPU ranks do
//                       (runtime/include/stringrt/cuda/GradientBuckets.h;
//                       its buckets also hold the padding between
//                       parameters, and the 4-byte loss is summed first)
//   exposed           = the last all-reduce's end - the end of @gradients
//   efficiency        = step / (step + exposed)   (the same per-GPU batch)
// Links (one direction, per GPU): NVLink 4, 900 GB/s per GPU both ways =
// 450 GB/s, 1 us a hop; InfiniBand 400 Gb/s = 50 GB/s, 4 us a hop (across
// nodes every GPU's ring link runs at its own NIC's rate).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_SCALINGREPORT_H
#define STRINGC_CUDAGEN_SCALINGREPORT_H

#include "stringc/CudaGen/LaunchReport.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringc::cudagen {

struct Interconnect {
  std::string name;
  double bytesPerSecond = 0; // one direction, per GPU
  double hopSeconds = 0;     // one step of a ring
};
Interconnect nvlink4();
Interconnect infiniband400();

struct GradientBucket {
  int64_t params = 0;       // gradients in it
  double bytes = 0;
  double readySeconds = 0;  // on the step's timeline
  double startSeconds = 0, endSeconds = 0; // its all-reduce
};

struct ScalingEstimate {
  int64_t ranks = 0;
  Interconnect link;
  double gradientBytes = 0;
  double allReduceBytes = 0;    // 2 (N - 1) / N x gradientBytes, per GPU
  double allReduceSeconds = 0;  // every bucket's time, one after another
  double stepSeconds = 0;       // one GPU's step (the launch report's)
  double backwardEndSeconds = 0; // the end of @gradients on that timeline
  double exposedSeconds = 0;
  std::vector<GradientBucket> buckets;
  double efficiency() const { return stepSeconds / (stepSeconds + exposedSeconds); }
  double efficiencyWithoutOverlap() const {
    return stepSeconds / (stepSeconds + allReduceSeconds);
  }
};

/// The all-reduce of `step`'s gradients over `ranks` GPUs on `link`. Fails
/// with a diagnostic on the module when @gradients returns no gradients.
mlir::FailureOr<ScalingEstimate> estimateScaling(mlir::ModuleOp train, const StepEstimate &step,
                                                 int64_t ranks, const Interconnect &link);

/// The scaling section of the launch report (after printLaunchReport).
void printScalingReport(const ScalingEstimate &scaling, const StepEstimate &step,
                        llvm::raw_ostream &os);

/// The hook CudaTarget calls: the section for `ranks` (> 0) on `interconnect`
/// ("nvlink", "ib", or "" for NVLink up to 8 ranks, InfiniBand beyond).
mlir::LogicalResult reportScaling(mlir::ModuleOp train, const StepEstimate &step, int64_t ranks,
                                  const std::string &interconnect, llvm::raw_ostream &os);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_SCALINGREPORT_H
