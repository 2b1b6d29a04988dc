// Training, evaluation and benchmarking of a Model on a DataSet
// (docs/package.md, "Training"). `stringrun` is a thin command line over this.
//
// A run has totalSteps optimizer steps: --steps, or epochs * stepsPerEpoch
// with stepsPerEpoch = floor(train examples / batch) (the remainder of an
// epoch's order is not used). Global step s (from 0) is step s % stepsPerEpoch
// of epoch s / stepsPerEpoch and trains on the examples
// order[k * batch, (k + 1) * batch) of epochOrder(count, seed, epoch), so a run
// resumed from a checkpoint at any step takes exactly the steps an unbroken
// run takes, and gets bit-identical losses and parameters.
#pragma once

#include "stringrt/Augment.h"
#include "stringrt/Checkpoint.h"
#include "stringrt/Data.h"
#include "stringrt/HostTensor.h"
#include "stringrt/Model.h"
#include "stringrt/Optimizer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stringrt {

constexpr int64_t kDefaultBatch = 32;

// The optimizer's view of a model's parameter slots.
std::vector<OptimizerSlot> optimizerSlots(const Model &model);

// Loads the data a model trains on: `path` (a directory of IDX files, a text
// file, or an array file: .npy, .npz, .safetensors, ArrayData.h), or the
// manifest's dataset path when empty. The kind and context length come from
// the manifest's dataset; without one, a directory is IDX and a file is text
// with the context length from the first input's shape. An array file holds
// tokens when the model's first input is i32, else images; its labels or
// tokens must be below the logits' last dimension.
// Checks that the data fits the model's inputs (dtype and shape). With
// `resize` > 0 the test images are first resized to resize x resize
// (DataSet::withTestImagesResized: for evaluating at another image size).
DataSet loadModelData(const Model &model, const std::string &path, int64_t resize = 0);

// The bytes of memory the system can still give this process: MemAvailable
// of /proc/meminfo, else the free physical pages (sysconf); -1 when unknown.
int64_t availableMemoryBytes();

// What running at a batch size needs, before anything is allocated.
struct BatchMemory {
  int64_t gradients = 0; // the gradients program's intermediate values (training)
  int64_t forward = 0;   // the forward program's, times its concurrent runs (evaluation)
  int64_t batch = 0;     // the batch's input tensors
  int64_t grads = 0;     // the flat gradients and the gradient outputs (training)
  int64_t total() const;
};
// `training`: a training step (gradients program, gradients); `evalRuns`:
// forward runs at once (evaluation replicas; 0: none).
BatchMemory batchMemory(const Model &model, int64_t batch, bool training, int64_t evalRuns);

// Throws Error when what `what` ("training", "evaluation", "bench",
// "gradients") at `batch` needs (batchMemory) exceeds `availableBytes`
// (-1: unknown; then nothing is refused), saying what it needs, what is
// available and the largest batch that fits.
void checkBatchMemory(const Model &model, int64_t batch, bool training, int64_t evalRuns,
                      const std::string &what, int64_t availableBytes = availableMemoryBytes());

// The model's inputs (by manifest name) viewing the batch's tensors.
std::map<std::string, HostTensor> modelInputs(const Model &model,
                                              const Batch &batch);

struct EvalResult {
  int64_t examples = 0;
  double loss = 0;                 // Mean over the examples.
  std::optional<double> accuracy;  // Classifiers: argmax(logits) == label.
  std::optional<double> perplexity; // Text: exp(loss).
  double seconds = 0;
  bool ema = false;                 // Of the EMA weights (Optimizer::emaParameters).
};

// Runs "forward" over the whole test split in batches of `batch` (the last
// may be smaller). With threads > 1, that many model replicas (on the model's
// kernel set) evaluate disjoint batches concurrently; the result is the same
// as with one. Replicas pay off with KernelSet::Reference (single-threaded
// kernels); with KernelSet::Fast the kernels already spread each op over the
// thread pool (cpu::setNumThreads), whose loops run one at a time, so
// threads = 1 is the choice there.
EvalResult evaluate(Model &model, const DataSet &data, int64_t batch,
                    int threads = 1);

// evaluate() in pieces, for evaluations shared out (Distributed.h): the
// examples [begin, end) of the test split (one batch) give their summed
// loss (loss * rows) and correct argmax predictions (when there are logits
// to compare); `spare` lends its buffers to the batch and gets them back.
// combineEvalParts sums every batch's part in batch order, as evaluate()
// does: the same parts give evaluate()'s result, bit for bit (seconds 0).
struct EvalPart {
  double lossSum = 0;
  int64_t correct = 0;
  bool hasAccuracy = false;
};
EvalPart evalBatch(Model &model, const DataSet &data, int64_t begin, int64_t end,
                   Batch &spare);
EvalResult combineEvalParts(const std::vector<EvalPart> &parts, const DataSet &data);

// The sizes of the micro-batches a batch of `rows` is split into with
// TrainOptions::accumulate = `parts` (consecutive rows, sizes differing by
// at most one, the larger first): one definition for the CPU trainer and
// the device executor, which must split alike.
std::vector<int64_t> microBatchSizes(int64_t rows, int64_t parts);

// sum[i] += weight * part[i] for i < n: how the micro-batches' gradients
// are summed (weight = the micro-batch's rows / the batch's). One
// definition for the CPU trainer and the data-parallel ranks
// (Distributed.h), which must add alike, bit for bit.
void addWeighted(float *sum, const float *part, float weight, size_t n);

// The loss and gradients of `batch` computed in `parts` consecutive
// micro-batches (microBatchSizes), each micro-batch's mean weighted by its
// rows / the batch's and summed in micro-batch order (addWeighted; the loss
// in double), so that the result depends on the batch alone. Rows [b, b + n)
// draw the dropout masks those rows of the whole batch would (stepKey's
// firstSample + b). `micro` is scratch. --accumulate's step, on the CPU and
// on each CPU rank's share (Distributed.h).
float accumulatedGradients(Model &model, const std::map<std::string, HostTensor> &batch,
                           const StepKey &stepKey, int64_t parts, std::vector<float> &grads,
                           std::vector<float> &micro);

// The number of rows of `logits` ([rows, classes], row-major) whose argmax
// (the first largest value) equals the row's label: evaluate()'s accuracy,
// shared by every executor's evaluation.
int64_t countCorrect(const float *logits, const int32_t *labels, int64_t rows,
                     int64_t classes);

// The run's total steps: `steps` when > 0, else `epochs` * stepsPerEpoch when
// > 0, else (neither given) the resumed checkpoint's total_steps, so that a
// plain resume finishes the interrupted run, or one epoch.
struct TrainOptions {
  int64_t epochs = 0;
  int64_t steps = 0;
  int64_t batch = 0;              // 0: the checkpoint's, else kDefaultBatch.
  int64_t stopAfter = 0;          // > 0: stop after this global step (the
                                  // schedule still spans the whole run; a
                                  // later --resume continues it).
  std::optional<uint64_t> seed;   // Data order; default 0 or the checkpoint's.
  uint64_t initSeed = 0;          // Reseeds the random initialisers
                                  // (Model::initParameters); 0: the package's.
                                  // Not with resumePath.
  std::string checkpointPath;     // Written after every epoch and at the end.
  std::string resumePath;         // A checkpoint to continue from.
  std::string logPath;            // CSV log (appended to when resuming).
  bool evaluate = true;           // Evaluate after every epoch and at the end.
  int threads = 1;                // Evaluation replicas (see evaluate()).
  // Gradient accumulation (CPU and GPU): each step's batch is split along the batch
  // dimension into this many micro-batches whose gradients and losses are
  // averaged, weighted by their sizes: the same step as the whole batch
  // (within float rounding) with a micro-batch's activation memory. The data
  // order, schedule and checkpoints are the whole batch's.
  int64_t accumulate = 1;
  // Augmentation of the training images (Augment.h): unset, the package's
  // (its dataset's `augment`, off if none); set, this policy instead. The
  // evaluation never augments.
  std::optional<AugmentPolicy> augment;
};

// What the trainer reports while it runs.
struct TrainPlan {
  int64_t startStep = 0;  // Steps already taken (resumed).
  int64_t totalSteps = 0;
  int64_t stepsPerEpoch = 0;
  int64_t epochs = 0;     // ceil(totalSteps / stepsPerEpoch).
  int64_t batch = 0;
  uint64_t seed = 0;
  int64_t trainExamples = 0, testExamples = 0;
  std::string unit;       // "images" / "tokens".
  std::string device;     // TrainBackend::name(): "" on the CPU.
  AugmentPolicy augment;  // Of the training batches (off: none).
  // Whether the backend augments them (a device, in a kernel) rather than
  // the host; the same bits either way.
  bool augmentOnBackend = false;
};

struct StepReport {
  int64_t step = 0;        // 1-based global step just taken.
  int64_t epoch = 0;       // 0-based.
  int64_t stepInEpoch = 0; // 1-based.
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  double unitsPerSecond = 0; // Over this epoch's steps of this invocation.
  double etaSeconds = 0;     // Remaining steps at this invocation's mean rate.
};

struct EpochReport {
  int64_t epoch = 0;   // 0-based; the epoch just ended (or cut short).
  int64_t step = 0;    // Global steps taken.
  double meanLoss = 0; // Over this epoch's steps of this invocation.
  double seconds = 0;
  // Of `seconds`: assembling the training batches on the host (gathering,
  // augmenting), and waiting for the backend's steps to finish (collect();
  // about 0 on the CPU, which computes as a step is queued). A device run
  // that waits about 0 is bound by the host's batch work, not the device.
  double batchSeconds = 0;
  double waitSeconds = 0;
  bool complete = true;
};

class TrainObserver {
public:
  virtual ~TrainObserver() = default;
  virtual void onStart(const TrainPlan &) {}
  virtual void onStep(const TrainPlan &, const StepReport &) {}
  virtual void onEpochEnd(const TrainPlan &, const EpochReport &) {}
  virtual void onEval(const TrainPlan &, int64_t /*step*/, const EvalResult &) {}
  virtual void onCheckpoint(const TrainPlan &, const std::string & /*path*/,
                            int64_t /*step*/) {}
};

struct TrainResult {
  TrainPlan plan;
  int64_t steps = 0;     // Global steps taken at the end.
  bool finished = false; // Reached plan.totalSteps (not stopped early).
  double lastLoss = 0;
  std::optional<EvalResult> lastEval;
  std::optional<EvalResult> lastEmaEval; // With an EMA of the weights.
};

// Where train() takes the steps and evaluates: by default the model itself
// on the CPU; stringrun --device cuda passes the GPU's
// (stringrt/cuda/DeviceTraining.h). The trainer keeps everything else (the
// plan, the data order, the log, the observer, the checkpoints, resuming),
// so a run behaves the same on every backend; its host copies of the
// parameters (model.parameters()) and optimizer state are brought up to date
// with fetch() before each checkpoint and at the end.
class TrainBackend {
public:
  virtual ~TrainBackend() = default;
  // Shown in TrainPlan::device ("" for the CPU).
  virtual std::string name() const = 0;
  // The run starts from these parameters and this optimizer state (step
  // count included): freshly initialised, or the resumed checkpoint's.
  virtual void start(const std::vector<float> &params, const Optimizer &optimizer) = 0;
  // Each step's batch in `parts` consecutive micro-batches whose gradients
  // are averaged (TrainOptions::accumulate; set before start). The default
  // refuses parts > 1: the backend takes each batch whole.
  virtual void setAccumulate(int64_t parts);
  // Offers the backend the augmentation of the training images (`policy`,
  // enabled, and the run's seed; after start). True: it augments each
  // step's batch as augmentBatchImages would on the host, with the step of
  // queue()'s key (the next batch: that step + 1), and the trainer hands it
  // batches not augmented. The default declines (the host augments).
  virtual bool takeAugmentation(const AugmentPolicy &policy, uint64_t seed);
  // The rows [begin, begin + count) of each step's batch of `rows` examples
  // that the backend reads (after start): the trainer assembles and augments
  // only those, and queue()'s `batch` holds them. A data-parallel rank reads
  // its share, so it touches only its rows of the data (a memory-mapped data
  // set: only their pages). The default: every row.
  struct BatchRows {
    int64_t begin = 0, count = 0;
  };
  virtual BatchRows batchRows(int64_t rows) const { return {0, rows}; }
  // Queues one training step (gradients, clipping, the optimizer) on
  // `batch`. `next` assembles the batch of the following step and returns it
  // (nullptr for the last step; a second call returns the same): the backend
  // calls it while this step computes where it can (so that a device does
  // not wait for the host's data), and may begin uploading it; the next
  // queue()'s `batch` is that batch. `key` is the step's key of random
  // masks (DropoutMask.h: {seed, step, 0}).
  using NextBatch = std::function<const std::map<std::string, HostTensor> *()>;
  virtual void queue(const std::map<std::string, HostTensor> &batch, const NextBatch &next,
                     int64_t totalSteps, const StepKey &key) = 0;
  // The oldest queued step's results (waiting for them): sets `loss` (before
  // the update) and returns what the optimizer did. A step whose loss is
  // not finite leaves the parameters alone, and so do the steps queued after
  // it (the trainer stops at it).
  virtual OptimizerStepInfo collect(float &loss) = 0;
  // How many more steps than one the trainer may queue before collecting
  // (0: each step is collected before the next is queued).
  virtual int64_t stepsAhead() const { return 0; }
  // evaluate() of the current parameters on the test split.
  virtual EvalResult evaluate(const DataSet &data, int64_t batch) = 0;
  // The same of the EMA of the weights (the optimizer keeps one: ema = d > 0).
  virtual EvalResult evaluateEma(const DataSet &data, int64_t batch) = 0;
  // Copies the current parameters and optimizer state (and step count) into
  // `params` and `optimizer`. Where the backend holds the state (below) only
  // the rank that writes the checkpoints gets the optimizer state, and every
  // rank must call it.
  virtual void fetch(std::vector<float> &params, Optimizer &optimizer) = 0;
  // Whether the backend keeps the optimizer state itself (the data-parallel
  // ranks, Distributed.h: all of it, or with ZeRO-1 its slice): then train()
  // keeps no copy (Optimizer::shard(0, 0)) but while it writes a checkpoint,
  // and fetch() may move the backend's own state into `optimizer` rather
  // than copy it, to be given back by returnState() before the next step.
  virtual bool holdsOptimizerState() const { return false; }
  // After start() and after each checkpoint is written: where the backend
  // holdsOptimizerState(), it takes back what fetch() moved out, and
  // `optimizer` is left holding no state; else nothing.
  virtual void returnState(Optimizer &optimizer) {
    if (holdsOptimizerState())
      optimizer = optimizer.shard(0, 0);
  }
  // Whether this process writes the checkpoints. The data-parallel ranks
  // but rank 0 do not; they take part in the fetch() before each.
  virtual bool writesCheckpoints() const { return true; }
};

// Trains the model (initialising its parameters, or loading them from the
// resume checkpoint) on `backend` (nullptr: the CPU). Throws Error for bad
// options, a checkpoint that does not fit, I/O failures, or a loss that is
// not finite. At the end model.parameters() holds the trained parameters.
TrainResult train(Model &model, const DataSet &data, const TrainOptions &options,
                  TrainObserver *observer = nullptr, TrainBackend *backend = nullptr);

struct BenchResult {
  int64_t steps = 0;
  int64_t batch = 0;
  double seconds = 0;
  double stepsPerSecond = 0;
  double unitsPerSecond = 0;
  std::string unit;
};

// Times `steps` training steps (gradients and the optimizer) on batches of the
// train split, after one untimed warm-up step, from freshly initialised
// parameters. With a `profile`, the timed steps' ops add their times to it
// (Model::setProfile; the warm-up step's do not); the model stops timing
// when bench returns.
BenchResult bench(Model &model, const DataSet &data, int64_t batch,
                  int64_t steps, OpProfile *profile = nullptr);

} // namespace stringrt
