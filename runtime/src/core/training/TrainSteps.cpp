// train()'s step loop (TrainRun.h): assembles the batches in the epoch's data
// order, queues each step on the backend, collects, checks, logs and reports
// its results, and at the end of each epoch and of the run hands over to the
// evaluation and checkpoint cadences (TrainCadence.cpp).

#include "training/TrainRun.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cmath>
#include <deque>
#include <map>
#include <new>
#include <optional>
#include <string>

namespace stringrt::detail {

void runSteps(TrainRun &r) {
  Model &model = r.model;
  const DataSet &data = r.data;
  const TrainPlan &plan = r.plan;
  const int64_t endStep = r.endStep;
  const bool hostAugments = r.hostAugments;
  TrainBackend &run = r.backend;
  TrainLog &log = r.log;
  TrainObserver &obs = r.observer;
  TrainResult &result = r.result;

  std::vector<int64_t> order;
  int64_t orderEpoch = -1;
  // The batch of the step before last, whose buffers the next batch reuses
  // (by then no backend reads it: the CPU has run that step, a device has
  // staged it).
  Batch spare;
  // Host time this epoch spent assembling batches, and waiting in collect()
  // for a backend's steps (a device's; the CPU computes in queue()).
  double epochBatchSeconds = 0, epochWaitSeconds = 0;
  // The rows of each step's batch the backend reads (a rank its share).
  const TrainBackend::BatchRows rows = run.batchRows(plan.batch);
  if (rows.begin < 0 || rows.count < 1 || rows.begin + rows.count > plan.batch)
    throw Error(fmt::format("the backend reads rows [{}, {}) of a batch of {}", rows.begin,
                            rows.begin + rows.count, plan.batch));
  // The batch of global step s (the data order of its epoch), those rows.
  auto batchOf = [&](int64_t s) {
    const auto assembleStart = Clock::now();
    const int64_t epoch = s / plan.stepsPerEpoch;
    if (epoch != orderEpoch) {
      order = epochOrder(plan.trainExamples, plan.seed, epoch);
      orderEpoch = epoch;
    }
    Batch b = data.batch(Split::Train,
                         order.data() + (s % plan.stepsPerEpoch) * plan.batch + rows.begin,
                         static_cast<size_t>(rows.count), std::move(spare));
    // On the host, before the backend sees the batch, unless the backend
    // took it over: the same bits either way (the draws depend on the
    // seed, the step and the sample only), and a resumed run augments as
    // an unbroken one.
    if (hostAugments)
      augmentBatchImages(plan.augment, plan.seed, s, b, rows.begin);
    epochBatchSeconds += secondsSince(assembleStart);
    return b;
  };
  const auto runStart = Clock::now();
  auto epochStart = runStart;
  double epochLoss = 0;
  int64_t epochSteps = 0;
  const int64_t units = data.unitsPerExample() * plan.batch;

  // Step s's results: checked, logged and reported; at the end of an epoch
  // or of the run, the evaluation and the checkpoint.
  auto finish = [&](int64_t s, float loss, const OptimizerStepInfo &info) {
    const int64_t epoch = s / plan.stepsPerEpoch;
    const int64_t k = s % plan.stepsPerEpoch;
    if (!std::isfinite(loss))
      throw Error(fmt::format("step {} (epoch {}): the loss is {}; stopping",
                              s + 1, epoch + 1, loss));
    epochLoss += loss;
    ++epochSteps;
    const double epochSeconds = secondsSince(epochStart);
    StepReport report;
    report.step = s + 1;
    report.epoch = epoch;
    report.stepInEpoch = k + 1;
    report.loss = loss;
    report.lr = info.lr;
    report.gradNorm = info.gradNorm;
    report.unitsPerSecond =
        epochSeconds > 0 ? static_cast<double>(units * epochSteps) / epochSeconds
                         : 0.0;
    const double perStep =
        secondsSince(runStart) / static_cast<double>(s + 1 - plan.startStep);
    report.etaSeconds = perStep * static_cast<double>(plan.totalSteps - s - 1);
    log.line(fmt::format("train,{},{},{:.9g},{:.9g},{:.9g},,,{:.1f}",
                         report.step, epoch + 1, loss, info.lr, info.gradNorm,
                         report.unitsPerSecond));
    obs.onStep(plan, report);
    result.steps = s + 1;
    result.lastLoss = loss;

    const bool epochDone = (s + 1) % plan.stepsPerEpoch == 0;
    if (!endsEpochOrRun(plan, s, endStep))
      return;
    EpochReport er;
    er.epoch = epoch;
    er.step = s + 1;
    er.meanLoss = epochLoss / static_cast<double>(epochSteps);
    er.seconds = epochSeconds;
    er.batchSeconds = epochBatchSeconds;
    er.waitSeconds = epochWaitSeconds;
    er.complete = epochDone;
    obs.onEpochEnd(plan, er);
    evaluateAfterStep(r, s);
    checkpointAfterStep(r, s);
    epochStart = Clock::now();
    epochBatchSeconds = epochWaitSeconds = 0;
    epochLoss = 0;
    epochSteps = 0;
  };

  // Each step is queued with how to assemble the next step's batch (a
  // backend does it, and may upload it, while the step computes). A backend
  // may take run.stepsAhead() more steps before the trainer collects a
  // step's results (the GPU: step s + 1 is queued before step s is read), but
  // never across the end of an epoch or of the run: the evaluation and the
  // checkpoint see exactly the parameters after their step.
  Batch batch = batchOf(plan.startStep);
  std::deque<int64_t> queued; // steps queued and not collected, oldest first
  for (int64_t s = plan.startStep; s < endStep; ++s) {
    std::optional<Batch> next;
    std::map<std::string, HostTensor> nextInputs;
    auto assembleNext = [&]() -> const std::map<std::string, HostTensor> * {
      if (next || s + 1 >= endStep)
        return next ? &nextInputs : nullptr;
      next = batchOf(s + 1);
      nextInputs = modelInputs(model, *next);
      return &nextInputs;
    };
    // The step's memory was checked up front; anything left is reported by
    // step, not as std::bad_alloc.
    auto outOfMemory = [&](int64_t step) {
      return Error(fmt::format("step {} (epoch {}): out of memory at batch {}: use a smaller "
                               "--batch",
                               step + 1, step / plan.stepsPerEpoch + 1, plan.batch));
    };
    try {
      // The dropout masks of step s (DropoutMask.h): a resumed run draws
      // those of the unbroken one.
      run.queue(modelInputs(model, batch), assembleNext, plan.totalSteps, {plan.seed, s, 0});
      assembleNext(); // (a backend that did not)
    } catch (const std::bad_alloc &) {
      throw outOfMemory(s);
    }
    queued.push_back(s);
    const bool boundary = endsEpochOrRun(plan, s, endStep);
    while (!queued.empty() &&
           (boundary || static_cast<int64_t>(queued.size()) > run.stepsAhead())) {
      float loss = 0;
      OptimizerStepInfo info;
      try {
        const auto waitStart = Clock::now();
        info = run.collect(loss);
        epochWaitSeconds += secondsSince(waitStart);
      } catch (const std::bad_alloc &) {
        throw outOfMemory(queued.front());
      }
      const int64_t done = queued.front();
      queued.pop_front();
      finish(done, loss, info);
    }
    if (next) {
      spare = std::move(batch);
      batch = std::move(*next);
    }
  }
}

} // namespace stringrt::detail
