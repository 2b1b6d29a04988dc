// When train() evaluates and writes checkpoints (TrainRun.h): after the last
// step of every epoch and of the run, evaluation first, then the checkpoint.

#include "training/TrainRun.h"

#include "stringrt/Checkpoint.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

namespace stringrt::detail {

namespace {

std::string optional(const std::optional<double> &v) {
  return v ? fmt::format("{:.9g}", *v) : std::string();
}

} // namespace

bool endsEpochOrRun(const TrainPlan &plan, int64_t s, int64_t endStep) {
  return (s + 1) % plan.stepsPerEpoch == 0 || s + 1 == endStep;
}

void evaluateAfterStep(TrainRun &r, int64_t s) {
  const DataSet &data = r.data;
  const TrainOptions &options = r.options;
  const TrainPlan &plan = r.plan;
  TrainBackend &run = r.backend;
  TrainLog &log = r.log;
  TrainObserver &obs = r.observer;
  TrainResult &result = r.result;
  const Optimizer &optimizer = r.optimizer;
  const int64_t epoch = s / plan.stepsPerEpoch;
  if (options.evaluate && plan.testExamples > 0) {
    EvalResult eval = run.evaluate(data, plan.batch);
    log.line(fmt::format("eval,{},{},{:.9g},,,{},{},", s + 1, epoch + 1,
                         eval.loss, optional(eval.accuracy),
                         optional(eval.perplexity)));
    obs.onEval(plan, s + 1, eval);
    result.lastEval = eval;
    if (optimizer.hasEma()) {
      EvalResult ema = run.evaluateEma(data, plan.batch);
      ema.ema = true;
      log.line(fmt::format("eval_ema,{},{},{:.9g},,,{},{},", s + 1, epoch + 1, ema.loss,
                           optional(ema.accuracy), optional(ema.perplexity)));
      obs.onEval(plan, s + 1, ema);
      result.lastEmaEval = ema;
    }
  }
}

void checkpointAfterStep(TrainRun &r, int64_t s) {
  Model &model = r.model;
  const TrainOptions &options = r.options;
  const TrainPlan &plan = r.plan;
  const Manifest &manifest = model.manifest();
  TrainBackend &run = r.backend;
  TrainObserver &obs = r.observer;
  Optimizer &optimizer = r.optimizer;
  const std::vector<OptimizerSlot> &slots = r.slots;
  if (!options.checkpointPath.empty()) {
    CheckpointInfo ci;
    ci.model = manifest.model;
    ci.step = s + 1;
    ci.epoch = (s + 1) / plan.stepsPerEpoch;
    ci.dataSeed = plan.seed;
    ci.batch = plan.batch;
    ci.totalSteps = plan.totalSteps;
    run.fetch(model.parameters(), optimizer);
    if (run.writesCheckpoints()) {
      saveCheckpoint(options.checkpointPath, ci, slots, model.parameters(),
                     optimizer);
      obs.onCheckpoint(plan, options.checkpointPath, s + 1);
    }
    run.returnState(optimizer);
  }
}

} // namespace stringrt::detail
