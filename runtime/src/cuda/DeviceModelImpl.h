// DeviceModel::Impl (DeviceExecutor.h): the device executor's state and the
// work it queues, shared by the files that implement it:
//   DeviceExecutor.cpp     construction, the public API, evaluation
//   DeviceBuffers.cpp      layouts, batch buffers, staging, copies, the profile
//   DeviceProgramWalk.cpp  the walk of a step program: launches, GEMMs, gradients
//   DeviceTrainStep.cpp    training steps (accumulated too), the optimizer, CUDA graphs
//   DeviceRankStep.cpp     a data-parallel rank's step: the gradients' all-reduce
//   DeviceZeroShards.cpp   ZeRO-1 on the ranks: the sharded state and its step
// Private to runtime/src/cuda.
#ifndef STRINGRT_CUDA_DEVICEMODELIMPL_H
#define STRINGRT_CUDA_DEVICEMODELIMPL_H

#include "stringrt/cuda/DeviceExecutor.h"

#include "BatchStaging.h"
#include "DeviceStepControl.h"
#include "DriverApi.h"
#include "NcclRanks.h"
#include "PinnedArray.h"
#include "stringrt/Augment.h"
#include "stringrt/Error.h"
#include "stringrt/Optimizer.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/GradientBuckets.h"
#include "stringrt/cuda/StepBinding.h"
#include "stringrt/cuda/ZeroMasterShards.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::cuda {

inline constexpr int64_t kMaxPartials = kCudaMaxPartials; // pe_sumsq_partials' grid cap

/// Device work queued alike run after run (a training step, an evaluation
/// batch): eagerly on its first run, captured into `graph` on its second
/// and replayed from then on (Impl::runMaybeGraphed).
struct ReplayedWork {
  int64_t runs = 0;
  CUgraphExec graph = nullptr;
  ReplayedWork() = default;
  ReplayedWork(ReplayedWork &&other) noexcept : runs(other.runs), graph(other.graph) {
    other.graph = nullptr;
  }
  ReplayedWork &operator=(ReplayedWork &&) = delete;
  ~ReplayedWork() {
    if (graph)
      if (const driver::Api *api = driver::api())
        api->graphExecDestroy(graph);
  }
};

/// A program's device buffers at one batch size.
struct BatchBuffers {
  ProgramPlacement placement;
  std::unique_ptr<Arena> arena, extra, scratch;
  // The grouped GEMMs' pointer arrays (Gemm::runGrouped) and the kernel
  // groups' tables (CudaLaunch::groupSize), written when the buffers are
  // placed (before any capture; fixed for the batch size): one buffer, and
  // the device address of each group's pointers (a GEMM group's 3 x size,
  // a kernel group's size x its group arguments) by the index of its first
  // member in the program's steps and the launch of that member (0 but for
  // the grouped later GEMMs of a kernel group of first launches).
  std::unique_ptr<Arena> groupPointers;
  std::map<std::pair<size_t, size_t>, uint64_t> groupArrays;
  ReplayedWork work; // training steps (@gradients) / evaluation batches (@forward)
};

/// What a training step of `rows` examples in micro-batches (queueStep's
/// `accumulate`) needs besides each micro-batch size's BatchBuffers: the
/// whole staged batch (sliced into each micro-batch's inputs inside the
/// step), each micro-batch's step key, the step's weighted loss. On a
/// data-parallel rank the batch is the rank's share and the weights are by
/// the global batch, which is in the graph: its work by global rows.
struct AccumulatedStep {
  std::vector<int64_t> begins, sizes;           // the micro-batches' rows, in order
  std::vector<uint64_t> inputOffsets, rowBytes; // each input's place in `inputs`
  std::unique_ptr<Arena> inputs, keys, loss;
  ReplayedWork work;                        // one process
  std::map<int64_t, ReplayedWork> rankWork; // a data-parallel rank's, by global rows
};

struct DeviceModel::Impl {
  Manifest manifest;
  CudaSection section;
  DeviceOptions options;
  std::shared_ptr<Device> device;
  std::unique_ptr<KernelSet> kernels;
  std::unique_ptr<Gemm> gemm;
  GemmPrecision gemmPrecision = GemmPrecision::Fp32; // of every GEMM of the steps
  CUstream stream = nullptr;
  // The parameters at their device offsets (deviceParameterLayout: aligned,
  // zeros between), `total` floats in the device's flat buffers; the host's
  // flat vectors pack them (`hostTotal` floats, the Model's layout).
  std::vector<OptimizerSlot> slots;
  int64_t total = 0, hostTotal = 0;
  std::unique_ptr<Arena> params, grads, moment1, moment2, partials, workspace;
  std::unique_ptr<Arena> ema; // the EMA of the weights (optimizer ema = d > 0)
  // The bf16 copy of the parameters the GEMMs of a bf16 package read (its
  // bf16 pe.get_param values), 2 bytes an element at the f32 layout's
  // element offsets; null when no value reads it. Rewritten from `params`
  // after every change of them (refreshBf16Params).
  std::unique_ptr<Arena> paramsBf16;
  // The section's constant arrays (index tables), uploaded once; their
  // device addresses are every op's OpPointers::constants.
  std::unique_ptr<Arena> constants;
  std::vector<uint64_t> constantAddresses;
  // The step key the dropout kernels read (CudaArgKind::StepKey), when the
  // package has such a launch: kStepKeyWords u32, written before each step.
  std::unique_ptr<Arena> stepKeyBuffer;
  uint64_t stepKeyAddress = 0;
  StepKey stepKey; // the key of the next step (setStepKey)
  // The column sums' ticket counters (CudaArgKind::Tickets), when the package
  // has such a launch: ticketWords() u32, zeroed once here; each launch
  // leaves them at 0.
  std::unique_ptr<Arena> ticketBuffer;
  uint64_t ticketsAddress = 0;
  bool graphsFailed = false;
  std::unique_ptr<PinnedArray<float>> hostReturn; // the loss of gradients()
  // The step counter, the schedule's constants and each step's scalars on
  // the device, and their copies back (DeviceStepControl.h).
  std::unique_ptr<StepControl> control;
  // Batches of trainStaged / gradients / forward, and of evaluate() (its
  // own, so that evaluating between two steps leaves the staged training
  // batch alone).
  std::unique_ptr<BatchStaging> staging, evalStaging;
  // Augmentation of the training images on the device (augmentOnDevice):
  // the policy and seed, and the draws of the batch being staged.
  std::optional<AugmentPolicy> deviceAugment;
  uint64_t augmentSeed = 0;
  std::vector<int32_t> imageDraws;
  int64_t steps = 0;       // optimizer steps applied, as of the last step collected
  int64_t stepsQueued = 0; // steps before the state given + steps queued since (names them)
  std::map<std::pair<std::string, int64_t>, BatchBuffers> buffers;
  // Accumulated steps by (rows, micro-batches).
  std::map<std::pair<int64_t, int64_t>, AccumulatedStep> accumulated;
  // DeviceOptions::profile: the spans queued since the last collection, by
  // kind, and the events they used (reused; none for an untimed call).
  struct TimedSpan {
    std::string kind;
    CUevent start = nullptr, end = nullptr;
  };
  std::vector<TimedSpan> spans;
  bool inTrainingStep = false; // only training steps are profiled
  std::vector<CUevent> freeEvents, allEvents;
  // A data-parallel rank (DeviceModel::joinRanks; DeviceRankStep.cpp): the
  // step's global batch (setGlobalBatch), this rank's weighted loss, each
  // step's work by (share rows, global rows) (the weight is in the graph),
  // how long a step may wait on the other ranks. `ranks` is last: destroyed
  // first, before the device.
  int64_t globalRows = 0;
  std::unique_ptr<Arena> rankLoss;
  // ZeRO-1 (DeviceOptions::zeroStage 1, shardState): this rank's slice of
  // the flat buffers, [shardBegin, shardBegin + shard.floats) of
  // shard.padded (params and grads padded to it with zeros; moment1 and
  // moment2 hold the slice only).
  bool zero = false;
  DeviceZeroSlices shard;
  int64_t shardBegin = 0;
  // ZeRO-1 with the master weights sharded (a bf16 package: shardState):
  // `masters` holds the f32 master weights of this rank's slice alone (and
  // `ema` the EMA's), paramsBf16 the whole bf16 copy (padded to
  // shard.padded), `params` only the parameters some kernel reads in f32,
  // packed (f32Params; address() maps a Region::Params value there by its
  // parameter's layout offset, f32ParamAt), `f32Staging` their all-gather's
  // room (ranks x f32Params.rankFloats).
  bool shardMasters = false;
  std::unique_ptr<Arena> masters, f32Staging;
  DeviceF32Params f32Params;
  std::map<uint64_t, uint64_t> f32ParamAt; // layout bytes -> packed bytes
  std::map<std::pair<int64_t, int64_t>, ReplayedWork> rankSteps;
  double rankTimeout = 300;

  bool adamw() const { return manifest.optimizer.kind == OptimizerKind::AdamW; }
  bool keepsEma() const { return manifest.optimizer.emaDecay > 0; }
  // AdamW updates the bf16 copy of the parameters itself (pe_adamw_bf16;
  // nothing else in a step changes the parameters: pe_ema writes the EMA).
  bool adamWritesBf16() const {
    return paramsBf16 && adamw() && kernels->has(kAdamWBf16Kernel);
  }

  ~Impl();

  const Program &program(const std::string &name) const { return manifest.program(name); }

  /// Queues `work` bracketed by two events when profiling (kind: the op
  /// kind, "gradient copies" or "optimizer"), else just queues it.
  template <typename Work> void timed(const std::string &kind, Work &&work) {
    if (!options.profile || !inTrainingStep) {
      work();
      return;
    }
    auto take = [&] {
      if (freeEvents.empty()) {
        CUevent event = nullptr;
        driver::check(driver::require().eventCreate(&event, CU_EVENT_DEFAULT), "profiling the step",
                      "cuEventCreate");
        allEvents.push_back(event);
        return event;
      }
      CUevent event = freeEvents.back();
      freeEvents.pop_back();
      return event;
    };
    TimedSpan span{kind, take(), take()};
    driver::check(driver::require().eventRecord(span.start, stream), "profiling the step",
                  "cuEventRecord");
    work();
    driver::check(driver::require().eventRecord(span.end, stream), "profiling the step",
                  "cuEventRecord");
    spans.push_back(std::move(span));
  }

  /// When profiling, one call of `kind` that takes no time of its own (a
  /// GEMM group's later member: its time is the first member's).
  void untimed(const std::string &kind) {
    if (options.profile && inTrainingStep)
      spans.push_back({kind, nullptr, nullptr});
  }

  /// Adds the queued spans' times to the profile (waits for the stream).
  void collectProfile();

  /// A host flat vector (packed, hostTotal floats) in the device layout.
  std::vector<float> toDeviceLayout(const float *packed) const;
  /// The device layout's values back into a packed host vector.
  void toHostLayout(const std::vector<float> &padded, float *packed) const;
  void uploadFlat(Arena &arena, const float *packed, const char *what);
  void downloadFlat(const Arena &arena, float *packed, const char *what);

  /// The batch size of `inputs` (checked against the manifest's inputs).
  int64_t batchOf(const std::map<std::string, HostTensor> &inputs) const;

  /// A device buffer of `bytes` (at least one alignment unit: never empty).
  std::unique_ptr<Arena> newArena(uint64_t bytes) const {
    return std::make_unique<Arena>(device, size_t(std::max<uint64_t>(bytes, kDeviceAlignment)));
  }

  BatchBuffers &buffersFor(const std::string &name, int64_t batch);

  uint64_t address(const BatchBuffers &b, ValueId v) const;

  /// Stages `inputs` (checked against the manifest) for the next step (on
  /// `into`, default `staging`).
  void stage(const std::map<std::string, HostTensor> &inputs, BatchStaging *into = nullptr,
             const HostTensor *imageDraws = nullptr);

  /// Whether the package has pe_augment_images as this runtime launches it
  /// and its first input is f32 [B, C, H, W] images.
  bool canAugmentImages() const;
  /// The kernel consume() augments the staged images with (the staged
  /// batch's size); none when the package cannot (canAugmentImages).
  BatchStaging::Augmenter imageAugmenter(int64_t batch);

  /// The staged batch's size (throws when none is staged).
  int64_t stagedBatch(const BatchStaging *from = nullptr) const;

  /// Queues the copy of the staged batch into program `name`'s inputs.
  void consumeStaged(const BatchBuffers &b, const std::string &name, BatchStaging *from = nullptr);

  /// The device addresses op `i` of program `name` sees in `b` (its steps
  /// `opSteps`: the scratch buffers' layout).
  OpPointers opPointers(const std::string &name, size_t i, const CudaOpSteps &opSteps,
                        const BatchBuffers &b, int64_t batch) const;

  /// Binds the members of every grouped GEMM of program `name` in `b`,
  /// checks them (checkGemmGroup: no member's C overlapping another's
  /// matrices) and uploads their pointer arrays into b.groupPointers, with
  /// every kernel group's table (groupTableRow of each member).
  void placeGroupPointers(const std::string &name, BatchBuffers &b, int64_t batch);

  /// Runs program `name` on the device (asynchronously, on the stream),
  /// calling `afterOp(i)`, when given, once the walk has queued op i's work
  /// (for every op, in order; a group's work at its first member's op).
  void walk(const std::string &name, BatchBuffers &b, int64_t batch,
            const std::function<void(int64_t)> &afterOp = {});

  /// One GEMM of the step program in the package's precision; a bias
  /// epilogue as one cuBLASLt matmul where it can run, else the GEMM then
  /// pe_add_bias (the loader checked the package has it); a bias-gradient
  /// epilogue as one cuBLASLt matmul where it can run, else the plain GEMM.
  /// Returns whether the bias gradient was written (the walk then skips
  /// the next entry, its fallback).
  bool runGemm(const BoundGemm &g, const std::string &where);

  /// The optimizer slot of gradient output `out`'s parameter; throws Error
  /// for a parameter the model does not have.
  const OptimizerSlot &gradientSlot(const ProgramOutput &out) const {
    auto slot = std::find_if(slots.begin(), slots.end(),
                             [&](const OptimizerSlot &s) { return s.name == out.grad; });
    if (slot == slots.end())
      throw Error(fmt::format("gradients output for unknown parameter '{}'", out.grad));
    return *slot;
  }

  /// Calls f(slot, address) for each gradient output of @gradients in `b`:
  /// its parameter's slot and the output's device address.
  template <typename F> void forEachGradientOutput(const BatchBuffers &b, F &&f) const {
    const Program &p = program("gradients");
    for (const ProgramOutput &out : p.outputs) {
      if (!out.isGrad())
        continue;
      const OptimizerSlot &slot = gradientSlot(out);
      if (b.placement.values[out.value].bytes != uint64_t(slot.size) * 4)
        throw Error(fmt::format("the gradient of '{}' has the wrong size", out.grad));
      f(slot, address(b, out.value));
    }
  }

  /// After @gradients: each gradient output into its slot of `grads`.
  void collectGradients(const BatchBuffers &b);

  void copyOnDevice(uint64_t to, uint64_t from, uint64_t bytes, const std::string &what);

  void zeroOnDevice(uint64_t at, uint64_t floats, const std::string &what);

  void copyBack(float *host, uint64_t device, size_t bytes, const char *what);

  void sync(const std::string &what);

  /// DeviceOptions::syncEachLaunch: waits for the launch just queued, so
  /// that its failure names it.
  void checkLaunch(const std::string &launch);

  /// The device address of @gradients' loss (its first output).
  uint64_t lossAddress(const BatchBuffers &b) const;

  /// Queues the write of `stepKey` into the step key buffer (nothing when
  /// the package reads none), for a step of `batch` samples: four one-word
  /// memsets on the stream, before the step's work and outside its graph,
  /// so that a replayed step reads its own key. Throws Error, naming `where`,
  /// for a key outside the masks' domain (dropoutDomainError).
  void writeStepKey(int64_t batch, const std::string &where);

  /// writeStepKey's memsets of `key` at `address`.
  void writeKeyWords(uint64_t address, const StepKey &key, int64_t batch, const std::string &where);

  /// Runs @gradients on the staged batch: the gradients into `grads`, the
  /// loss into hostReturn[0].
  void runGradients();

  /// The number of gradient-norm partials pe_sumsq_partials writes over
  /// `floats` gradients (default: the whole buffer, `total`).
  int64_t partialBlocks(int64_t floats = -1) const;
  /// The floats of the gradient buffer a step zeroes: `total`, or with
  /// ZeRO-1 the padded buffer the reduce-scatter reads.
  int64_t gradFloats() const { return zero ? shard.padded : total; }

  /// Queues a whole training step, nothing of it passing through the host:
  /// @gradients, the gradient copies, the norm's partials, the step's scalars
  /// (pe_optimizer_scalars: clipping factor, learning rate, bias
  /// corrections, into the control block) and the optimizer, which reads
  /// them there.
  void enqueueTrainStep(BatchBuffers &b, int64_t batch);

  /// The micro-batches of a step of `rows` examples in `parts` (the CPU
  /// trainer's split: consecutive rows, sizes differing by at most one, the
  /// larger first) and the buffers that step needs, the BatchBuffers of each
  /// micro-batch size included (nothing is allocated while a step is
  /// captured). The inputs must carry the batch in their first dimension
  /// alone, as the CPU trainer's split assumes.
  AccumulatedStep &accumulatedFor(int64_t rows, int64_t parts);

  /// Queues an accumulated training step, nothing of it passing through the
  /// host: for each micro-batch, its step key (from s.keys) and its rows of
  /// the whole batch into @gradients' inputs at its size, the walk, and its
  /// loss and gradients added, weighted by size / `weightRows`, into the
  /// step's loss and the flat gradient buffer (cuBLAS axpy); on a
  /// data-parallel rank (`weightRows` the global batch, of which the staged
  /// batch is this rank's share) the sums across the ranks, once a step:
  /// overlapped with the last micro-batch's backward (enqueueOverlappedSum:
  /// the earlier micro-batches' partial sums are not final), or after it
  /// (enqueueRankSum); then the optimizer, as in enqueueTrainStep.
  void enqueueAccumulatedStep(const AccumulatedStep &s, int64_t weightRows);

  /// The gradient norm's partials, the step's scalars (from the step's loss
  /// at device address `loss`) and the update.
  void enqueueOptimizer(uint64_t loss);

  /// Captures `enqueue` (the device part of a training step or evaluation
  /// batch) into work.graph; false (nothing queued) when capture fails.
  bool capture(ReplayedWork &work, const std::function<void()> &enqueue, const char *what);

  /// Queues `enqueue` (the device work of `work`): eagerly on its first
  /// run, captured on the second and replayed from then on
  /// (DeviceOptions::graphs).
  void runMaybeGraphed(ReplayedWork &work, const std::function<void()> &enqueue, const char *what,
                       const std::string &step);

  /// The state buffers of the device optimizer, in Optimizer::stateBuffers()
  /// order: AdamW m, v; SGD u; then the EMA of the weights when kept.
  std::vector<Arena *> stateArenas() const;

  /// Calls `f(begin, n)` for each maximal run of trainable slots (floats of
  /// the device layout); frozen slots are never touched.
  template <typename F> void forTrainableRuns(F &&f) const {
    for (size_t s = 0; s < slots.size();) {
      if (slots[s].frozen) {
        ++s;
        continue;
      }
      size_t begin = slots[s].offset, end = begin;
      for (; s < slots.size() && !slots[s].frozen; ++s)
        end = slots[s].offset + slots[s].size;
      if (end > begin)
        f(begin, end - begin);
    }
  }

  /// Queues the optimizer's kernel once per maximal run of trainable slots,
  /// then pe_ema on each (with an EMA); the step's scalars come from the
  /// control block.
  void launchOptimizer();

  /// Queues AdamW's or SGD's kernel on one run of floats [begin, begin + n)
  /// of the flat buffers, its moments at `stateBegin` floats of their
  /// arenas (begin, or the offset in this rank's ZeRO-1 slice).
  void launchUpdate(size_t begin, size_t n, size_t stateBegin, bool writesBf16);
  /// Queues pe_ema on every run of trainable slots (the EMA is whole).
  void launchEma();

  /// ZeRO-1 (joinRanks with DeviceOptions::zeroStage 1): the buffers of
  /// this rank's slice of `ranks` (deviceZeroSlices), first allocated here
  /// (a model made with zeroStage 1 allocates no whole gradients or moments,
  /// nor a bf16 package's EMA): the params padded, the grads allocated
  /// padded, the moments' arenas for the slice, the partials' room for every
  /// rank's; before any program ran (no buffer holds an address).
  void shardState(int rank, int ranks);
  /// The optimizer state arenas ZeRO-1 cuts to this rank's slice, the first
  /// of stateArenas(): moment1, and moment2 with AdamW; the EMA too with
  /// sharded masters (else it stays whole).
  std::vector<Arena *> shardedArenas() const;
  /// ZeRO-1 with sharded masters: the f32 master weights of this rank's
  /// slice, written into the copies the kernels read on every rank: the
  /// slice's bf16 copy (from `source`, unless `bf16Written`: AdamW wrote
  /// it), the bf16 copy all-gathered in place, and the parameters read in
  /// f32 packed, all-gathered and unpacked (f32Params). Collective.
  void publishMasters(bool bf16Written, const char *what);
  /// evaluateEma with sharded masters: the EMA of this rank's slice in place
  /// of its trainable master weights (which wait in the gradient buffer's
  /// slice, free between steps) and published (collective), `evaluate`,
  /// then the weights back and published again.
  EvalResult evaluateShardedEma(const std::function<EvalResult()> &evaluate);
  /// Calls `f(begin, n)` for each run of trainable floats inside this
  /// rank's slice (device layout offsets: begin - shardBegin in the slice).
  template <typename F> void forTrainableSliceRuns(F &&f) const {
    const size_t begin = size_t(shardBegin), end = begin + size_t(shard.floats);
    forTrainableRuns([&](size_t from, size_t n) {
      const size_t lo = std::max(from, begin), hi = std::min(from + n, end);
      if (lo < hi)
        f(lo, hi - lo);
    });
  }
  /// The f32 master weights' arena and the offset in it (floats) of layout
  /// float `begin`: `params` at begin, or with sharded masters `masters` at
  /// begin - shardBegin.
  std::pair<const Arena *, size_t> masterAt(size_t begin) const {
    if (shardMasters)
      return {masters.get(), begin - size_t(shardBegin)};
    return {params.get(), begin};
  }
  /// ZeRO-1's optimizer: the norm's partials over this rank's slice of the
  /// summed gradients, all-gathered so that pe_optimizer_scalars adds every
  /// rank's (the global norm, on every rank alike), the update of the slice,
  /// the all-gather of the parameters, the EMA and the bf16 copy (whole).
  void enqueueShardOptimizer(uint64_t loss);
  /// ZeRO-1: this rank's slice of a host flat vector (packed) into `arena`,
  /// zeros past `total`.
  void uploadShard(Arena &arena, const float *packed, const char *what);
  /// ZeRO-1: every rank's slice of `arena` into a packed host vector, on
  /// every rank (collective: the slices all-gathered into the gradient
  /// buffer, free between steps, and read back from there).
  void gatherShards(const Arena &arena, float *packed, const char *what);

  // Queues the bf16 copy of the parameters rewritten from `params` (one
  // pe_broadcast_to__bf over the whole buffer); nothing without a copy.
  void refreshBf16Params(const char *what);

  /// Queues copies of every trainable slot of `from` into `to` (device
  /// layout; the padding between slots is left alone).
  void copyTrainableSlots(const Arena &to, const Arena &from, const char *what);

  /// A data-parallel rank's step (DeviceRankStep.cpp): @gradients on this
  /// rank's share of `batch` rows, its gradients and loss scaled by `weight`
  /// (rows / the global batch, by cuBLAS axpy into zeroed buffers, as the
  /// accumulated step adds its first micro-batch), summed across the ranks
  /// (enqueueOverlappedSum; enqueueRankSum when not overlapped), then the
  /// optimizer.
  void enqueueRankStep(BatchBuffers &b, int64_t batch, float weight);
  /// Queues the sums across the ranks, in place, of the flat gradient buffer
  /// (NCCL, in 4 MiB pieces) and of the loss at device address `loss`, on
  /// the step's stream: after the backward (DeviceOptions::overlapAllReduce
  /// off).
  void enqueueRankSum(uint64_t loss);
  /// The walk of @gradients in `b` at `batch`, each gradient output added,
  /// weighted by `weight`, into its slot of `grads` (cuBLAS axpy; `kind`
  /// profiles it, `what` names it) as soon as the walk has written it, the
  /// loss likewise into device address `loss`; each of them summed across
  /// the ranks on `commStream` (ncclAllReduce: the loss, then the buckets of
  /// rankSumPlan(); with ZeRO-1 each bucket, cut at the slices, by ncclReduce
  /// to its slice's owner) as soon as its last gradient is added: the step's stream
  /// records forkEvent there, the comm stream waits for it; at the end the
  /// step's stream waits for the comm stream (joinEvent). A fork and join
  /// that a CUDA graph captures.
  void enqueueOverlappedSum(BatchBuffers &b, int64_t batch, float weight, uint64_t loss,
                            const std::string &kind, const std::string &what);
  /// When the walk of @gradients lets each all-reduce start (made once).
  struct RankSumPlan {
    struct Gradient {
      size_t slot;    // in `slots`
      ValueId value;  // the @gradients output
    };
    struct AfterOp {
      std::vector<Gradient> gradients; // final now: add them into `grads`
      bool loss = false;               // the loss is final now
      std::vector<size_t> buckets;     // all their gradients added: sum them
    };
    std::vector<GradientBucket> buckets; // in launch order
    std::map<int64_t, AfterOp> afterOp;  // by op of @gradients (-1: before the walk)
  };
  const RankSumPlan &rankSumPlan();
  /// Waits for the oldest step's readback polling, with NCCL's asynchronous
  /// errors checked and `rankTimeout` as the bound.
  void awaitRankStep(const std::string &step);

  // The overlapped all-reduce (enqueueOverlappedSum): its stream, the
  // events of its forks and its join, the plan (made at the first step).
  CUstream commStream = nullptr;
  CUevent forkEvent = nullptr, joinEvent = nullptr;
  std::optional<RankSumPlan> rankPlan;

  std::unique_ptr<NcclRanks> ranks; // last: destroyed first
};

} // namespace stringrt::cuda

#endif // STRINGRT_CUDA_DEVICEMODELIMPL_H
