// stringrun gradients: one step's loss and gradients written to a
// safetensors file (GradientDump.h).

#include "Commands.h"
#include "GradientDump.h"

#include <cstdio>

namespace stringrun {

int runGradients(const Args &args, stringrt::Model &model) {
  stringrun::GradientDumpOptions options;
  options.batch =
      number<int64_t>(args, "--batch", 1).value_or(stringrt::kDefaultBatch);
  options.seed = number<uint64_t>(args, "--seed", 0).value_or(0);
  options.initSeed = number<uint64_t>(args, "--init-seed", 0).value_or(0);
  options.paramsPath = value(args, "--params").value_or("");
  options.outPath = *value(args, "--out");
  stringrt::DataSet data =
      stringrt::loadModelData(model, value(args, "--data").value_or(""));
  stringrun::GradientDumpResult r =
      stringrun::dumpGradients(model, data, options);
  std::printf("gradients '%s': batch %lld (seed %llu), loss %.6f, %lld "
              "gradients written to %s\n",
              model.manifest().model.c_str(),
              static_cast<long long>(options.batch),
              static_cast<unsigned long long>(options.seed), r.loss,
              static_cast<long long>(r.gradients), options.outPath.c_str());
  return 0;
}

} // namespace stringrun
