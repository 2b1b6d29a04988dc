// stringrun train: a training run on the CPU, on a device (DeviceRun.h) or on
// one rank of a data-parallel run (RankRun.h).

#include "Commands.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

namespace stringrun {

int runTrain(const Args &args, stringrt::Model &model, Printer &printer,
             int replicas, stringrt::TrainBackend *backend,
             stringrt::Communicator *ranks) {
  stringrt::TrainOptions options;
  options.epochs = number<int64_t>(args, "--epochs", 1).value_or(0);
  options.steps = number<int64_t>(args, "--steps", 1).value_or(0);
  options.batch = number<int64_t>(args, "--batch", 1).value_or(0);
  options.seed = number<uint64_t>(args, "--seed", 0);
  options.initSeed = number<uint64_t>(args, "--init-seed", 0).value_or(0);
  options.checkpointPath = value(args, "--checkpoint").value_or("");
  options.resumePath = value(args, "--resume").value_or("");
  options.logPath = value(args, "--log").value_or("");
  options.threads = replicas;
  options.stopAfter = number<int64_t>(args, "--stop-after", 1).value_or(0);
  options.accumulate = number<int64_t>(args, "--accumulate", 1).value_or(1);
  options.augment = augmentOption(args);
  options.evaluate = !args.noEval;
  stringrt::DataParallelOptions parallel;
  parallel.zeroStage = zeroStage(args);
  if (parallel.zeroStage > 0 && !ranks)
    throw stringrt::Error(fmt::format(
        "--zero {} shards the optimizer state{} across the ranks of a data-parallel run "
        "(mpirun -np N stringrun train ...; docs/distributed.md); this is one process",
        parallel.zeroStage, parallel.zeroStage == 2 ? " and the gradients" : ""));
  stringrt::DataSet data =
      stringrt::loadModelData(model, value(args, "--data").value_or(""));
  std::unique_ptr<stringrt::DataParallelBackend> onRanks;
  const bool lead = !ranks || ranks->rank() == 0;
  if (ranks) {
    if (!backend) { // the CPU's ranks; a GPU rank's backend comes made (DeviceRanks.h)
      onRanks = stringrt::makeDataParallelBackend(model, *ranks, parallel);
      backend = onRanks.get();
    }
    // Every rank takes part in each checkpoint (the backend gathers what it
    // holds); rank 0 alone writes it and the log.
    // Ranks run their shares in --accumulate A micro-batches each.
    const long long parts = static_cast<long long>(options.accumulate);
    if (!lead)
      options.logPath = "";
    else if (parts > 1)
      std::printf("data-parallel on %d ranks: each takes its share of every batch in %lld "
                  "micro-batches, as --accumulate %lld splits it\n",
                  ranks->size(), parts, ranks->size() * parts);
    else
      std::printf("data-parallel on %d ranks: each takes its share of every batch, as "
                  "--accumulate %d splits it\n",
                  ranks->size(), ranks->size());
    // (a GPU rank's backend reports what its device holds)
    const stringrt::DataParallelBackend *sharded =
        onRanks ? onRanks.get() : dynamic_cast<const stringrt::DataParallelBackend *>(backend);
    if (lead && sharded && parallel.zeroStage > 0) {
      const stringrt::OptimizerStateMemory memory = sharded->optimizerStateMemory();
      constexpr double kMiB = 1024.0 * 1024.0;
      const int stage = parallel.zeroStage; // (each line names the run's stage)
      std::printf("zero-%d: optimizer state per rank %.2f MiB of %.2f MiB (%zu of %zu bytes, "
                  "the largest of %d slices)\n",
                  stage, static_cast<double>(memory.largestRankBytes()) / kMiB,
                  static_cast<double>(memory.wholeBytes) / kMiB, memory.largestRankBytes(),
                  memory.wholeBytes, ranks->size());
      if (memory.masterWholeBytes > 0)
        std::printf("zero-%d: f32 master weights per rank %.2f MiB of %.2f MiB (%zu of %zu "
                    "bytes, the largest of %d slices, with the parameters kernels read in f32 "
                    "whole and their all-gather's room; the bf16 copy whole)\n",
                    stage, static_cast<double>(memory.largestMasterRankBytes()) / kMiB,
                    static_cast<double>(memory.masterWholeBytes) / kMiB,
                    memory.largestMasterRankBytes(), memory.masterWholeBytes, ranks->size());
      if (memory.gradientWholeBytes > 0)
        std::printf("zero-%d: gradients per rank after the sum %.2f MiB of %.2f MiB (%zu of %zu "
                    "bytes, the largest of %d slices; replicated ranks hold the whole)\n",
                    stage, static_cast<double>(memory.largestGradientRankBytes()) / kMiB,
                    static_cast<double>(memory.gradientWholeBytes) / kMiB,
                    memory.largestGradientRankBytes(), memory.gradientWholeBytes,
                    ranks->size());
    }
  }
  stringrt::TrainResult result =
      stringrt::train(model, data, options, lead ? &printer : nullptr, backend);
  if (!lead)
    return 0;
  printer.finish();
  if (result.finished)
    std::printf("trained %lld steps, final loss %.6f\n",
                static_cast<long long>(result.steps), result.lastLoss);
  else
    std::printf("stopped after step %lld of %lld, loss %.6f\n",
                static_cast<long long>(result.steps),
                static_cast<long long>(result.plan.totalSteps),
                result.lastLoss);
  return 0;
}

} // namespace stringrun
