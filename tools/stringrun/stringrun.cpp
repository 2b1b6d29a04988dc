// stringrun: trains, evaluates and benchmarks compiled model packages
// (docs/package.md), and writes one step's gradients for checking them.
// Links only libstringrt. This file: the help text and the dispatch; the
// options in CommandLine.h, the commands in Commands.h.
//
//   stringrun train PKG [--data PATH] [--epochs N] [--steps N] [--batch B]
//                       [--seed S] [--init-seed S] [--checkpoint FILE] [--resume FILE]
//                       [--log FILE.csv] [--accumulate N] [--augment SPEC]
//                       [--no-eval] [--rank-timeout S]
//                       [--no-overlap-allreduce] [--bucket-kib K] (GPU ranks)
//   mpirun -np N stringrun train PKG ...   data-parallel on N CPU ranks (RankRun.h),
//                                          or N GPUs with --device cuda (NCCL)
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

#include "Commands.h"
#include "DeviceRun.h"
#include "RankRun.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

namespace stringrun {
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
                     micro-batch's activation memory (default 1); under
                     mpirun (R ranks, CPU or GPU), each rank's share in N
                     micro-batches: the steps of one process's
                     --accumulate R*N (within float rounding)
  --augment SPEC     train: augment the training images with SPEC instead of
                     the model's `data` augmentation: none, or a comma list
                     of crop=P (random crop, P zero pixels of padding),
                     flip=p (horizontal flip with probability p), erase=p
                     (random erasing with probability p); e.g.
                     crop=4,flip=0.5 (deterministic from --seed, the step
                     and the sample; docs/data.md)
  --rank-timeout S   train under mpirun (N ranks, docs/distributed.md): stop
                     every rank, naming the silent one, when a rank sends no
                     gradients for S seconds (default 300); with --device
                     cuda, when a step's all-reduce has not ended after S s
  --zero 1           train under mpirun (N ranks): ZeRO stage 1, each rank
                     holds the optimizer state (AdamW's moments, SGD's
                     momentum, the EMA) of its 1/N of the parameters only and
                     updates that slice; the same bits as without (default
                     0: every rank holds all of it; docs/distributed.md).
                     With --device cuda: AdamW's moments or SGD's momentum
                     on each GPU for its slice (the EMA stays whole), the
                     gradients summed on their slice's owner bucket by
                     bucket as the backward finishes them (reduce-scattered
                     after it with --no-overlap-allreduce) and the
                     parameters all-gathered; in a bf16 package the f32
                     master weights and the EMA of the slice too, and the
                     bf16 copy all-gathered
  --zero 2           train under mpirun on CPU ranks: ZeRO stage 2, stage 1
                     and the gradients sharded: once summed, each rank keeps
                     the summed gradient of its slice only (1/N of the
                     gradients between steps); the same bits as without
                     (not built for --device cuda)
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
  --no-overlap-allreduce
                     with --device cuda on GPU ranks (mpirun): sum the
                     gradients across the ranks after the whole backward
                     instead of bucket by bucket beside it on a second
                     stream (the same sums; for comparison)
  --bucket-kib K     with --device cuda on GPU ranks: all-reduce the
                     gradients in buckets of K KiB (default 1024 for the
                     first, the last parameters', then 25600, as PyTorch DDP;
                     with --zero 1, each cut at the slices' boundaries)
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
    if (number<int64_t>(args, "--bucket-kib", 1).value_or(0) > (int64_t(1) << 30))
      throw UsageError{"option '--bucket-kib' takes at most 2^30 (1 TiB buckets)"};
    augmentOption(args);
    kernelSet(args);
    if (args.values.count("--epochs") && args.values.count("--steps"))
      throw UsageError{"give --epochs or --steps, not both"};
    if (zeroStage(args) == 2 && value(args, "--device") == std::optional<std::string>("cuda"))
      throw UsageError{"option '--zero 2' with --device cuda: ZeRO-2 (the gradients sharded) is "
                       "built for CPU ranks only; --zero 1 shards the optimizer state on GPU "
                       "ranks (docs/distributed.md)"};
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
      options.overlapAllReduce = !args.noOverlapAllReduce;
      options.bucketBytes = 1024 * number<int64_t>(args, "--bucket-kib", 1).value_or(0);
      options.zeroStage = zeroStage(args);
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
        const double timeout =
            static_cast<double>(number<int64_t>(args, "--rank-timeout", 1).value_or(300));
        if (args.command == "train")
          if (std::unique_ptr<stringrt::Communicator> ranks = stringrun::joinRanks(timeout)) {
            // One process per GPU, the gradients summed by NCCL (DeviceRanks.h).
            return stringrun::onRank(
                *ranks,
                [&] {
                  std::unique_ptr<stringrt::TrainBackend> onGpus =
                      stringrun::deviceRanksBackend(&cuda, model, options, *ranks, timeout);
                  return runTrain(args, model, *printer, 1, onGpus.get(), ranks.get());
                },
                [&] { printer->finish(); });
          }
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
} // namespace stringrun

// A report that never reached its reader (a full disk, a closed pipe) is a
// failure too: the exit status says so.
int main(int argc, char **argv) {
  const int status = stringrun::run(argc, argv);
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int error = errno;
    std::fprintf(stderr, "stringrun: error: cannot write the standard output%s%s\n",
                 error ? ": " : "", error ? std::strerror(error) : "");
    return status != 0 ? status : 1;
  }
  return status;
}
