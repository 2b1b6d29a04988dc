#include "stringrt/Trainer.h"

#include "training/TrainRun.h"
#include "stringrt/ArrayData.h"
#include "stringrt/TextCorpus.h"
#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <system_error>
#include <thread>

namespace stringrt {

namespace {

using detail::Clock;
using detail::secondsSince;

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return fmt::format("{} {}", dtype == DType::F32 ? "f32" : "i32",
                     ref::shapeToString(shape));
}

// The last dimension of the forward program's "logits" output, if any.
std::optional<int64_t> logitsClasses(const Manifest &manifest) {
  for (const ProgramOutput &out : manifest.forward.outputs)
    if (!out.isGrad() && out.name == "logits") {
      const auto &shape = manifest.forward.values[out.value].shape;
      if (!shape.empty() && shape.back() > 0)
        return shape.back();
    }
  return std::nullopt;
}

} // namespace

EvalPart evalBatch(Model &model, const DataSet &data, int64_t begin, int64_t end,
                   Batch &spare) {
  Batch batch = data.range(Split::Test, begin, end, std::move(spare));
  auto outputs = model.run("forward", modelInputs(model, batch));
  auto loss = outputs.find("loss");
  if (loss == outputs.end() || loss->second.values.size() != 1)
    throw Error("evaluation: the forward program has no scalar \"loss\" output");
  EvalPart part;
  part.lossSum = static_cast<double>(loss->second.values[0]) *
                 static_cast<double>(batch.size);
  auto logits = outputs.find("logits");
  if (!data.isText() && logits != outputs.end()) {
    const ref::Tensor<float> &l = logits->second;
    const std::vector<int32_t> &labels = batch.tensors[1].i32;
    if (l.shape.size() == 2 && l.shape[0] == batch.size && l.shape[1] > 0) {
      part.hasAccuracy = true;
      part.correct = countCorrect(l.values.data(), labels.data(), batch.size, l.shape[1]);
    }
  }
  spare = std::move(batch);
  return part;
}

EvalResult combineEvalParts(const std::vector<EvalPart> &parts, const DataSet &data) {
  const int64_t count = data.count(Split::Test);
  EvalResult result;
  result.examples = count;
  double lossSum = 0;
  int64_t correct = 0;
  bool accuracy = !parts.empty();
  for (const EvalPart &p : parts) {
    lossSum += p.lossSum;
    correct += p.correct;
    accuracy = accuracy && p.hasAccuracy;
  }
  result.loss = lossSum / static_cast<double>(count);
  if (accuracy)
    result.accuracy = static_cast<double>(correct) / static_cast<double>(count);
  if (data.isText())
    result.perplexity = std::exp(result.loss);
  return result;
}

namespace {

// evaluate() without its memory check: train() checks once for the whole
// run, and its evaluations reuse the forward program's arena.
EvalResult evaluateTestSplit(Model &model, const DataSet &data, int64_t batch, int threads);

// train()'s default backend: the model and the trainer's optimizer on the
// CPU (start and fetch have nothing to copy: they are the trainer's own).
class CpuBackend : public TrainBackend {
public:
  CpuBackend(Model &model, Optimizer &optimizer, int threads)
      : model_(model), optimizer_(optimizer), threads_(threads) {}
  std::string name() const override { return ""; }
  void setAccumulate(int64_t parts) override { accumulate_ = parts; }
  void start(const std::vector<float> &, const Optimizer &) override {}
  // The step runs when queued; collect() returns it.
  void queue(const std::map<std::string, HostTensor> &batch, const NextBatch &next,
             int64_t totalSteps, const StepKey &key) override {
    model_.setStepKey(key);
    if (accumulate_ > 1)
      loss_ = accumulatedGradients(model_, batch, key, accumulate_, grads_, microGrads_);
    else
      model_.gradients(batch, loss_, grads_);
    info_ = {};
    if (std::isfinite(loss_))
      info_ = optimizer_.step(model_.parameters(), grads_, totalSteps);
    next(); // nothing runs meanwhile on the CPU: assembled after the step
  }
  OptimizerStepInfo collect(float &loss) override {
    loss = loss_;
    return info_;
  }
  EvalResult evaluate(const DataSet &data, int64_t batch) override {
    return evaluateTestSplit(model_, data, batch, threads_);
  }
  // The EMA weights in place of the raw ones, then back.
  EvalResult evaluateEma(const DataSet &data, int64_t batch) override {
    std::vector<float> raw = model_.parameters();
    model_.parameters() = optimizer_.emaParameters(raw);
    EvalResult ema;
    try {
      ema = evaluateTestSplit(model_, data, batch, threads_);
    } catch (...) {
      model_.parameters() = std::move(raw);
      throw;
    }
    model_.parameters() = std::move(raw);
    return ema;
  }
  void fetch(std::vector<float> &, Optimizer &) override {}

private:
  Model &model_;
  Optimizer &optimizer_;
  int threads_;
  int64_t accumulate_ = 1;
  std::vector<float> grads_, microGrads_;
  float loss_ = 0;
  OptimizerStepInfo info_;
};

} // namespace

std::vector<int64_t> microBatchSizes(int64_t rows, int64_t parts) {
  std::vector<int64_t> sizes;
  for (int64_t part = 0; part < parts; ++part)
    sizes.push_back(rows / parts + (part < rows % parts ? 1 : 0));
  return sizes;
}

void addWeighted(float *sum, const float *part, float weight, size_t n) {
  for (size_t i = 0; i < n; ++i)
    sum[i] += weight * part[i];
}

namespace {
// Rows [begin, begin + count) of a batched tensor, as a view.
HostTensor rowsOf(const HostTensor &t, int64_t begin, int64_t count) {
  HostTensor view = t;
  const int64_t rowElements = t.shape.at(0) > 0 ? t.numel() / t.shape[0] : 0;
  const size_t bytes = t.dtype == DType::I32 ? sizeof(int32_t) : sizeof(float);
  view.data = static_cast<const char *>(t.data) + begin * rowElements * bytes;
  view.shape[0] = count;
  return view;
}
} // namespace

float accumulatedGradients(Model &model, const std::map<std::string, HostTensor> &batch,
                           const StepKey &stepKey, int64_t parts, std::vector<float> &grads,
                           std::vector<float> &micro) {
  const int64_t rows = batch.begin()->second.shape.at(0);
  double loss = 0;
  int64_t begin = 0;
  const std::vector<int64_t> sizes = microBatchSizes(rows, parts);
  for (size_t part = 0; part < sizes.size(); ++part) {
    const int64_t size = sizes[part];
    std::map<std::string, HostTensor> rowsOfPart;
    for (const auto &[name, tensor] : batch)
      rowsOfPart.emplace(name, rowsOf(tensor, begin, size));
    float microLoss = 0;
    StepKey key = stepKey;
    key.firstSample = stepKey.firstSample + begin;
    model.setStepKey(key);
    model.gradients(rowsOfPart, microLoss, micro);
    const float weight = static_cast<float>(size) / static_cast<float>(rows);
    if (part == 0)
      grads.assign(micro.size(), 0.0f);
    addWeighted(grads.data(), micro.data(), weight, grads.size());
    loss += static_cast<double>(weight) * microLoss;
    begin += size;
  }
  return static_cast<float>(loss);
}

void TrainBackend::setAccumulate(int64_t parts) {
  if (parts > 1)
    throw Error(fmt::format("gradient accumulation (--accumulate {}) is not available on the {} "
                            "backend: it takes each step's batch whole",
                            parts, name()));
}

bool TrainBackend::takeAugmentation(const AugmentPolicy &, uint64_t) { return false; }

int64_t countCorrect(const float *logits, const int32_t *labels, int64_t rows,
                     int64_t classes) {
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = logits + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best])
        best = c;
    if (best == labels[i])
      ++correct;
  }
  return correct;
}

std::vector<OptimizerSlot> optimizerSlots(const Model &model) {
  std::vector<OptimizerSlot> slots;
  for (const ParamSlot &s : model.slots())
    slots.push_back({s.name, s.shape, static_cast<size_t>(s.offset),
                     static_cast<size_t>(s.size), s.frozen});
  return slots;
}

DataSet loadModelData(const Model &model, const std::string &path, int64_t resize) {
  const Manifest &manifest = model.manifest();
  std::string where = path;
  if (where.empty()) {
    if (!manifest.dataset)
      throw Error(fmt::format("model '{}' declares no dataset; give the data "
                              "path (--data)",
                              manifest.model));
    where = manifest.dataset->path;
  }
  if (manifest.inputs.size() != 2)
    throw Error(fmt::format("model '{}' has {} inputs; training data feeds "
                            "two (image and label, or tokens and targets)",
                            manifest.model, manifest.inputs.size()));
  // An array file (.npy, .npz, .safetensors) holds tokens or images, as
  // the model's first input says.
  const bool arrays = isArrayDataPath(where);
  bool text;
  int64_t context = 0;
  if (arrays) {
    text = manifest.inputs[0].dtype == DType::I32;
    if (text && manifest.dataset && manifest.dataset->kind == DatasetKind::Text)
      context = manifest.dataset->contextLength;
  } else if (manifest.dataset) {
    text = manifest.dataset->kind == DatasetKind::Text;
    context = manifest.dataset->contextLength;
  } else {
    text = !std::filesystem::is_directory(where);
  }
  if (text && context <= 0) {
    const auto &shape = manifest.inputs[0].shape;
    if (manifest.inputs[0].dtype != DType::I32 || shape.size() != 2 ||
        shape[0] != kBatchDim || shape[1] <= 0)
      throw Error(where,
                  fmt::format("text data needs a first input i32 [-1, T]; "
                              "model '{}' takes '{}' as {}",
                              manifest.model, manifest.inputs[0].name,
                              describe(manifest.inputs[0].dtype, shape)));
    context = shape[1];
  }
  DataSet data = [&] {
    if (arrays && text)
      return loadArrayTokens(where, context,
                             logitsClasses(manifest).value_or(kByteVocabSize));
    if (arrays)
      return loadArrayImages(where, logitsClasses(manifest).value_or(256));
    if (text)
      return DataSet::text(where, context);
    int classes = 256;
    if (auto c = logitsClasses(manifest); c && *c <= 256)
      classes = static_cast<int>(*c);
    return DataSet::idx(where, classes);
  }();
  if (resize > 0)
    data = data.withTestImagesResized(resize, resize);
  auto shapes = data.exampleShapes();
  auto dtypes = data.dtypes();
  for (size_t i = 0; i < 2; ++i) {
    const ManifestInput &input = manifest.inputs[i];
    std::vector<int64_t> shape = {kBatchDim};
    shape.insert(shape.end(), shapes[i].begin(), shapes[i].end());
    if (input.dtype != dtypes[i] || input.shape != shape)
      throw Error(where,
                  fmt::format("the data gives {} where model '{}' takes "
                              "input '{}' as {}",
                              describe(dtypes[i], shape), manifest.model,
                              input.name, describe(input.dtype, input.shape)));
  }
  return data;
}

std::map<std::string, HostTensor> modelInputs(const Model &model,
                                              const Batch &batch) {
  const auto &inputs = model.manifest().inputs;
  if (inputs.size() != batch.tensors.size())
    throw Error(fmt::format("a batch of {} tensors for a model of {} inputs",
                            batch.tensors.size(), inputs.size()));
  std::map<std::string, HostTensor> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BatchTensor &t = batch.tensors[i];
    views[inputs[i].name] = t.dtype == DType::F32
                                ? HostTensor(t.f32.data(), t.shape)
                                : HostTensor(t.i32.data(), t.shape);
  }
  return views;
}

EvalResult evaluate(Model &model, const DataSet &data, int64_t batch, int threads) {
  if (batch >= 1 && threads >= 1) {
    const int64_t count = data.count(Split::Test);
    const int64_t rows = std::min(batch, std::max<int64_t>(count, 1));
    const int64_t batches = (count + rows - 1) / rows;
    checkBatchMemory(model, rows, false, std::max<int64_t>(1, std::min<int64_t>(threads, batches)),
                     "evaluation");
  }
  return evaluateTestSplit(model, data, batch, threads);
}

namespace {

EvalResult evaluateBatches(Model &model, const DataSet &data, int64_t batch, int threads);

EvalResult evaluateTestSplit(Model &model, const DataSet &data, int64_t batch, int threads) {
  try {
    return evaluateBatches(model, data, batch, threads);
  } catch (const std::bad_alloc &) {
    throw Error(fmt::format("evaluation: out of memory at batch {} with {} thread{}: use a "
                            "smaller --batch or fewer --threads",
                            batch, threads, threads == 1 ? "" : "s"));
  }
}

EvalResult evaluateBatches(Model &model, const DataSet &data, int64_t batch, int threads) {
  if (batch < 1)
    throw Error(fmt::format("evaluation batch must be >= 1, got {}", batch));
  if (threads < 1)
    throw Error(fmt::format("threads must be >= 1, got {}", threads));
  if (threads > cpu::maxThreads())
    throw Error("evaluation: " + cpu::tooManyThreads(threads));
  const auto start = Clock::now();
  const int64_t count = data.count(Split::Test);
  if (count == 0)
    throw Error("evaluation: the test split is empty");
  const int64_t batches = (count + batch - 1) / batch;
  std::vector<EvalPart> parts(static_cast<size_t>(batches));
  // Each worker's batches reuse one batch's buffers.
  auto runBatch = [&](Model &m, int64_t b, Batch &spare) {
    parts[static_cast<size_t>(b)] =
        evalBatch(m, data, b * batch, std::min(count, (b + 1) * batch), spare);
  };
  const int64_t workers = std::min<int64_t>(threads, batches);
  if (workers <= 1) {
    Batch spare;
    for (int64_t b = 0; b < batches; ++b)
      runBatch(model, b, spare);
  } else {
    // Replicas with the same parameters; each batch's result lands in its
    // slot, and they are summed in batch order below.
    std::vector<std::unique_ptr<Model>> replicas;
    for (int64_t w = 1; w < workers; ++w) {
      replicas.push_back(std::make_unique<Model>(model.manifest(), "", model.kernels(),
                                                 model.kernelLibrary()));
      replicas.back()->parameters() = model.parameters();
    }
    std::atomic<int64_t> next{0};
    std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
    auto work = [&](Model &m, size_t w) {
      try {
        Batch spare;
        for (int64_t b = next++; b < batches; b = next++)
          runBatch(m, b, spare);
      } catch (...) {
        errors[w] = std::current_exception();
        next = batches;
      }
    };
    std::vector<std::thread> pool;
    try {
      for (int64_t w = 1; w < workers; ++w)
        pool.emplace_back(work, std::ref(*replicas[static_cast<size_t>(w - 1)]),
                          static_cast<size_t>(w));
    } catch (const std::system_error &e) {
      // The threads started finish at once; then say why.
      next = batches;
      for (std::thread &t : pool)
        t.join();
      throw Error(fmt::format("evaluation: cannot start {} threads (the system refused after "
                              "{}: {}); use fewer threads (--threads)",
                              workers, pool.size() + 1, e.what()));
    }
    work(model, 0);
    for (std::thread &t : pool)
      t.join();
    for (const std::exception_ptr &e : errors)
      if (e)
        std::rethrow_exception(e);
  }
  EvalResult result = combineEvalParts(parts, data);
  result.seconds = secondsSince(start);
  return result;
}

} // namespace

TrainResult train(Model &model, const DataSet &data, const TrainOptions &options,
                  TrainObserver *observer, TrainBackend *backend) {
  TrainObserver silent;
  TrainObserver &obs = observer ? *observer : silent;
  const Manifest &manifest = model.manifest();
  if (options.steps < 0)
    throw Error(fmt::format("steps must be >= 0, got {}", options.steps));
  if (options.epochs < 0)
    throw Error(fmt::format("epochs must be >= 1, got {}", options.epochs));
  if (options.batch < 0)
    throw Error(fmt::format("batch must be >= 1, got {}", options.batch));
  if (options.stopAfter < 0)
    throw Error(fmt::format("stop-after must be >= 1, got {}",
                            options.stopAfter));
  if (options.threads < 1)
    throw Error(fmt::format("threads must be >= 1, got {}", options.threads));
  if (options.accumulate < 1)
    throw Error(fmt::format("accumulate must be >= 1, got {}", options.accumulate));

  std::vector<OptimizerSlot> slots = optimizerSlots(model);
  Optimizer optimizer(manifest.optimizer, slots, model.parameters().size());

  TrainPlan plan;
  int64_t checkpointTotal = 0, checkpointEpoch = 0;
  plan.batch = options.batch > 0 ? options.batch : kDefaultBatch;
  plan.seed = options.seed.value_or(0);
  if (!options.resumePath.empty()) {
    if (options.initSeed != 0)
      throw Error(options.resumePath,
                  fmt::format("an init seed ({}) only applies to a new run: the "
                              "checkpoint holds the parameters",
                              options.initSeed));
    CheckpointInfo info = readCheckpointInfo(options.resumePath);
    if (options.batch > 0 && options.batch != info.batch)
      throw Error(options.resumePath,
                  fmt::format("the checkpoint was trained with batch {}; "
                              "resuming with batch {} would change the data "
                              "order",
                              info.batch, options.batch));
    if (options.seed && *options.seed != info.dataSeed)
      throw Error(options.resumePath,
                  fmt::format("the checkpoint was trained with data seed {}; "
                              "resuming with seed {} would change the data "
                              "order",
                              info.dataSeed, *options.seed));
    info = loadCheckpoint(options.resumePath, manifest.model, slots,
                          model.parameters(), optimizer);
    plan.batch = info.batch;
    plan.seed = info.dataSeed;
    plan.startStep = info.step;
    checkpointTotal = info.totalSteps;
    checkpointEpoch = info.epoch;
  } else {
    model.initParameters(options.initSeed);
  }
  if (plan.batch < 1)
    throw Error(fmt::format("batch must be >= 1, got {}", plan.batch));
  if (options.accumulate > plan.batch)
    throw Error(fmt::format("--accumulate {} splits each batch of {} into more micro-batches "
                            "than it has examples",
                            options.accumulate, plan.batch));

  plan.trainExamples = data.count(Split::Train);
  plan.testExamples = data.count(Split::Test);
  plan.unit = data.unit();
  plan.augment = options.augment.value_or(manifest.dataset ? manifest.dataset->augment
                                                            : AugmentPolicy{});
  checkAugmentPolicy(plan.augment);
  if (plan.augment.enabled() && data.isText())
    throw Error(fmt::format("augmentation ({}) applies to images; this run trains on text",
                            describeAugmentPolicy(plan.augment)));
  plan.stepsPerEpoch = plan.trainExamples / plan.batch;
  if (plan.stepsPerEpoch == 0)
    throw Error(fmt::format("the train split has {} examples, fewer than one "
                            "batch of {}",
                            plan.trainExamples, plan.batch));
  // A checkpoint records its completed epochs: they must be its step's for
  // this data (another count of examples makes another data order).
  if (!options.resumePath.empty() && checkpointEpoch != plan.startStep / plan.stepsPerEpoch)
    throw Error(options.resumePath,
                fmt::format("the checkpoint records {} completed epochs at step {}, but {} "
                            "train examples in batches of {} make {} steps per epoch ({} "
                            "epochs by step {}): it is a run on other data, or damaged",
                            checkpointEpoch, plan.startStep, plan.trainExamples, plan.batch,
                            plan.stepsPerEpoch, plan.startStep / plan.stepsPerEpoch,
                            plan.startStep));
  if (options.steps > 0)
    plan.totalSteps = options.steps;
  else if (options.epochs > 0)
    plan.totalSteps = options.epochs * plan.stepsPerEpoch;
  else if (checkpointTotal > 0)
    plan.totalSteps = checkpointTotal;
  else
    plan.totalSteps = plan.stepsPerEpoch;
  plan.epochs = (plan.totalSteps + plan.stepsPerEpoch - 1) / plan.stepsPerEpoch;
  if (plan.startStep >= plan.totalSteps)
    throw Error(options.resumePath,
                fmt::format("the checkpoint is at step {} and the run has {} "
                            "steps: nothing left to train (raise --epochs or "
                            "--steps)",
                            plan.startStep, plan.totalSteps));

  int64_t endStep = plan.totalSteps;
  if (options.stopAfter > 0) {
    if (options.stopAfter <= plan.startStep)
      throw Error(fmt::format("stop-after {} is not beyond the checkpoint's "
                              "step {}",
                              options.stopAfter, plan.startStep));
    endStep = std::min(endStep, options.stopAfter);
  }

  // Everything a step (and the evaluation) will allocate, before the first.
  // (A step with accumulation runs its largest micro-batch at a time.)
  if (!backend)
    checkBatchMemory(model, (plan.batch + options.accumulate - 1) / options.accumulate, true,
                     options.evaluate && plan.testExamples > 0 ? options.threads : 0,
                     "training");
  CpuBackend cpu(model, optimizer, options.threads);
  TrainBackend &run = backend ? *backend : cpu;
  run.setAccumulate(options.accumulate);
  run.start(model.parameters(), optimizer);
  run.returnState(optimizer);
  plan.device = run.name();
  plan.augmentOnBackend = plan.augment.enabled() && run.takeAugmentation(plan.augment, plan.seed);
  const bool hostAugments = plan.augment.enabled() && !plan.augmentOnBackend;

  detail::TrainLog log(options.logPath, options.resumePath.empty()
                                           ? std::nullopt
                                           : std::optional<int64_t>(plan.startStep));
  obs.onStart(plan);

  TrainResult result;
  result.plan = plan;
  // The steps (TrainSteps.cpp), with the evaluations and checkpoints at
  // every epoch's end and the run's (TrainCadence.cpp).
  detail::TrainRun state{model, data, options, plan, endStep, hostAugments, run, optimizer, slots, log, obs,
                 result};
  detail::runSteps(state);
  run.fetch(model.parameters(), optimizer);
  result.finished = result.steps == plan.totalSteps;
  return result;
}

BenchResult bench(Model &model, const DataSet &data, int64_t batch,
                  int64_t steps, OpProfile *profile) {
  if (batch < 1)
    throw Error(fmt::format("batch must be >= 1, got {}", batch));
  if (steps < 1)
    throw Error(fmt::format("steps must be >= 1, got {}", steps));
  const int64_t count = data.count(Split::Train);
  const int64_t perEpoch = count / batch;
  if (perEpoch == 0)
    throw Error(fmt::format("the train split has {} examples, fewer than one "
                            "batch of {}",
                            count, batch));
  checkBatchMemory(model, batch, true, 0, "bench");
  model.initParameters();
  std::vector<OptimizerSlot> slots = optimizerSlots(model);
  Optimizer optimizer(model.manifest().optimizer, slots,
                      model.parameters().size());
  const int64_t total = steps + 1;
  std::vector<float> grads;
  std::vector<int64_t> order;
  auto start = Clock::now();
  for (int64_t s = 0; s < total; ++s) {
    if (s % perEpoch == 0)
      order = epochOrder(count, 0, s / perEpoch);
    Batch b = data.batch(Split::Train, order.data() + (s % perEpoch) * batch,
                         static_cast<size_t>(batch));
    float loss = 0;
    model.setStepKey({0, s, 0}); // fresh dropout masks each step, as in training
    try {
      model.gradients(modelInputs(model, b), loss, grads);
    } catch (const std::bad_alloc &) {
      throw Error(fmt::format("bench step {}: out of memory at batch {}: use a smaller --batch",
                              s, batch));
    }
    optimizer.step(model.parameters(), grads, total);
    if (s == 0) {
      model.setProfile(profile);
      start = Clock::now(); // The warm-up step is not timed.
    }
  }
  model.setProfile(nullptr);
  BenchResult r;
  r.steps = steps;
  r.batch = batch;
  r.seconds = secondsSince(start);
  r.unit = data.unit();
  r.stepsPerSecond = r.seconds > 0 ? static_cast<double>(steps) / r.seconds : 0;
  r.unitsPerSecond = r.stepsPerSecond * static_cast<double>(batch) *
                     static_cast<double>(data.unitsPerExample());
  return r;
}

} // namespace stringrt
