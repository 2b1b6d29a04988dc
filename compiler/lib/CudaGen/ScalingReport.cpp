//===- ScalingReport.cpp - data-parallel scaling of a training step -------===//
//
// The model is in ScalingReport.h: the launch report's timeline says when
// the backward produces each gradient; the gradients' buckets all-reduce one
// after another as they become ready.
//
//===----------------------------------------------------------------------===//
#include "stringc/CudaGen/ScalingReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cstdio>

using namespace mlir;

namespace stringc::cudagen {

Interconnect nvlink4() { return {"NVLink 4", 450e9, 1e-6}; }
Interconnect infiniband400() { return {"InfiniBand 400 Gb/s", 50e9, 4e-6}; }

namespace {

constexpr double kFirstBucketBytes = 1 << 20;
constexpr double kBucketBytes = 25 << 20;

double ringSeconds(double bytes, int64_t ranks, const Interconnect &link) {
  if (ranks <= 1)
    return 0;
  const double n = double(ranks);
  return 2 * (n - 1) * link.hopSeconds + 2 * (n - 1) / n * bytes / link.bytesPerSecond;
}

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  return text;
}

} // namespace

FailureOr<ScalingEstimate> estimateScaling(ModuleOp train, const StepEstimate &step,
                                           int64_t ranks, const Interconnect &link) {
  auto func = train.lookupSymbol<func::FuncOp>("gradients");
  if (!func)
    return train.emitError() << "the scaling report needs @gradients (run pe-autodiff first)";
  // When each op of @gradients ends on the launch report's timeline (an op
  // without launches ends with the launches before it).
  llvm::DenseMap<Operation *, int64_t> index;
  for (Operation &op : func.getBody().front().without_terminator())
    index[&op] = int64_t(index.size());
  std::vector<double> opEnd(index.size(), 0.0);
  double clock = 0;
  ScalingEstimate s;
  s.ranks = ranks;
  s.link = link;
  s.stepSeconds = step.predictedSeconds;
  for (const LaunchEstimate &e : step.launches) {
    if (e.program != "gradients")
      continue;
    clock += e.predictedSeconds;
    if (e.op >= 0 && size_t(e.op) < opEnd.size())
      opEnd[size_t(e.op)] = clock;
  }
  s.backwardEndSeconds = clock;
  for (size_t i = 1; i < opEnd.size(); ++i)
    opEnd[i] = std::max(opEnd[i], opEnd[i - 1]);

  // The gradients in parameter order, with when each is ready.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  struct Gradient {
    double bytes, ready;
  };
  std::vector<Gradient> grads;
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    if (!func.getResultAttrOfType<StringAttr>(r, "pe.grad"))
      continue;
    Value value = ret.getOperand(r);
    auto type = dyn_cast<ShapedType>(value.getType());
    if (!type || !type.hasStaticShape())
      return func.emitError() << "the scaling report needs gradients of static shapes";
    double ready = 0;
    if (Operation *def = value.getDefiningOp())
      if (auto it = index.find(def); it != index.end())
        ready = opEnd[size_t(it->second)];
    grads.push_back({4.0 * double(type.getNumElements()), ready});
  }
  if (grads.empty())
    return func.emitError() << "the scaling report needs trainable parameters: @gradients "
                               "returns no gradients";

  // Buckets in reverse parameter order, all-reduced in turn as they fill.
  GradientBucket bucket;
  auto close = [&] {
    if (bucket.params == 0)
      return;
    s.buckets.push_back(bucket);
    bucket = {};
  };
  for (auto it = grads.rbegin(); it != grads.rend(); ++it) {
    ++bucket.params;
    bucket.bytes += it->bytes;
    bucket.readySeconds = std::max(bucket.readySeconds, it->ready);
    s.gradientBytes += it->bytes;
    if (bucket.bytes >= (s.buckets.empty() ? kFirstBucketBytes : kBucketBytes))
      close();
  }
  close();
  // Launched in the order they become ready (the runtime's order:
  // runtime/include/stringrt/cuda/GradientBuckets.h), ties in cutting order.
  std::stable_sort(s.buckets.begin(), s.buckets.end(),
                   [](const GradientBucket &a, const GradientBucket &b) {
                     return a.readySeconds < b.readySeconds;
                   });
  double channel = 0;
  for (GradientBucket &b : s.buckets) {
    b.startSeconds = std::max(b.readySeconds, channel);
    b.endSeconds = b.startSeconds + ringSeconds(b.bytes, ranks, link);
    channel = b.endSeconds;
    s.allReduceSeconds += b.endSeconds - b.startSeconds;
  }
  s.allReduceBytes = ranks > 1 ? 2.0 * double(ranks - 1) / double(ranks) * s.gradientBytes : 0;
  s.exposedSeconds = std::max(0.0, channel - s.backwardEndSeconds);
  return s;
}

void printScalingReport(const ScalingEstimate &s, const StepEstimate &step,
                        llvm::raw_ostream &os) {
  auto us = [](double seconds) { return llvm::format("%.1f", seconds * 1e6); };
  os << "\nscaling: " << s.ranks << " data-parallel ranks, one GPU each, batch " << step.batch
     << " per GPU (global " << step.batch * s.ranks << "), over " << s.link.name << " ("
     << llvm::format("%.0f", s.link.bytesPerSecond / 1e9) << " GB/s one way per GPU, "
     << us(s.link.hopSeconds) << " us a ring hop)\n";
  os << "gradients: " << megabytes(s.gradientBytes) << " (f32) in " << s.buckets.size()
     << " buckets (1 MiB first, then 25 MiB; reverse parameter order)\n";
  os << "all-reduce (ring): 2 (N - 1) / N x " << megabytes(s.gradientBytes) << " = "
     << megabytes(s.allReduceBytes) << " per GPU per step: "
     << us(ringSeconds(s.gradientBytes, s.ranks, nvlink4())) << " us on NVLink 4, "
     << us(ringSeconds(s.gradientBytes, s.ranks, infiniband400()))
     << " us on InfiniBand 400 Gb/s (one bucket); in these buckets on " << s.link.name << " "
     << us(s.allReduceSeconds) << " us\n";
  char header[96];
  std::snprintf(header, sizeof header, "  %6s %8s %10s %10s %10s %10s\n", "bucket", "grads",
                "MB", "ready us", "start us", "end us");
  os << header;
  for (size_t i = 0; i < s.buckets.size(); ++i) {
    const GradientBucket &b = s.buckets[i];
    os << llvm::format("  %6zu %8lld %10.2f %10.1f %10.1f %10.1f\n", i + 1,
                       (long long)b.params, b.bytes / 1e6, b.readySeconds * 1e6,
                       b.startSeconds * 1e6, b.endSeconds * 1e6);
  }
  const double hidden = s.allReduceSeconds - s.exposedSeconds;
  os << "overlap: the backward (@gradients) ends at " << us(s.backwardEndSeconds) << " us; "
     << us(hidden) << " us of the all-reduce hide behind it, " << us(s.exposedSeconds)
     << " us exposed\n";
  os << "predicted step on " << s.ranks << " GPUs: " << us(s.stepSeconds + s.exposedSeconds)
     << " us (one GPU: " << us(s.stepSeconds) << " us); scaling efficiency "
     << llvm::format("%.1f", 100 * s.efficiency()) << "% (without overlap "
     << llvm::format("%.1f", 100 * s.efficiencyWithoutOverlap()) << "%)\n";
}

LogicalResult reportScaling(ModuleOp train, const StepEstimate &step, int64_t ranks,
                            const std::string &interconnect, llvm::raw_ostream &os) {
  const bool ib = interconnect == "ib" || (interconnect.empty() && ranks > 8);
  FailureOr<ScalingEstimate> s =
      estimateScaling(train, step, ranks, ib ? infiniband400() : nvlink4());
  if (failed(s))
    return failure();
  printScalingReport(*s, step, os);
  return success();
}

} // namespace stringc::cudagen
