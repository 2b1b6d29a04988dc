// stringrun's command line: parsing and checking the options (CommandLine.h).

#include "CommandLine.h"
#include "OutputPaths.h"

#include "stringrt/Error.h"
#include "stringrt/Idx.h"
#include "stringrt/cpu/ThreadPool.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <utility>
#include <vector>

namespace stringrun {

namespace {

// The flags that only --device cuda takes.
const std::pair<const char *, bool Args::*> kDeviceFlags[] = {
    {"--tf32", &Args::tf32},
    {"--no-graphs", &Args::noGraphs},
    {"--no-overlap", &Args::noOverlap},
    {"--no-overlap-allreduce", &Args::noOverlapAllReduce},
    {"--host-augment", &Args::hostAugment},
    {"--sync-launches", &Args::syncLaunches},
};

/// The other options without a value.
const std::pair<const char *, bool Args::*> kSwitches[] = {
    {"--no-eval", &Args::noEval},   {"--ema", &Args::ema},
    {"--no-arena", &Args::noArena}, {"--profile", &Args::profile},
    {"--resize-positions", &Args::resizePositions},
};

/// The field an option without a value sets, or null.
bool Args::*switchField(const std::string &name) {
  for (const auto &[flag, field] : kSwitches)
    if (name == flag)
      return field;
  for (const auto &[flag, field] : kDeviceFlags)
    if (name == flag)
      return field;
  return nullptr;
}

const std::vector<std::string> kValueOptions = {
    "--data", "--epochs", "--steps",  "--batch",  "--seed",   "--checkpoint",
    "--resume", "--params", "--log", "--threads", "--stop-after", "--out",
    "--kernels", "--device", "--accumulate", "--augment", "--init-seed", "--resize",
    "--rank-timeout", "--zero", "--bucket-kib"};

// The options naming files: none may be empty.
const std::vector<std::string> kPathOptions = {"--data", "--checkpoint", "--resume",
                                               "--params", "--log",  "--out"};

bool isValueOption(const std::string &name) {
  for (const std::string &o : kValueOptions)
    if (o == name)
      return true;
  return false;
}

} // namespace

Args parseArgs(int argc, char **argv) {
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      std::string name = arg, value;
      bool inlineValue = false;
      if (auto eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inlineValue = true;
      }
      if (bool Args::*field = switchField(name); field && !inlineValue) {
        args.*field = true;
        continue;
      }
      if (!isValueOption(name))
        throw UsageError{fmt::format("unknown option '{}'", arg)};
      if (!inlineValue) {
        if (i + 1 >= argc)
          throw UsageError{fmt::format("option '{}' needs a value", name)};
        value = argv[++i];
      }
      if (args.values.count(name))
        throw UsageError{fmt::format("option '{}' given twice", name)};
      if (value.empty() &&
          std::find(kPathOptions.begin(), kPathOptions.end(), name) != kPathOptions.end())
        throw UsageError{fmt::format("option '{}' needs a path, got an empty one", name)};
      args.values[name] = value;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError{fmt::format("unknown option '{}'", arg)};
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.empty())
    throw UsageError{"no command given (train, eval, bench or gradients)"};
  args.command = positional[0];
  if (args.command != "train" && args.command != "eval" &&
      args.command != "bench" && args.command != "gradients")
    throw UsageError{fmt::format("unknown command '{}' (expected train, eval, "
                                 "bench or gradients)",
                                 args.command)};
  if (positional.size() < 2)
    throw UsageError{fmt::format("'{}' needs a model package", args.command)};
  if (positional.size() > 2)
    throw UsageError{fmt::format("unexpected argument '{}'", positional[2])};
  args.package = positional[1];

  // Which options each command takes.
  std::map<std::string, std::vector<std::string>> allowed = {
      {"train",
       {"--data", "--epochs", "--steps", "--batch", "--seed", "--checkpoint",
        "--resume", "--log", "--stop-after", "--accumulate", "--augment", "--init-seed",
        "--rank-timeout", "--zero", "--bucket-kib"}},
      {"eval", {"--data", "--batch", "--params", "--resume", "--resize"}},
      {"bench", {"--data", "--batch", "--steps"}},
      {"gradients", {"--data", "--batch", "--seed", "--init-seed", "--params", "--out"}},
  };
  for (auto &[command, options] : allowed) {
    (void)command;
    options.push_back("--kernels");
    options.push_back("--threads");
    options.push_back("--device");
  }
  for (const auto &[name, value] : args.values) {
    const auto &ok = allowed[args.command];
    if (std::find(ok.begin(), ok.end(), name) == ok.end())
      throw UsageError{
          fmt::format("option '{}' does not apply to '{}'", name, args.command)};
  }
  if (args.profile && args.command != "bench")
    throw UsageError{
        fmt::format("option '--profile' does not apply to '{}'", args.command)};
  if (args.resizePositions && args.command != "eval")
    throw UsageError{
        fmt::format("option '--resize-positions' does not apply to '{}'", args.command)};
  if (args.noEval && args.command != "train")
    throw UsageError{
        fmt::format("option '--no-eval' does not apply to '{}'", args.command)};
  if (args.command == "eval" && args.values.count("--params") &&
      args.values.count("--resume"))
    throw UsageError{"give --params or --resume, not both"};
  if (args.ema && (args.command != "eval" || !args.values.count("--resume")))
    throw UsageError{"option '--ema' applies to 'eval --resume CHECKPOINT' only"};
  if (args.values.count("--init-seed") && args.values.count("--params"))
    throw UsageError{"give --init-seed (new parameters) or --params (loaded ones), not both"};
  if (args.command == "gradients" && !args.values.count("--out"))
    throw UsageError{"'gradients' needs --out FILE"};
  if (auto device = args.values.find("--device"); device != args.values.end()) {
    if (device->second != "cpu" && device->second != "cuda")
      throw UsageError{fmt::format("option '--device' needs cpu or cuda, got '{}'",
                                   device->second)};
    if (device->second == "cuda" && args.command == "gradients" && args.values.count("--params"))
      throw UsageError{"option '--params' does not apply to 'gradients' with --device cuda"};
  }
  auto device = args.values.find("--device");
  const bool cuda = device != args.values.end() && device->second == "cuda";
  for (const auto &[flag, field] : kDeviceFlags)
    if (args.*field && !cuda)
      throw UsageError{fmt::format("option '{}' needs --device cuda", flag)};
  if (args.values.count("--bucket-kib") && !cuda)
    throw UsageError{"option '--bucket-kib' needs --device cuda (the GPU ranks' all-reduce "
                     "buckets)"};
  return args;
}

int zeroStage(const Args &args) {
  const std::optional<std::string> stage = value(args, "--zero");
  if (!stage || *stage == "0")
    return 0;
  if (*stage == "1")
    return 1;
  if (*stage == "2")
    return 2;
  if (*stage == "3")
    throw UsageError{"option '--zero 3': ZeRO stage 3 (the parameters sharded) is not built; "
                     "--zero 1 shards the optimizer state, --zero 2 the gradients too"};
  throw UsageError{fmt::format("option '--zero' needs 0, 1 or 2, got '{}'", *stage)};
}

std::optional<stringrt::KernelSet> kernelSet(const Args &args) {
  std::optional<std::string> name = value(args, "--kernels");
  if (!name)
    return std::nullopt;
  std::optional<stringrt::KernelSet> kernels = stringrt::parseKernelSet(*name);
  if (!kernels)
    throw UsageError{fmt::format(
        "option '--kernels' needs compiled, fast or reference, got '{}'", *name)};
  return kernels;
}

std::optional<stringrt::AugmentPolicy> augmentOption(const Args &args) {
  std::optional<std::string> spec = value(args, "--augment");
  if (!spec)
    return std::nullopt;
  try {
    return stringrt::parseAugmentPolicy(*spec);
  } catch (const stringrt::Error &e) {
    throw UsageError{fmt::format("option '--augment': {}", e.what())};
  }
}

std::optional<int> threadsOption(const Args &args) {
  std::optional<int64_t> threads = number<int64_t>(args, "--threads", 1);
  if (threads && *threads > stringrt::cpu::maxThreads())
    throw UsageError{"option '--threads': " + stringrt::cpu::tooManyThreads(*threads)};
  return threads ? std::optional<int>(static_cast<int>(*threads)) : std::nullopt;
}

int applyThreads(const Args &args, stringrt::KernelSet kernels) {
  std::optional<int> threads = threadsOption(args);
  if (kernels == stringrt::KernelSet::Reference)
    return threads.value_or(1);
  if (threads)
    stringrt::cpu::setNumThreads(*threads);
  return 1;
}

void checkOutputs(const Args &args, const stringrt::Manifest &manifest) {
  using stringrun::RunFile;
  std::vector<RunFile> inputs = {{"the package", args.package}};
  if (auto path = value(args, "--resume"))
    inputs.push_back({"--resume", *path, "--checkpoint"});
  if (auto path = value(args, "--params"))
    inputs.push_back({"--params", *path});
  std::optional<std::string> data = value(args, "--data");
  const std::string dataRole = data ? "--data" : "the model's dataset";
  if (!data && manifest.dataset)
    data = manifest.dataset->path;
  std::error_code error;
  if (data && std::filesystem::is_directory(*data, error)) {
    for (const std::string &file : stringrt::idxDatasetFiles(*data))
      inputs.push_back({"a data file of " + dataRole + ",", file});
  } else if (data) {
    inputs.push_back({dataRole, *data});
  }
  for (const stringrt::ManifestParam &param : manifest.params)
    if (param.init == stringrt::ParamInit::Load)
      inputs.push_back({"the load file of parameter '" + param.name + "',", param.file});
  std::vector<RunFile> outputs;
  for (const char *option : {"--checkpoint", "--log", "--out"})
    if (auto path = value(args, option))
      outputs.push_back({option, *path});
  std::string conflict = stringrun::outputConflict(inputs, outputs);
  if (!conflict.empty())
    throw UsageError{conflict};
}

} // namespace stringrun
