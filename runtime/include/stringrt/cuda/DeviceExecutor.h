// The device executor (docs/cuda.md, "The device executor"): runs the
// programs of a "cuda" package on one GPU by walking the package's step
// program (CudaSection::steps), and trains with AdamW or SGD and
// global-norm clipping on the device.
//
// Memory: the parameters, their gradients and the optimizer state are flat
// device buffers in manifest order (a pe.get_param result is a view into
// the parameters); each program has, per batch size, one arena laid out by
// the package's arena plan (the CPU executor's layout) and one buffer for
// the values outside it (inputs, i32 results, f32 results of programs
// without a plan); scratch buffers are one block sized for the largest op.
// Everything runs on one stream (with CUDA graphs, DeviceOptions); a
// training step walks @gradients, copies the gradient outputs into the flat
// gradient buffer, computes the gradient norm's partial sums, forms the
// step's clipping factor, learning rate and bias corrections on the device
// (pe_optimizer_scalars, into the step control block: StepControl.h) and
// runs the optimizer, which reads them there: nothing passes through the
// host inside a step, and from the second step at a batch size the whole
// step is one CUDA graph replay. What the step did (its loss, gradient norm,
// learning rate) comes back in a page-locked copy the host waits for when it
// collects the step, which may be after it queued the next one.
//
// The optimizer is AdamW or SGD (pe_adamw / pe_sgd from the package), with
// the EMA of the weights (pe_ema) when the optimizer keeps one. A
// batch is staged first (stage(): uploaded on a second stream while the
// previous step computes, BatchStaging.h) and copied into the program's
// inputs when its step begins. Evaluation replays @forward (as a CUDA graph
// per batch size) over the test split and synchronises once per evaluation.
//
// A package whose programs have ops without steps is refused, naming them.
#pragma once

#include "stringrt/Augment.h"
#include "stringrt/CudaSection.h"
#include "stringrt/Data.h"
#include "stringrt/DropoutMask.h"
#include "stringrt/HostTensor.h"
#include "stringrt/Manifest.h"
#include "stringrt/OpProfile.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Trainer.h"
#include "stringrt/cuda/StepControl.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stringrt::cuda {

struct DeviceOptions {
  int device = 0;
  // The GEMMs of an fp32 package run on TF32 tensor cores (faster, ~1e-3
  // relative error in products): off for comparisons with the CPU executor.
  // A bf16 package's GEMMs are bf16 whatever this says (GemmPrecision).
  bool tf32 = false;
  // From the second training step at a batch size on, replay the step's
  // device work (the walk of @gradients, the gradient copies, the norm's
  // partials, the optimizer's scalars and the optimizer) as a CUDA graph
  // captured on that step:
  // one launch instead of hundreds. When capture fails the executor says so
  // on stderr once and runs the steps without graphs.
  bool graphs = true;
  // Upload each staged batch from page-locked memory on a second stream
  // while the previous step computes (BatchStaging.h); off: on the compute
  // stream when the step begins (for comparison: the results are the same).
  bool overlapUpload = true;
  // On data-parallel ranks (DeviceRanks.h): each bucket of the gradients'
  // all-reduce (GradientBuckets.h) launched on a second stream as soon as
  // the backward has written its last gradient, beside the rest of the
  // backward; the step's stream waits for the last one before the
  // optimizer. Off: the whole all-reduce on the step's stream after the
  // backward, in 4 MiB pieces (for comparison: the same sums, the same bits
  // on the emulator). `stringrun --no-overlap-allreduce`.
  bool overlapAllReduce = true;
  // The cap of every bucket in bytes (`stringrun --bucket-kib`); 0: PyTorch
  // DDP's, 1 MiB for the first bucket and 25 MiB for the others.
  int64_t bucketBytes = 0;
  // On data-parallel ranks: 1 for ZeRO stage 1 (`stringrun --zero 1`,
  // docs/distributed.md): rank r holds the optimizer's moments (AdamW's m
  // and v, SGD's u) of its slice of the flat buffers only
  // (deviceZeroSlices); a step sums the gradients on their slice's owner,
  // overlapped with the backward in the all-reduce's buckets cut at the
  // slices' boundaries (one ncclReduce each; overlapAllReduce off: one
  // reduce-scatter after the backward), forms the global norm from every rank's partial sums (all-gathered),
  // updates its slice and all-gathers the parameters. The EMA of the
  // weights and the parameters stay whole on every rank, but in a bf16
  // package (a bf16 copy of the parameters), where each rank keeps the f32
  // master weights and the EMA of its slice and the bf16 copy is
  // all-gathered (DeviceZeroShards.cpp). The model is made without
  // gradients or moments (nor, in a bf16 package, the EMA): joinRanks
  // allocates this rank's slices, and a step or the state before it is
  // refused. 0: replicated.
  int zeroStage = 0;
  // Augment the training images (TrainOptions::augment) in a kernel as each
  // batch enters its step (pe_augment_images, when the package has it);
  // off: on the host. The same bits either way.
  bool augmentOnDevice = true;
  // For debugging a kernel that faults: wait after every kernel launch and
  // GEMM and check for errors, so that an asynchronous failure (an illegal
  // address, a trap) is reported with the program, op, launch and kernel
  // that caused it rather than at the next wait of the step or evaluation.
  // Turns graphs off; slow. `stringrun --sync-launches`, or the environment
  // variable STRINGRT_CUDA_SYNC_LAUNCHES=1.
  bool syncEachLaunch = false;
  // Where the step's GPU time goes (`stringrun bench --device cuda
  // --profile`): every op of a program, the gradient copies and the
  // optimizer are bracketed by CUDA events and their elapsed times added to
  // this profile by op kind when a step is collected. Turns graphs off (the
  // events of a replayed graph would time the graph only).
  OpProfile *profile = nullptr;
};

class DeviceModel {
public:
  // Opens the device, loads the kernels, uploads `parameters` (the flat
  // buffer of Model::parameters(), manifest order). Throws Error when no
  // device can be used (cuda::unavailableReason()), when a program has ops
  // without steps ("... has no GPU steps for: pe.rope x2, ..."), or when the
  // optimizer's kernel is missing from the package.
  DeviceModel(const Manifest &manifest, const CudaSection &section,
              const std::vector<float> &parameters, DeviceOptions options = {});
  ~DeviceModel();
  // The refusals of the constructor that need no device (ops without steps,
  // launches that do not bind, the optimizer's kernels missing): throws Error.
  static void checkPackage(const Manifest &manifest, const CudaSection &section);
  // Throws Error unless every input has the batch as its first dimension
  // alone, which queueStep's accumulation needs.
  static void checkAccumulation(const Manifest &manifest);
  DeviceModel(const DeviceModel &) = delete;
  DeviceModel &operator=(const DeviceModel &) = delete;

  const std::string &deviceName() const;
  // The precision of every GEMM of the steps: "bf16" for a bf16 package, else
  // "tf32" with DeviceOptions::tf32, else "fp32".
  const char *gemmPrecision() const;
  // The algorithms cuBLASLt's heuristic picked, one line per GEMM shape run
  // through it so far (Gemm::chosenAlgorithms).
  std::vector<std::string> gemmAlgorithms() const;
  // The options in effect: those given, with syncEachLaunch also from
  // STRINGRT_CUDA_SYNC_LAUNCHES, which turns graphs off.
  const DeviceOptions &options() const;

  // Stages the batch the next trainStaged(), gradients() or forward() runs
  // on (`inputs` may be reused when this returns). At most one batch is
  // staged at a time.
  void stage(const std::map<std::string, HostTensor> &inputs);
  bool hasStagedBatch() const;
  // Augments the images of the training batches staged from now on with
  // stageTraining (the first input, f32 [B, C, H, W]) on the device, as
  // augmentBatchImages(policy, seed, step) does on the host: the same bits.
  // False, and nothing changes, when the package cannot (no
  // pe_augment_images kernel: compiled by an older stringc, or its first
  // input is not a batch of images).
  bool augmentOnDevice(const AugmentPolicy &policy, uint64_t seed);
  // stage() of the batch of training step `step`, augmented on the device
  // when augmentOnDevice was accepted.
  void stageTraining(const std::map<std::string, HostTensor> &inputs, int64_t step);

  // The key of the dropout masks (DropoutMask.h) of the steps queued and the
  // gradients run from now on, as Model::setStepKey: queueStep and
  // gradients() write it to the device before their work (the trainer sets
  // {seed, step, 0} before each step). Default {0, 0, 0}.
  void setStepKey(const StepKey &key);
  const StepKey &stepKey() const;

  // Queues one training step of a run of `totalSteps` on the staged batch:
  // gradients, global-norm clipping, the learning rate of the schedule, the
  // optimizer (AdamW or SGD, the formulas of Optimizer.h), all on the device;
  // returns without waiting. A step whose loss is not finite leaves the
  // parameters and the optimizer state alone, and so does every step after
  // it until setState(). Throws when kStepsInFlight steps are
  // queued and not collected.
  //
  // accumulate > 1: the batch in that many consecutive micro-batches (the
  // CPU trainer's split, TrainOptions::accumulate), each run through
  // @gradients at its own size (at most two sizes) with the dropout masks
  // its rows draw in the whole batch; the loss and the gradients are their
  // means weighted by size, in micro-batch order, then one optimizer step.
  // Activations take the memory of the largest micro-batch; still one
  // graph replay a step. The inputs must have the batch as their first
  // dimension alone.
  void queueStep(int64_t totalSteps, int64_t accumulate = 1);
  // A data-parallel run on GPUs (DeviceRanks.h, docs/distributed.md): rank
  // 0 makes the NCCL unique id (NCCL missing: Error naming the library),
  // every rank gets it and calls joinRanks (collective). From then on each
  // queueStep runs @gradients on the staged batch as this rank's share of a
  // global batch of setGlobalBatch() rows: its loss and gradients weighted by
  // share / global rows, summed across the ranks on the device (NCCL
  // all-reduce in buckets, on the step's stream and inside its graph), then
  // the same optimizer step on every rank. collectStep then polls, and a
  // step not done after `timeoutSeconds` (or an NCCL error) aborts the
  // communicator and throws Error. With accumulate > 1 the share runs in
  // micro-batches as above, each weighted by its rows / the global rows,
  // and the sums across the ranks follow the last (one all-reduce a step):
  // with rank r's share micro-batches [r A, (r + 1) A) of the global batch
  // in R A (rankShare), R ranks take one process's --accumulate R A step.
  // With DeviceOptions::zeroStage 1, joinRanks shards the moments (ZeRO-1),
  // getState gathers them (collective: every rank calls it) and setState
  // keeps this rank's slice.
  using RanksId = std::array<char, 128>;
  static RanksId newRanksId();
  void joinRanks(const RanksId &id, int rank, int ranks, double timeoutSeconds);
  void setGlobalBatch(int64_t rows);
  // The bytes of optimizer state this device holds (the moments and the
  // EMA; with ZeRO-1, DeviceOptions::zeroStage, the moments of this rank's
  // slice).
  size_t optimizerStateBytes() const;
  // The bytes of the f32 master weights this device holds: the parameter
  // buffer, or with ZeRO-1 in a bf16 package (the masters sharded) this
  // rank's slice, the parameters some kernel reads in f32 (whole) and their
  // all-gather's room (ZeroMasterShards.h).
  size_t masterWeightBytes() const;
  // Steps queued and not yet collected.
  size_t stepsInFlight() const;
  // Waits for the oldest queued step (only for it); what it did: its loss
  // (before its update), whether it was applied, lr, gradient norm and
  // clipping factor.
  StepOutcome collectStep();
  // queueStep, then `whileComputing` (when given: runs on the host while the
  // step computes; stage the next batch there), then collectStep. `loss` is
  // the step's loss. Needs no step in flight.
  OptimizerStepInfo trainStaged(int64_t totalSteps, float &loss,
                                const std::function<void()> &whileComputing = {});
  // stage(inputs), then trainStaged; returns the loss.
  float trainStep(const std::map<std::string, HostTensor> &inputs, int64_t totalSteps);
  // Optimizer steps applied, as of the last collected step.
  int64_t stepCount() const;

  // The parameters and the optimizer state (its buffers and step count)
  // from / into host copies, in the CPU optimizer's layout, so that
  // checkpoints are the CPU trainer's (Checkpoint.h). `optimizer` must be of
  // the package's kind over the manifest's parameters. setState waits for
  // the queued steps and drops their uncollected results (a new start), and
  // clears a halt (queueStep).
  void setState(const std::vector<float> &params, const Optimizer &optimizer);
  void getState(std::vector<float> &params, Optimizer &optimizer) const;

  // stringrt::evaluate() on the device: @forward over the test split in
  // batches of `batch` (the last may be smaller), each a CUDA graph replay
  // from the second batch of a size on; the losses and logits come back
  // asynchronously into page-locked memory and the host waits once (per 64
  // MiB of logits), then sums the losses and counts the correct argmaxes in
  // batch order exactly as the CPU does.
  EvalResult evaluate(const DataSet &data, int64_t batch);
  // evaluate() of the EMA of the weights (optimizer ema = d > 0; the
  // weights themselves before the first step), kept on the device by
  // `pe_ema` after each applied step: the trainable weights are swapped for
  // it on the device and back. Needs no step in flight.
  EvalResult evaluateEma(const DataSet &data, int64_t batch);

  // Runs @gradients alone: the loss and every trainable parameter's
  // gradient in its slot of the flat buffer (frozen slots 0), as
  // Model::gradients.
  void gradients(const std::map<std::string, HostTensor> &inputs, float &loss,
                 std::vector<float> &flatGrads);

  // Runs @forward; its f32 outputs by name, copied back.
  std::map<std::string, std::vector<float>> forward(const std::map<std::string, HostTensor> &inputs);

  // The parameters now (copied back; with sharded master weights every
  // rank's slice gathered: collective).
  std::vector<float> parameters() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace stringrt::cuda
