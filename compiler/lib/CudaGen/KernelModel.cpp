//===- KernelModel.cpp - occupancy, Little's law and the roofline ---------===//
//
// A generated kernel's launch (LaunchReport.h, docs/cuda.md "Launch
// report"):
//   occupancy: blocks per SM = min(32, 64 warps / warps a block, the
//     register file / the block's registers, shared memory / the block's);
//   the grid fills min(blocks, SMs) SMs with min(resident, ceil(blocks /
//     SMs)) blocks each;
//   memory  = bytes / min(bandwidth, filled SMs x their warps x the bytes
//             a warp keeps in flight / latency)   (Little's law: what the
//             warps keep in flight over how long a load takes; a warp: 32
//             lanes x 1 element of each read stream's type, 8 for the
//             vectorised kernels: 128 B an f32 stream, 64 B a scalar bf16
//             one);
//   compute = FLOPs / (peak x filled SMs / SMs);
//   then the attention kernels' measured rate or a serial chain, where one
//   applies; the prediction is the largest term, at least the minimum.
//
//===----------------------------------------------------------------------===//
#include "LaunchModel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace mlir;

namespace stringc::cudagen {

Occupancy occupancyOf(const KernelResources &resources, int64_t threadsPerBlock,
                      const GpuMachineModel &machine) {
  Occupancy o;
  int64_t warps = std::max<int64_t>(1, (threadsPerBlock + 31) / 32);
  int64_t blocks = std::min(machine.maxBlocksPerSM, machine.maxWarpsPerSM / warps);
  o.limit = blocks == machine.maxBlocksPerSM ? "blocks" : "warps";
  if (resources.registers > 0) {
    // Registers go to warps in units of 256 (8 a thread), from four
    // quarters of the register file, one per scheduler.
    int64_t perWarp = (int64_t(resources.registers) * 32 + 255) / 256 * 256;
    int64_t warpsByRegisters = 4 * ((machine.registersPerSM / 4) / perWarp);
    int64_t byRegisters = warpsByRegisters / warps;
    if (byRegisters < blocks) {
      blocks = byRegisters;
      o.limit = "registers";
    }
  }
  if (resources.sharedBytes > 0) {
    int64_t byShared =
        machine.sharedBytesPerSM / (resources.sharedBytes + machine.sharedReservedPerBlock);
    if (byShared < blocks) {
      blocks = byShared;
      o.limit = "shared";
    }
  }
  o.blocksPerSM = blocks;
  o.warpsPerSM = blocks * warps;
  return o;
}

void applyKernelModel(Operation *op, LaunchEstimate &e, int64_t batch,
                      const KernelResources *resources, const GpuMachineModel &machine) {
  KernelResources known = resources ? *resources : KernelResources{};
  e.registers = known.registers;
  e.sharedBytes = known.sharedBytes;
  Occupancy o = occupancyOf(known, std::max<int64_t>(1, e.threadsPerBlock), machine);
  e.blocksPerSM = o.blocksPerSM;
  e.warpsPerSM = o.warpsPerSM;

  const double blocks = double(std::max<int64_t>(1, e.blocks));
  const double filledSMs = std::min(blocks, double(machine.sms));
  const double blocksPerFilledSM =
      std::min(double(std::max<int64_t>(1, o.blocksPerSM)), std::ceil(blocks / double(machine.sms)));
  const double warpsPerBlock = double(std::max<int64_t>(1, (e.threadsPerBlock + 31) / 32));
  const double perWarp = e.bytesInFlightPerWarp > 0
                            ? e.bytesInFlightPerWarp
                            : double(std::max<int64_t>(1, e.readStreams)) *
                                  machine.bytesInFlightPerWarpStream;
  const double inFlight = filledSMs * blocksPerFilledSM * warpsPerBlock * perWarp;
  const double bandwidth = std::min(machine.bytesPerSecond, inFlight / machine.memoryLatencySeconds);
  e.memorySeconds = e.bytes / bandwidth;
  double peak = e.arithmetic == LaunchArithmetic::BF16 ? machine.bf16FlopsPerSecond
                                                       : machine.f32FlopsPerSecond;
  e.computeSeconds = e.flops / (peak * filledSMs / double(machine.sms));
  e.chainSeconds = 0;
  e.chain.clear();
  if (op) {
    std::optional<ExtraTerm> extra = attentionTime(*op, e, batch, machine);
    if (!extra)
      extra = serialChain(*op, e, machine);
    if (extra) {
      e.chainSeconds = extra->seconds;
      e.chain = extra->what;
    }
  }
  e.predictedSeconds = machine.minLaunchSeconds;
  e.limit = "min";
  auto consider = [&](double seconds, const char *what) {
    if (seconds > e.predictedSeconds) {
      e.predictedSeconds = seconds;
      e.limit = what;
    }
  };
  consider(e.memorySeconds, "memory");
  consider(e.computeSeconds, "compute");
  consider(e.chainSeconds, e.chain.rfind("measured", 0) == 0 ? "measured" : "chain");
  // A column sum's finish runs after every other block of its column group
  // (OpKernelUtil.h, columnPartialsKernel): the fence and the ticket (two
  // memory latencies), then rounds of 4 x 32 chunks whose loads are in
  // flight together (one latency each); the barriers and butterflies are
  // short beside them.
  if (e.finishChunks > 0) {
    double rounds = std::ceil(std::ceil(double(e.finishChunks) / 32) / 4);
    e.finishSeconds = (2 + rounds) * machine.memoryLatencySeconds;
    e.predictedSeconds += e.finishSeconds;
  }
}

FailureOr<GpuMachineModel> gpuMachineByName(const std::string &spec, std::string &message) {
  GpuMachineModel machine;
  size_t comma = spec.find(',');
  std::string name = spec.substr(0, comma);
  if (name == "h200") {
    machine.name = "H200 SXM";
    machine.bytesPerSecond = 4.8e12;
  } else if (name != "h100") {
    message = "unknown GPU model '" + name + "' (expected h100 or h200)";
    return failure();
  }
  while (comma != std::string::npos) {
    size_t next = spec.find(',', comma + 1);
    std::string item = spec.substr(comma + 1, next == std::string::npos ? next : next - comma - 1);
    comma = next;
    size_t eq = item.find('=');
    char *end = nullptr;
    double value = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    std::string key = item.substr(0, eq);
    if (eq == std::string::npos || !end || *end || !(value > 0)) {
      message = "GPU model override '" + item + "' is not KEY=POSITIVE_NUMBER";
      return failure();
    }
    if (key == "bandwidth")
      machine.bytesPerSecond = value;
    else if (key == "latency_ns")
      machine.memoryLatencySeconds = value * 1e-9;
    else if (key == "min_us")
      machine.minLaunchSeconds = value * 1e-6;
    else if (key == "f32")
      machine.f32FlopsPerSecond = value;
    else if (key == "tf32")
      machine.tf32FlopsPerSecond = value;
    else if (key == "bf16")
      machine.bf16FlopsPerSecond = value;
    else if (key == "sms")
      machine.sms = int64_t(value);
    else {
      message = "unknown GPU model constant '" + key +
                "' (bandwidth, latency_ns, min_us, f32, tf32, bf16, sms)";
      return failure();
    }
    machine.name += " (" + item + ")";
  }
  return machine;
}

} // namespace stringc::cudagen
