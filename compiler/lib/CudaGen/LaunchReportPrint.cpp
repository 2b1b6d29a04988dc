//===- LaunchReportPrint.cpp - the launch report as text and as JSON ------===//
//
// `stringc --target=cuda --launch-report[=text|json]` (docs/cuda.md, "Launch
// report"): the launches of LaunchReport.h's estimate, one a line, with the
// model's terms; or the same as one JSON object for tests/perf/calibrate.py.
//
//===----------------------------------------------------------------------===//
#include "stringc/CudaGen/LaunchReport.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <map>

namespace stringc::cudagen {

namespace {

std::string scaled(double value, const char *unit) {
  const char *prefixes[] = {"", "K", "M", "G", "T"};
  int index = 0;
  while (value >= 1000 && index < 4) {
    value /= 1000;
    ++index;
  }
  char text[32];
  std::snprintf(text, sizeof text, index ? "%.1f %s%s" : "%.0f %s%s", value, prefixes[index],
                unit);
  return text;
}

/// printf into a std::string (llvm::format takes no string literals).
template <typename... Args> std::string formatted(const char *format, Args... args) {
  char text[256];
  std::snprintf(text, sizeof text, format, args...);
  return text;
}

} // namespace

void printLaunchReport(const StepEstimate &step, const GpuMachineModel &machine,
                       llvm::raw_ostream &os) {
  os << "launch report: one training step at batch " << step.batch << ", predicted for an "
     << machine.name << " (" << machine.sms << " SMs, "
     << llvm::format("%.2f", machine.bytesPerSecond / 1e12) << " TB/s, "
     << llvm::format("%.0f", machine.f32FlopsPerSecond / 1e12) << " TFLOP/s f32, "
     << llvm::format("%.0f", machine.tf32FlopsPerSecond / 1e12) << " tf32, "
     << llvm::format("%.0f", machine.bf16FlopsPerSecond / 1e12) << " bf16)\n";
  os << "occupancy: " << step.occupancy << "\n";
  os << formatted("%4s %-28s %-40s %8s %7s %10s %11s %5s %10s %12s %5s %7s %-8s\n", "#", "op",
                  "kernel", "blocks", "threads", "bytes", "FLOPs", "unit", "bound us",
                  "predicted us", "regs", "warps/SM", "limit");
  for (size_t i = 0; i < step.launches.size(); ++i) {
    const LaunchEstimate &e = step.launches[i];
    std::string op = e.op >= 0 ? e.opName + " #" + std::to_string(e.op) : e.opName;
    for (size_t m = 1; m < e.groupOps.size(); ++m) // a grouped GEMM: "#26+27+28"
      op += "+" + std::to_string(e.groupOps[m]);
    std::string blocks = e.blocks < 0 ? "-" : std::to_string(e.blocks);
    std::string threads = e.threadsPerBlock ? std::to_string(e.threadsPerBlock) : "-";
    std::string registers = e.registers ? std::to_string(e.registers) : "-";
    std::string warps = e.warpsPerSM ? std::to_string(e.warpsPerSM) : "-";
    os << formatted("%4zu %-28s %-40s %8s %7s %10s %11s %5s %10.2f %12.2f %5s %7s %-8s%s\n", i + 1,
                    op.c_str(), e.kernel.c_str(), blocks.c_str(), threads.c_str(),
                    scaled(e.bytes, "B").c_str(), scaled(e.flops, "FLOP").c_str(),
                    launchArithmeticName(e.arithmetic), e.boundSeconds * 1e6,
                    e.predictedSeconds * 1e6, registers.c_str(), warps.c_str(), e.limit,
                    e.underfilled(machine)    ? "  UNDERFILLED"
                    : e.latencyBound(machine) ? "  LATENCY-BOUND"
                                              : "");
  }

  // The share of each op kind, largest first.
  std::map<std::string, std::pair<int64_t, double>> kinds;
  for (const LaunchEstimate &e : step.launches) {
    auto &[count, seconds] = kinds[e.opName];
    ++count;
    seconds += e.predictedSeconds;
  }
  std::vector<std::pair<std::string, std::pair<int64_t, double>>> sorted(kinds.begin(),
                                                                         kinds.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto &a, const auto &b) { return a.second.second > b.second.second; });
  os << "\nby op kind:\n";
  os << formatted("  %-28s %8s %12s %7s\n", "op", "launches", "predicted us", "share");
  for (const auto &[name, entry] : sorted)
    os << formatted("  %-28s %8lld %12.2f %6.1f%%\n", name.c_str(), (long long)entry.first,
                       entry.second * 1e6,
                       step.predictedSeconds > 0 ? 100 * entry.second / step.predictedSeconds : 0);

  // What sets the predicted time: the share of each term.
  std::map<std::string, std::pair<int64_t, double>> limits;
  for (const LaunchEstimate &e : step.launches) {
    auto &[count, seconds] = limits[e.limit];
    ++count;
    seconds += e.predictedSeconds;
  }
  os << "\nby limit (what sets each launch's time):\n";
  for (const auto &[name, entry] : limits)
    os << formatted("  %-10s %8lld launches %12.2f us %6.1f%%\n", name.c_str(),
                    (long long)entry.first, entry.second * 1e6,
                    step.predictedSeconds > 0 ? 100 * entry.second / step.predictedSeconds : 0);

  int64_t underfilled = 0;
  for (const LaunchEstimate &e : step.launches)
    underfilled += e.underfilled(machine);
  os << "\nstep: " << step.launches.size() << " launches, predicted "
     << llvm::format("%.1f", step.predictedSeconds * 1e6) << " us, roofline bound "
     << llvm::format("%.1f", step.boundSeconds * 1e6) << " us (predicted / bound "
     << llvm::format("%.2f", step.boundSeconds > 0 ? step.predictedSeconds / step.boundSeconds : 1)
     << "x)\n";
  if (const std::optional<LaunchEstimate> &a = step.augmentation)
    os << "runs that augment (--augment, or the model's data section) add 1 launch, "
       << a->kernel << " on " << a->blocks << " blocks: predicted "
       << llvm::format("%.1f", a->predictedSeconds * 1e6) << " us, roofline bound "
       << llvm::format("%.1f", a->boundSeconds * 1e6) << " us (not in the step above)\n";
  os << "launches that grow with the batch on fewer blocks than SMs: " << underfilled << "\n";
  int64_t latencyBound = 0;
  for (const LaunchEstimate &e : step.launches)
    latencyBound += !e.underfilled(machine) && e.latencyBound(machine);
  os << "launches that grow with the batch and keep too few bytes in flight: " << latencyBound
     << "\n";
}


void printLaunchReportJson(const StepEstimate &step, const GpuMachineModel &machine,
                           llvm::raw_ostream &os) {
  llvm::json::Array launches;
  for (const LaunchEstimate &e : step.launches) {
    llvm::json::Object l{{"program", e.program},
                         {"op", e.opName},
                         {"op_index", e.op},
                         {"kernel", e.kernel},
                         {"group_ops", llvm::json::Array(e.groupOps)},
                         {"blocks", e.blocks},
                         {"threads", e.threadsPerBlock},
                         {"bytes", e.bytes},
                         {"flops", e.flops},
                         {"arithmetic", launchArithmeticName(e.arithmetic)},
                         {"registers", e.registers},
                         {"shared_bytes", e.sharedBytes},
                         {"blocks_per_sm", e.blocksPerSM},
                         {"warps_per_sm", e.warpsPerSM},
                         {"read_streams", e.readStreams},
                         {"bound_us", e.boundSeconds * 1e6},
                         {"memory_us", e.memorySeconds * 1e6},
                         {"compute_us", e.computeSeconds * 1e6},
                         {"chain_us", e.chainSeconds * 1e6},
                         {"finish_us", e.finishSeconds * 1e6},
                         {"chain", e.chain},
                         {"predicted_us", e.predictedSeconds * 1e6},
                         {"limit", e.limit},
                         {"underfilled", e.underfilled(machine)},
                         {"latency_bound", e.latencyBound(machine)}};
    launches.push_back(std::move(l));
  }
  llvm::json::Object machineJson{{"name", machine.name},
                                 {"sms", machine.sms},
                                 {"bytes_per_second", machine.bytesPerSecond},
                                 {"memory_latency_ns", machine.memoryLatencySeconds * 1e9},
                                 {"min_launch_us", machine.minLaunchSeconds * 1e6}};
  llvm::json::Object root{{"batch", step.batch},
                          {"machine", std::move(machineJson)},
                          {"occupancy", step.occupancy},
                          {"launch_count", int64_t(step.launches.size())},
                          {"predicted_us", step.predictedSeconds * 1e6},
                          {"bound_us", step.boundSeconds * 1e6},
                          {"launches", std::move(launches)}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

} // namespace stringc::cudagen
