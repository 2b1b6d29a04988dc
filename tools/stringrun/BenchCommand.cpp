// stringrun bench: times training steps on the CPU (and --profile: by op kind).

#include "Commands.h"
#include "ProfileTable.h"

#include "stringrt/cpu/ThreadPool.h"

#include <fmt/format.h>

#include <cstdio>

namespace stringrun {

int runBench(const Args &args, stringrt::Model &model) {
  const int64_t batch =
      number<int64_t>(args, "--batch", 1).value_or(stringrt::kDefaultBatch);
  const int64_t steps = number<int64_t>(args, "--steps", 1).value_or(10);
  stringrt::DataSet data =
      stringrt::loadModelData(model, value(args, "--data").value_or(""));
  stringrt::OpProfile profile;
  stringrt::BenchResult r =
      stringrt::bench(model, data, batch, steps, args.profile ? &profile : nullptr);
  const std::string kernels =
      model.kernels() != stringrt::KernelSet::Reference
          ? fmt::format("{} kernels, {} thread{}", stringrt::kernelSetName(model.kernels()),
                        stringrt::cpu::numThreads(),
                        stringrt::cpu::numThreads() == 1 ? "" : "s")
          : std::string("reference kernels");
  std::printf("bench '%s': %lld steps of batch %lld in %.3f s: %.3f steps/s, "
              "%.1f %s/s (%.2f ms/step; %s)\n",
              model.manifest().model.c_str(), static_cast<long long>(r.steps),
              static_cast<long long>(r.batch), r.seconds, r.stepsPerSecond,
              r.unitsPerSecond, r.unit.c_str(),
              r.steps > 0 ? 1000.0 * r.seconds / static_cast<double>(r.steps)
                          : 0.0,
              kernels.c_str());
  const auto &fwd = model.manifest().forward.arena;
  const auto &grad = model.manifest().gradients.arena;
  if (model.arenaPlan() && fwd && grad) {
    // At the batch benchmarked; the package's report (the compiler's
    // figures, at its report batch) adds what the plan saves.
    std::printf("memory: arena plan; at batch %lld the arenas hold %lld bytes (forward) and "
                "%lld bytes (gradients)\n",
                static_cast<long long>(r.batch),
                static_cast<long long>(model.programBytes("forward", r.batch)),
                static_cast<long long>(model.programBytes("gradients", r.batch)));
    std::printf("memory: the package's report, at batch %lld: %lld and %lld bytes, %lld and "
                "%lld without reuse\n",
                static_cast<long long>(fwd->reportBatch), static_cast<long long>(fwd->arenaBytes),
                static_cast<long long>(grad->arenaBytes),
                static_cast<long long>(fwd->noReuseBytes),
                static_cast<long long>(grad->noReuseBytes));
  } else
    std::printf("memory: buffers recycled at run time (no arena plan)\n");
  if (args.profile)
    stringrun::printProfile(profile, r.steps, r.seconds,
                            "(outside the programs: optimizer, batches)");
  return 0;
}

} // namespace stringrun
