// One training run as train() (Trainer.cpp) sets it up, shared by its step
// loop (TrainSteps.cpp) and its cadences (TrainCadence.cpp): when it
// evaluates and when it writes a checkpoint. Private to the runtime.
#pragma once

#include "training/TrainLog.h"
#include "stringrt/Trainer.h"

#include <chrono>
#include <cstdint>
#include <vector>

namespace stringrt::detail {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What the steps of a run read and write: set up and validated by train().
struct TrainRun {
  Model &model;
  const DataSet &data;
  const TrainOptions &options;
  const TrainPlan &plan;
  int64_t endStep;   // the step after the last one this invocation takes (--stop-after)
  bool hostAugments; // the host augments the batches (the backend does not)
  TrainBackend &backend;
  Optimizer &optimizer;
  const std::vector<OptimizerSlot> &slots;
  TrainLog &log;
  TrainObserver &observer;
  TrainResult &result; // steps and losses so far, the last evaluations
};

// The step loop: steps plan.startStep .. endStep - 1, each queued on the
// backend, collected, checked, logged and reported; at each epoch's end and
// the run's, the evaluation and the checkpoint (below).
void runSteps(TrainRun &run);

// Whether step s (0-based) ends an epoch or the run: the evaluation and the
// checkpoint follow it, and the backend's queue is drained before it.
bool endsEpochOrRun(const TrainPlan &plan, int64_t s, int64_t endStep);

// The evaluation cadence: after step s when endsEpochOrRun, unless --no-eval
// or an empty test split; the EMA weights too where the optimizer keeps them.
void evaluateAfterStep(TrainRun &run, int64_t s);

// The checkpoint cadence: after step s when endsEpochOrRun, where the run
// has a checkpoint path; with the backend's parameters and optimizer state
// (fetched on every rank; written where the backend writesCheckpoints()).
void checkpointAfterStep(TrainRun &run, int64_t s);

} // namespace stringrt::detail
