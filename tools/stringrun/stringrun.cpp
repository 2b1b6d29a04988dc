// stringrun: trains, evaluates and benchmarks compiled model packages
// (docs/package.md), and writes one step's gradients for checking them.
// Links only libstringrt.
//
//   stringrun train PKG [--data PATH] [--epochs N] [--steps N] [--batch B]
//                       [--seed S] [--init-seed S] [--checkpoint FILE] [--resume FILE]
//                       [--log FILE.csv] [--accumulate N] [--augment SPEC]
//                       [--no-eval] [--rank-timeout S]
//   mpirun -np N stringrun train PKG ...   data-parallel on N CPU ranks (RankRun.h)
//   stringrun eval PKG [--data PATH] [--batch B] [--params FILE | --resume FILE [--ema]]
//                      [--resize N [--resize-positions]]
//   stringrun bench PKG [--data PATH] [--batch B] [--steps N] [--profile]
//   stringrun gradients PKG --out FILE [--data PATH] [--batch B] [--seed S] [--init-seed S]
//                           [--params FILE]
// and, for every command, [--kernels compiled|fast|reference] [--threads N] [--no-arena];
// every command also runs on a GPU with --device cuda [--tf32] [--no-graphs]
// [--no-overlap] [--host-augment] [--sync-launches] (a package of target cuda; DeviceRun.h).
//
// Exit status: 0 on success, 1 on an error (bad package, data or checkpoint,
// failed I/O, a diverging loss), 2 on a usage error.

#include "DeviceRun.h"
#include "GradientDump.h"
#include "OutputPaths.h"
#include "ProfileTable.h"
#include "ResizePositions.h"
#include "RankRun.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Idx.h"
#include "stringrt/Model.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"
#include "stringrt/Trainer.h"
#include "stringrt/cpu/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

constexpr const char *kUsage = R"(usage: stringrun COMMAND MODEL.pkg [options]

Trains, evaluates and benchmarks a model package (stringc --target=cpu), and
writes one step's loss and gradients.

commands:
  train      train the model, evaluating on the test split after every epoch
  eval       evaluate the model on the test split
  bench      time training steps
  gradients  run the gradients program once on the first training batch
             (the one `train --seed S` takes at step 1) and write a
             safetensors file (--out) with the batch (input.NAME), the
             parameters (param.NAME), the loss (loss, shape []) and every
             trainable parameter's gradient (grad.NAME), all F32 but i32
             inputs (I32), to check them against another implementation

options:
  --data PATH        IDX directory, text file, or array file: .npz or
                     .safetensors (images: train_images, train_labels,
                     test_images, test_labels; tokens: train_tokens,
                     test_tokens) or .npy (token ids; docs/data.md)
                     (default: the model's dataset)
  --epochs N         train: epochs of the run (default 1; when resuming, the
                     checkpoint's run: the same schedule and last step)
  --steps N          train: total optimizer steps of the run instead of
                     epochs (a run may end mid-epoch); bench: steps to time
                     (default 10)
  --batch B          batch size (default 32; when resuming, the checkpoint's)
  --accumulate N     train (CPU or GPU): split each step's batch into N
                     micro-batches and average their gradients: the same
                     steps as the whole batch (within float rounding) in a
                     micro-batch's activation memory (default 1)
  --augment SPEC     train: augment the training images with SPEC instead of
                     the model's `data` augmentation: none, or a comma list
                     of crop=P (random crop, P zero pixels of padding),
                     flip=p (horizontal flip with probability p), erase=p
                     (random erasing with probability p); e.g.
                     crop=4,flip=0.5 (deterministic from --seed, the step
                     and the sample; docs/data.md)
  --rank-timeout S   train under mpirun (N ranks, docs/distributed.md): stop
                     every rank, naming the silent one, when a rank sends no
                     gradients for S seconds (default 300)
  --stop-after N     train: stop after global step N (the run and its
                     schedule are unchanged; --resume continues it)
  --seed S           train, gradients: the seed of the data order and of the
                     dropout masks (default 0; when resuming, the
                     checkpoint's)
  --init-seed S      train, gradients: draw the random initial parameters
                     (normal, uniform) anew from seed S (default 0: the
                     package's seeds); another seed is another draw of the
                     same model. Not with --resume or --params
  --checkpoint FILE  train: write a checkpoint after every epoch and at the end
  --resume FILE      train: continue from a checkpoint (the same losses as an
                     unbroken run); eval: evaluate its parameters
  --params FILE      eval, gradients: parameters from a checkpoint or
                     safetensors file (default: freshly initialised)
  --out FILE         gradients: the safetensors file to write (required)
  --resize N         eval: resize the test images to N x N pixels first
                     (bilinear, as torch's F.interpolate with
                     align_corners=False, antialias=False), for a package
                     compiled for N x N images (stringc -D image_size=N)
                     evaluating parameters trained at another size
                     (docs/experiments.md)
  --resize-positions eval: a learned position table of the parameters
                     ([1 + n*n, D], class row first, or [n*n, D]) of
                     another grid than the package's is resized to it
                     (bicubic, as DeiT and timm; the class row kept);
                     without it such a table is an error
  --log FILE.csv     train: CSV log of every step and evaluation (when
                     resuming, its rows after the checkpoint's step are
                     dropped, then it is appended to)
  --kernels K        compiled (the default for packages of target cpu): the
                     package's compiler-generated kernels for the ops that
                     have one (elementwise ops, layer norm, their
                     gradients), the fast kernels for the rest; fast (the
                     default otherwise): the multi-threaded float32 kernels
                     for the ops that have one (dense layers, layer norm,
                     gelu, attention, rope, cross entropy, embeddings, and
                     their gradients), the reference kernels for the rest;
                     or reference: the plain single-threaded reference
                     kernels for every op (the oracle; results agree to
                     ~1e-5). compiled runs the package's machine code in
                     this process: trust the package as a shared library;
                     fast and reference never load it
  --threads N        worker threads. With --kernels compiled or fast, the
                     size of the kernel thread pool, for training and
                     evaluation alike
                     (default: $STRINGRT_THREADS, else every core). With
                     --kernels reference, the model replicas that evaluate
                     test batches concurrently (default 1). Results do not
                     depend on it, bit for bit
  --no-eval          train: skip evaluation
  --ema              eval --resume: evaluate the checkpoint's EMA of the
                     weights (a model whose optimizer has ema = d) instead of
                     its weights
  --profile          bench: also print where the step's time goes, op kind
                     by op kind (wall time of every op of the forward and
                     gradients programs; "[compiled]": on generated kernels;
                     with --device cuda, GPU time from CUDA events around
                     every op, the gradient copies and the optimizer, with
                     CUDA graphs off)
  --no-arena         place intermediate values in buffers recycled at run
                     time instead of the package's arena plan (for comparison)
  --device D         cpu (the default) or cuda: run the package's step program
                     on the GPU (a package of stringc --target=cuda whose
                     ops all have GPU steps): training (the optimizer, adamw
                     or sgd, on the device) and evaluation, with every train
                     and eval option (checkpoints are the CPU's files: a run
                     resumes on either device). gradients --device cuda also
                     runs the CPU and compares every gradient (exit 1 beyond
                     2e-3 of its largest magnitude); it takes no --params
  --tf32             with --device cuda: let cuBLAS use TF32 tensor cores
  --no-graphs        with --device cuda: do not replay training steps and
                     evaluation batches as CUDA graphs
  --no-overlap       with --device cuda: upload each batch when its step
                     begins instead of on a second stream while the previous
                     step computes
  --host-augment     with --device cuda: augment the training images on the
                     host rather than in a kernel on the device as each batch
                     enters its step (the same bits; for comparison)
  --sync-launches    with --device cuda: wait after every kernel and GEMM,
                     so that a kernel's fault is reported naming the op,
                     launch and kernel (for debugging; slow, no graphs; also
                     STRINGRT_CUDA_SYNC_LAUNCHES=1)
  --help             show this help

An output (--checkpoint, --log, --out) must not be the same file as an input
(the package, the data, --resume, --params) or another output (usage error);
--checkpoint may replace the --resume checkpoint.

exit status: 0 success, 1 error, 2 usage error
)";

struct UsageError {
  std::string message;
};

struct Args {
  std::string command;
  std::string package;
  std::map<std::string, std::string> values; // option -> value
  bool noEval = false;
  bool ema = false;     // --ema (eval --resume): the checkpoint's EMA of the weights
  bool noArena = false; // --no-arena: run on the buffer pool, not the arena plan
  bool profile = false; // --profile (bench): time every op by kind
  bool tf32 = false;    // --tf32 (--device cuda)
  bool noGraphs = false; // --no-graphs (--device cuda)
  bool noOverlap = false; // --no-overlap (--device cuda)
  bool hostAugment = false; // --host-augment (--device cuda)
  bool syncLaunches = false; // --sync-launches (--device cuda)
  bool resizePositions = false; // --resize-positions (eval)
};

// The flags that only --device cuda takes.
const std::pair<const char *, bool Args::*> kDeviceFlags[] = {
    {"--tf32", &Args::tf32},
    {"--no-graphs", &Args::noGraphs},
    {"--no-overlap", &Args::noOverlap},
    {"--host-augment", &Args::hostAugment},
    {"--sync-launches", &Args::syncLaunches},
};

const std::vector<std::string> kValueOptions = {
    "--data", "--epochs", "--steps",  "--batch",  "--seed",   "--checkpoint",
    "--resume", "--params", "--log", "--threads", "--stop-after", "--out",
    "--kernels", "--device", "--accumulate", "--augment", "--init-seed", "--resize",
    "--rank-timeout"};

// The options naming files: none may be empty.
const std::vector<std::string> kPathOptions = {"--data", "--checkpoint", "--resume",
                                               "--params", "--log",  "--out"};

bool isValueOption(const std::string &name) {
  for (const std::string &o : kValueOptions)
    if (o == name)
      return true;
  return false;
}

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
      if (name == "--no-eval" && !inlineValue) {
        args.noEval = true;
        continue;
      }
      if (name == "--ema" && !inlineValue) {
        args.ema = true;
        continue;
      }
      if (name == "--no-arena" && !inlineValue) {
        args.noArena = true;
        continue;
      }
      if (name == "--profile" && !inlineValue) {
        args.profile = true;
        continue;
      }
      if (name == "--resize-positions" && !inlineValue) {
        args.resizePositions = true;
        continue;
      }
      auto deviceFlag = std::find_if(std::begin(kDeviceFlags), std::end(kDeviceFlags),
                                     [&](const auto &flag) { return name == flag.first; });
      if (deviceFlag != std::end(kDeviceFlags) && !inlineValue) {
        args.*(deviceFlag->second) = true;
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
        "--rank-timeout"}},
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
  return args;
}

std::optional<std::string> value(const Args &args, const std::string &name) {
  auto it = args.values.find(name);
  if (it == args.values.end())
    return std::nullopt;
  return it->second;
}

template <typename Int>
std::optional<Int> number(const Args &args, const std::string &name, Int min) {
  auto text = value(args, name);
  if (!text)
    return std::nullopt;
  Int v{};
  const char *end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, v);
  if (text->empty() || ec != std::errc() || ptr != end || v < min)
    throw UsageError{fmt::format("option '{}' needs an integer >= {}, got "
                                 "'{}'",
                                 name, min, *text)};
  return v;
}

// --kernels; nullopt: the package's default (Model(Package)).
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

// --augment; nullopt: the package's augmentation.
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

// --threads (at most cpu::maxThreads(): a usage error beyond).
std::optional<int> threadsOption(const Args &args) {
  std::optional<int64_t> threads = number<int64_t>(args, "--threads", 1);
  if (threads && *threads > stringrt::cpu::maxThreads())
    throw UsageError{"option '--threads': " + stringrt::cpu::tooManyThreads(*threads)};
  return threads ? std::optional<int>(static_cast<int>(*threads)) : std::nullopt;
}

// --threads: with the fast kernels, the kernel pool's size (set here; the
// pool's default otherwise); with the reference kernels, the evaluation
// replicas. Returns the replicas.
int applyThreads(const Args &args, stringrt::KernelSet kernels) {
  std::optional<int> threads = threadsOption(args);
  if (kernels == stringrt::KernelSet::Reference)
    return threads.value_or(1);
  if (threads)
    stringrt::cpu::setNumThreads(*threads);
  return 1;
}

// Refuses (a usage error) outputs that are the same file as an input or as
// another output: the package, the data, the checkpoint or parameters read,
// the manifest's `load` files (OutputPaths.h). The --resume checkpoint may
// be the --checkpoint: it is read whole before the first write.
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

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8)
    return "?";
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600)
    return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string evalLine(const stringrt::EvalResult &e, const std::string &unit) {
  std::string line = fmt::format("loss {:.6f}", e.loss);
  if (e.accuracy)
    line += fmt::format(", accuracy {:.2f}%", 100.0 * *e.accuracy);
  if (e.perplexity)
    line += fmt::format(", perplexity {:.4f}", *e.perplexity);
  line += fmt::format(" ({} {}, {:.1f} s)", e.examples,
                      unit == "tokens" ? "windows" : unit, e.seconds);
  return line;
}

// Prints the progress of a training run: on a terminal, one progress line
// rewritten in place; otherwise a plain line per step.
class Printer : public stringrt::TrainObserver {
public:
  explicit Printer(std::string model)
      : model_(std::move(model)), tty_(isatty(STDOUT_FILENO) != 0) {}

  void onStart(const stringrt::TrainPlan &p) override {
    std::string resume =
        p.startStep > 0 ? fmt::format(", resuming at step {}", p.startStep)
                        : std::string();
    if (!p.device.empty())
      resume += ", on " + p.device;
    if (p.augment.enabled())
      resume += ", augment " + stringrt::describeAugmentPolicy(p.augment) +
                (p.augmentOnBackend ? " (on the device)" : "");
    line(fmt::format("training '{}': {} train / {} test examples, batch {}, {} "
                     "steps per epoch, {} steps ({} epoch{}), seed {}{}",
                     model_, p.trainExamples, p.testExamples, p.batch,
                     p.stepsPerEpoch, p.totalSteps, p.epochs,
                     p.epochs == 1 ? "" : "s", p.seed, resume));
  }

  void onStep(const stringrt::TrainPlan &p,
              const stringrt::StepReport &r) override {
    std::string text = fmt::format(
        "epoch {}/{} step {}/{} loss {:.6f} lr {:.3e} {:.1f} {}/s eta {}",
        r.epoch + 1, p.epochs, r.step, p.totalSteps, r.loss, r.lr,
        r.unitsPerSecond, p.unit, duration(r.etaSeconds));
    if (tty_) {
      std::fputs(("\r\033[K" + text).c_str(), stdout);
      std::fflush(stdout);
      pending_ = true;
    } else {
      line(text);
    }
  }

  void onEpochEnd(const stringrt::TrainPlan &p,
                  const stringrt::EpochReport &r) override {
    line(fmt::format("epoch {}/{} {}: mean loss {:.6f} ({})", r.epoch + 1, p.epochs,
                     r.complete ? "done" : "stopped", r.meanLoss, epochTimes(p, r)));
  }

  // "37.2 s, 0.4 s of it assembling batches"; on a device also the time
  // spent waiting for it, and a word when it hardly waited (the host, not
  // the device, sets the pace).
  static std::string epochTimes(const stringrt::TrainPlan &p, const stringrt::EpochReport &r) {
    std::string text = fmt::format("{:.1f} s, {:.1f} s of it assembling batches", r.seconds,
                                   r.batchSeconds);
    if (p.device.empty())
      return text;
    text += fmt::format(", {:.1f} s waiting for the device", r.waitSeconds);
    if (r.seconds >= 1 && r.waitSeconds < 0.05 * r.seconds)
      text += "; the host sets the pace, not the device";
    return text;
  }

  void onEval(const stringrt::TrainPlan &p, int64_t step,
              const stringrt::EvalResult &e) override {
    line(fmt::format("eval {}after step {}: {}", e.ema ? "of the EMA weights " : "", step,
                     evalLine(e, p.unit)));
  }

  void onCheckpoint(const stringrt::TrainPlan &, const std::string &path,
                    int64_t step) override {
    line(fmt::format("checkpoint {} (step {})", path, step));
  }

  // Ends an in-place progress line (before an error message, say).
  void finish() {
    if (pending_) {
      std::fputs("\n", stdout);
      std::fflush(stdout);
      pending_ = false;
    }
  }

private:
  void line(const std::string &text) {
    finish();
    std::fputs((text + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

  std::string model_;
  bool tty_;
  bool pending_ = false;
};

// `backend`: where the steps and evaluations run (nullptr: the CPU).
// `ranks`: this process is one rank of a data-parallel run (RankRun.h):
// rank 0 alone prints, logs and checkpoints.
int runTrain(const Args &args, stringrt::Model &model, Printer &printer,
             int replicas, stringrt::TrainBackend *backend = nullptr,
             stringrt::Communicator *ranks = nullptr) {
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
  stringrt::DataSet data =
      stringrt::loadModelData(model, value(args, "--data").value_or(""));
  std::unique_ptr<stringrt::TrainBackend> onRanks;
  const bool lead = !ranks || ranks->rank() == 0;
  if (ranks) {
    onRanks = stringrt::makeDataParallelBackend(model, *ranks);
    backend = onRanks.get();
    if (!lead)
      options.logPath = options.checkpointPath = "";
    else
      std::printf("data-parallel on %d ranks: each takes its share of every batch, as "
                  "--accumulate %d splits it\n",
                  ranks->size(), ranks->size());
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

int runEval(const Args &args, stringrt::Model &model, int replicas,
            stringrt::TrainBackend *backend = nullptr) {
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

int run(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  Args args;
  try {
    args = parseArgs(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "stringrun: error: %s\n%s", e.message.c_str(),
                 "run 'stringrun --help' for usage\n");
    return 2;
  }
  try {
    // Numbers are checked before the package is loaded.
    number<int64_t>(args, "--epochs", 1);
    number<int64_t>(args, "--steps", 1);
    number<int64_t>(args, "--batch", 1);
    number<uint64_t>(args, "--seed", 0);
    number<uint64_t>(args, "--init-seed", 0);
    threadsOption(args);
    number<int64_t>(args, "--stop-after", 1);
    number<int64_t>(args, "--accumulate", 1);
    number<int64_t>(args, "--resize", 1);
    number<int64_t>(args, "--rank-timeout", 1);
    augmentOption(args);
    kernelSet(args);
    if (args.values.count("--epochs") && args.values.count("--steps"))
      throw UsageError{"give --epochs or --steps, not both"};
  } catch (const UsageError &e) {
    std::fprintf(stderr, "stringrun: error: %s\n%s", e.message.c_str(),
                 "run 'stringrun --help' for usage\n");
    return 2;
  }
  std::optional<Printer> printer;
  try {
    const std::optional<stringrt::KernelSet> kernels = kernelSet(args);
    stringrt::Package package = stringrt::Package::load(args.package);
    checkOutputs(args, package.manifest());
    stringrun::refuseRanks(args.command,
                           value(args, "--device") == std::optional<std::string>("cuda"));
    if (value(args, "--device") == std::optional<std::string>("cuda")) {
      // Checked before the device and any data: the package, the
      // checkpoint's header (the trainer validates the rest before the
      // device is touched), then the reason no GPU can be used.
      if (!package.cuda())
        throw stringrt::Error(args.package, "--device cuda needs a package of target cuda "
                                            "(stringc --target=cuda); this one is target " +
                                                package.target());
      if (auto path = value(args, "--resume")) {
        stringrt::CheckpointInfo info = stringrt::readCheckpointInfo(*path);
        if (info.model != package.manifest().model)
          throw stringrt::Error(*path, fmt::format("checkpoint is of model '{}', not '{}'",
                                                   info.model, package.manifest().model));
      }
      if (auto path = value(args, "--params"))
        stringrt::SafetensorsFile::open(*path);
      if (!stringrun::deviceBackendBuilt() || !stringrun::deviceUnavailableReason().empty())
        throw stringrt::Error("--device cuda: " + (stringrun::deviceBackendBuilt()
                                                       ? "no usable CUDA device: " +
                                                             stringrun::deviceUnavailableReason()
                                                       : stringrun::deviceUnavailableReason()));
      stringrt::CudaSection cuda = *package.cuda();
      stringrt::Model model = kernels ? stringrt::Model(std::move(package), *kernels)
                                      : stringrt::Model(std::move(package));
      applyThreads(args, model.kernels());
      stringrun::DeviceRunOptions options;
      options.epochs = number<int64_t>(args, "--epochs", 1).value_or(0);
      options.steps = number<int64_t>(args, "--steps", 1).value_or(0);
      options.batch = number<int64_t>(args, "--batch", 1).value_or(stringrt::kDefaultBatch);
      options.seed = number<uint64_t>(args, "--seed", 0).value_or(0);
      options.initSeed = number<uint64_t>(args, "--init-seed", 0).value_or(0);
      options.evaluate = !args.noEval;
      options.tf32 = args.tf32;
      options.graphs = !args.noGraphs;
      options.overlapUpload = !args.noOverlap;
      options.deviceAugment = !args.hostAugment;
      options.syncEachLaunch = args.syncLaunches;
      options.outPath = value(args, "--out").value_or("");
      options.profile = args.profile;
      if (args.command == "train" || args.command == "eval") {
        std::unique_ptr<stringrt::TrainBackend> backend =
            stringrun::deviceTrainBackend(&cuda, model, options);
        if (args.command == "eval")
          return runEval(args, model, 1, backend.get());
        printer.emplace(model.manifest().model);
        return runTrain(args, model, *printer, 1, backend.get());
      }
      stringrt::DataSet data = stringrt::loadModelData(model, value(args, "--data").value_or(""));
      if (args.command == "gradients")
        return stringrun::deviceGradients(&cuda, model, data, options);
      return stringrun::deviceBench(&cuda, model, data, options,
                                    number<int64_t>(args, "--steps", 1).value_or(10));
    }
    stringrt::Model model = kernels ? stringrt::Model(std::move(package), *kernels)
                                    : stringrt::Model(std::move(package));
    if (args.noArena && model.arenaPlan())
      model.setArenaPlan(false);
    const int replicas = applyThreads(args, model.kernels());
    if (args.command == "train") {
      printer.emplace(model.manifest().model);
      if (std::unique_ptr<stringrt::Communicator> ranks = stringrun::joinRanks(
              static_cast<double>(number<int64_t>(args, "--rank-timeout", 1).value_or(300)))) {
        if (model.kernels() != stringrt::KernelSet::Reference)
          stringrun::shareCores(args.values.count("--threads") != 0);
        return stringrun::onRank(
            *ranks, [&] { return runTrain(args, model, *printer, replicas, nullptr, ranks.get()); },
            [&] { printer->finish(); });
      }
      return runTrain(args, model, *printer, replicas);
    }
    if (args.command == "eval")
      return runEval(args, model, replicas);
    if (args.command == "gradients")
      return runGradients(args, model);
    return runBench(args, model);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "stringrun: error: %s\n%s", e.message.c_str(),
                 "run 'stringrun --help' for usage\n");
    return 2;
  } catch (const std::bad_alloc &) {
    if (printer)
      printer->finish();
    std::fflush(stdout);
    std::fprintf(stderr, "stringrun: error: out of memory: use a smaller --batch (or a "
                         "machine with more memory)\n");
    return 1;
  } catch (const std::exception &e) {
    if (printer)
      printer->finish();
    std::fflush(stdout);
    std::fprintf(stderr, "stringrun: error: %s\n", e.what());
    return 1;
  }
}

} // namespace

// A report that never reached its reader (a full disk, a closed pipe) is a
// failure too: the exit status says so.
int main(int argc, char **argv) {
  const int status = run(argc, argv);
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int error = errno;
    std::fprintf(stderr, "stringrun: error: cannot write the standard output%s%s\n",
                 error ? ": " : "", error ? std::strerror(error) : "");
    return status != 0 ? status : 1;
  }
  return status;
}
