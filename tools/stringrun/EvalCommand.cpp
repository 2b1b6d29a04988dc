// stringrun eval: the test split's loss and accuracy with initial, loaded or
// checkpointed parameters (resized with --resize-positions).

#include "Commands.h"
#include "ResizePositions.h"

#include "stringrt/Checkpoint.h"

#include <fmt/format.h>

#include <cstdio>

namespace stringrun {

int runEval(const Args &args, stringrt::Model &model, int replicas,
            stringrt::TrainBackend *backend) {
  const int64_t batch =
      number<int64_t>(args, "--batch", 1).value_or(stringrt::kDefaultBatch);
  const int64_t resize = number<int64_t>(args, "--resize", 1).value_or(0);
  stringrt::DataSet data =
      stringrt::loadModelData(model, value(args, "--data").value_or(""), resize);
  model.initParameters();
  std::string source = "initial parameters";
  const std::string name = model.manifest().model;
  auto slots = stringrt::optimizerSlots(model);
  if (auto path = value(args, "--params")) {
    stringrt::loadParameters(*path, name, slots, model.parameters(), false,
                             stringrun::positionTableAdapter(*path, args.resizePositions));
    source = *path;
  } else if (auto ckpt = value(args, "--resume")) {
    stringrt::CheckpointInfo info = stringrt::readCheckpointInfo(*ckpt);
    stringrt::loadParameters(*ckpt, name, slots, model.parameters(), args.ema,
                             stringrun::positionTableAdapter(*ckpt, args.resizePositions));
    source = fmt::format("{}{} (step {})", args.ema ? "the EMA weights of " : "", *ckpt,
                         info.step);
  }
  std::string on;
  if (resize > 0)
    on = fmt::format(" at {} x {} (test images resized)", resize, resize);
  stringrt::EvalResult e;
  if (backend) {
    stringrt::ManifestOptimizer config = model.manifest().optimizer;
    config.emaDecay = 0; // evaluation takes no step: no EMA to keep
    backend->start(model.parameters(),
                   stringrt::Optimizer(config, slots, model.parameters().size()));
    e = backend->evaluate(data, batch);
    on += " on " + backend->name();
  } else {
    e = stringrt::evaluate(model, data, batch, replicas);
  }
  std::printf("eval '%s' with %s%s: %s\n", name.c_str(), source.c_str(), on.c_str(),
              evalLine(e, data.unit()).c_str());
  return 0;
}

} // namespace stringrun
