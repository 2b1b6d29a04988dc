// The training loop on small hand-built models: an image classifier on a tiny
// IDX set and a byte-level bigram model on text. Loss goes down, evaluation
// reports accuracy / perplexity, checkpoints are written, and a run resumed
// from a checkpoint (at an epoch boundary or mid-epoch) takes exactly the
// steps of an unbroken run: bit-identical losses and parameters.
#include "stringrt/Trainer.h"

#include "ProgramBuilder.h"
#include "TestFiles.h"
#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

namespace stringrt {
namespace {

using test::failsWith;
using test::readFile;
using test::TempDir;
using test::writeFile;

using test::f32;
using test::i32;
using test::ProgramBuilder;

ManifestParam normal(const std::string &name, std::vector<int64_t> shape,
                     uint64_t seed) {
  ManifestParam p;
  p.name = name;
  p.shape = std::move(shape);
  p.init = ParamInit::Normal;
  p.std = 0.3;
  p.seed = seed;
  return p;
}

ManifestOptimizer adamw(LrSchedule schedule) {
  ManifestOptimizer o;
  o.kind = OptimizerKind::AdamW;
  o.lr = 0.05;
  o.weightDecay = 0.01;
  o.clipNorm = 1.0;
  o.schedule = schedule;
  o.warmupSteps = 2;
  o.minLr = 0.001;
  return o;
}

// image [B, 1, 2, 2] -> patch_embed (patch 2) -> [B, 1, 3] -> token 0 ->
// logits [B, 3]; the bias is frozen.
// With `dropout`, the gradients program drops the patch embeddings (pe.dropout
// p 0.5 in the forward and, its VJP, on their gradient), as pe-autodiff
// builds it; the forward program (evaluation) holds none.
Manifest imageManifest(bool dropout = false) {
  Manifest m;
  m.model = "tiny_image";
  m.inputs = {{"image", DType::F32, {-1, 1, 2, 2}}, {"label", DType::I32, {-1}}};
  ManifestParam b;
  b.name = "b";
  b.shape = {3};
  b.init = ParamInit::Constant;
  b.value = 0.1;
  b.frozen = true;
  m.params = {normal("w", {4, 3}, 5), b};
  m.optimizer = adamw(LrSchedule::WarmupCosine);
  for (bool grads : {false, true}) {
    ProgramBuilder g;
    ValueId image = g.input(f32({-1, 1, 2, 2}));
    ValueId label = g.input(i32({-1}));
    ValueId w = g.param("w", {4, 3});
    ValueId bv = g.param("b", {3});
    ValueId x = g.op1("pe.patch_embed", {image, w, bv}, f32({-1, 1, 3}),
                      {{"patch", int64_t(2)}});
    const std::map<std::string, AttrValue> dropped = {{"p", 0.5}, {"stream", int64_t(0)}};
    if (grads && dropout)
      x = g.op1("pe.dropout", {x}, f32({-1, 1, 3}), dropped);
    ValueId logits = g.op1("pe.select_token", {x}, f32({-1, 3}),
                           {{"index", int64_t(0)}});
    ValueId loss = g.op1("pe.cross_entropy", {logits, label}, f32({}));
    g.output("loss", loss);
    if (!grads) {
      g.output("logits", logits);
      m.forward = g.program;
      continue;
    }
    ValueId one = g.op1("arith.constant", {}, f32({}), {{"value", 1.0}});
    ValueId dlogits = g.op1("pe.cross_entropy_grad", {logits, label, one},
                            f32({-1, 3}));
    ValueId dx = g.op1("pe.select_token_grad", {dlogits}, f32({-1, 1, 3}),
                       {{"index", int64_t(0)}});
    if (dropout)
      dx = g.op1("pe.dropout", {dx}, f32({-1, 1, 3}), dropped);
    auto dwb = g.op("pe.patch_embed_grad", {image, dx}, {f32({4, 3}), f32({3})},
                    {{"patch", int64_t(2)}});
    g.grad("w", dwb[0]);
    m.gradients = g.program;
  }
  return m;
}

// tokens [B, 4] -> embed [256, 2] -> linear [2, 256] -> logits [B, 4, 256].
Manifest textManifest() {
  Manifest m;
  m.model = "tiny_bigram";
  m.inputs = {{"tokens", DType::I32, {-1, 4}}, {"targets", DType::I32, {-1, 4}}};
  m.params = {normal("emb", {256, 2}, 7), normal("out", {2, 256}, 8)};
  m.optimizer.kind = OptimizerKind::Sgd;
  m.optimizer.lr = 0.5;
  m.optimizer.momentum = 0.9;
  m.dataset = ManifestDataset{DatasetKind::Text, "", 4};
  for (bool grads : {false, true}) {
    ProgramBuilder g;
    ValueId tokens = g.input(i32({-1, 4}));
    ValueId targets = g.input(i32({-1, 4}));
    ValueId emb = g.param("emb", {256, 2});
    ValueId out = g.param("out", {2, 256});
    ValueId e = g.op1("pe.token_embed", {tokens, emb}, f32({-1, 4, 2}));
    ValueId logits = g.op1("pe.linear", {e, out}, f32({-1, 4, 256}));
    ValueId loss = g.op1("pe.cross_entropy", {logits, targets}, f32({}));
    g.output("loss", loss);
    if (!grads) {
      g.output("logits", logits);
      m.forward = g.program;
      continue;
    }
    ValueId one = g.op1("arith.constant", {}, f32({}), {{"value", 1.0}});
    ValueId dlogits = g.op1("pe.cross_entropy_grad", {logits, targets, one},
                            f32({-1, 4, 256}));
    ValueId dout = g.op1("pe.linear_grad_weight", {e, dlogits}, f32({2, 256}));
    ValueId de = g.op1("pe.linear_grad_input", {dlogits, out}, f32({-1, 4, 2}));
    ValueId demb = g.op1("pe.token_embed_grad", {tokens, de}, f32({256, 2}));
    g.grad("emb", demb);
    g.grad("out", dout);
    m.gradients = g.program;
  }
  return m;
}

std::string bigEndian(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xFF);
  return s;
}

// 2x2 images of 3 classes: class c has pixel c bright.
void writeImages(const std::string &dir, const std::string &prefix,
                 uint32_t count) {
  std::string images = std::string("\0\0\x08\x03", 4) + bigEndian(count) +
                       bigEndian(2) + bigEndian(2);
  std::string labels = std::string("\0\0\x08\x01", 4) + bigEndian(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t c = i % 3;
    for (uint32_t p = 0; p < 4; ++p)
      images += static_cast<char>(p == c ? 220 + i % 30 : (i * 7 + p * 13) % 50);
    labels += static_cast<char>(c);
  }
  writeFile(dir + "/" + prefix + "-images-idx3-ubyte", images);
  writeFile(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
}

// Records every step's loss.
struct Recorder : TrainObserver {
  std::vector<float> losses;
  std::vector<int64_t> steps;
  std::vector<EvalResult> evals;
  std::vector<int64_t> checkpoints;
  std::vector<EpochReport> epochs;
  TrainPlan plan;
  void onStart(const TrainPlan &p) override { plan = p; }
  void onEpochEnd(const TrainPlan &, const EpochReport &r) override { epochs.push_back(r); }
  void onStep(const TrainPlan &, const StepReport &r) override {
    losses.push_back(static_cast<float>(r.loss));
    steps.push_back(r.step);
  }
  void onEval(const TrainPlan &, int64_t, const EvalResult &e) override {
    evals.push_back(e);
  }
  void onCheckpoint(const TrainPlan &, const std::string &, int64_t step) override {
    checkpoints.push_back(step);
  }
};

struct ImageFixture {
  TempDir dir;
  std::string data = dir.path().string() + "/data";
  ImageFixture() {
    std::filesystem::create_directory(data);
    writeImages(data, "train", 30);
    writeImages(data, "t10k", 9);
  }
};

TEST(TrainerTest, TrainsAnImageClassifier) {
  ImageFixture fx;
  Model model(imageManifest());
  DataSet data = loadModelData(model, fx.data);
  TrainOptions o;
  o.epochs = 4;
  o.batch = 4;
  o.seed = 3;
  o.checkpointPath = fx.dir.file("ckpt.safetensors");
  o.logPath = fx.dir.file("log.csv");
  Recorder rec;
  TrainResult r = train(model, data, o, &rec);
  // 30 examples, batch 4: 7 steps per epoch.
  EXPECT_EQ(rec.plan.stepsPerEpoch, 7);
  EXPECT_EQ(rec.plan.totalSteps, 28);
  EXPECT_EQ(r.steps, 28);
  ASSERT_EQ(rec.losses.size(), 28u);
  EXPECT_EQ(rec.steps.front(), 1);
  EXPECT_EQ(rec.steps.back(), 28);
  EXPECT_LT(rec.losses.back(), rec.losses.front());
  EXPECT_EQ(rec.checkpoints, (std::vector<int64_t>{7, 14, 21, 28}));
  ASSERT_EQ(rec.evals.size(), 4u);
  EXPECT_EQ(rec.evals.back().examples, 9);
  ASSERT_TRUE(rec.evals.back().accuracy.has_value());
  EXPECT_FALSE(rec.evals.back().perplexity.has_value());
  EXPECT_GE(*rec.evals.back().accuracy, 2.0 / 3.0);
  // The frozen bias never moved.
  EXPECT_EQ(model.parameters()[12], 0.1f);

  CheckpointInfo info = readCheckpointInfo(o.checkpointPath);
  EXPECT_EQ(info.model, "tiny_image");
  EXPECT_EQ(info.step, 28);
  EXPECT_EQ(info.epoch, 4);
  EXPECT_EQ(info.dataSeed, 3u);
  EXPECT_EQ(info.batch, 4);
  EXPECT_EQ(info.totalSteps, 28);

  // The CSV: a header, 28 train rows and 4 eval rows.
  std::istringstream csv(readFile(o.logPath));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "kind,step,epoch,loss,lr,grad_norm,accuracy,perplexity,"
                  "units_per_s");
  int trainRows = 0, evalRows = 0;
  while (std::getline(csv, line))
    (line.rfind("train,", 0) == 0 ? trainRows : evalRows)++;
  EXPECT_EQ(trainRows, 28);
  EXPECT_EQ(evalRows, 4);

  // Evaluation with replicas gives the same result as without.
  EvalResult one = evaluate(model, data, 2, 1);
  EvalResult three = evaluate(model, data, 2, 3);
  EXPECT_EQ(one.loss, three.loss);
  EXPECT_EQ(one.accuracy, three.accuracy);
  // The trainer evaluated in batches of 4: the same value by hand.
  EXPECT_NEAR(evaluate(model, data, 4).loss, rec.evals.back().loss, 1e-12);
}

// Trains `epochs` epochs unbroken, and in two parts: `firstSteps` steps
// (--steps, writing a checkpoint) then a resume in a fresh model to the end.
// The part one run is shorter, so this needs a constant schedule. Both must
// agree bit for bit.
void checkResume(const Manifest &manifest, const DataSet &data, int64_t batch,
                 int64_t epochs, int64_t firstSteps) {
  TempDir dir;
  TrainOptions o;
  o.epochs = epochs;
  o.batch = batch;
  o.seed = 11;
  o.evaluate = false;
  Model whole(manifest);
  Recorder full;
  train(whole, data, o, &full);

  Model parted(manifest);
  TrainOptions first = o;
  first.checkpointPath = dir.file("ckpt.safetensors");
  first.logPath = dir.file("log.csv");
  first.epochs = 0;
  first.steps = firstSteps;
  Recorder a;
  train(parted, data, first, &a);

  // Resume into a fresh model (as a new process would), with the whole run's
  // length.
  Model resumed(manifest);
  TrainOptions second;
  second.epochs = epochs;
  second.resumePath = first.checkpointPath;
  second.logPath = first.logPath;
  second.evaluate = false;
  Recorder b;
  train(resumed, data, second, &b);
  EXPECT_EQ(b.plan.startStep, firstSteps);
  EXPECT_EQ(b.plan.batch, batch);
  EXPECT_EQ(b.plan.seed, 11u);

  std::vector<float> joined = a.losses;
  joined.insert(joined.end(), b.losses.begin(), b.losses.end());
  ASSERT_EQ(joined.size(), full.losses.size());
  for (size_t i = 0; i < joined.size(); ++i)
    EXPECT_EQ(joined[i], full.losses[i]) << "step " << i + 1;
  EXPECT_EQ(resumed.parameters(), whole.parameters());

  // The log has one header and every step once.
  std::istringstream csv(readFile(first.logPath));
  std::string line;
  int headers = 0, rows = 0;
  while (std::getline(csv, line))
    (line.rfind("kind,", 0) == 0 ? headers : rows)++;
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(rows, static_cast<int>(full.losses.size()));
}

TEST(TrainerTest, ResumeAtAnEpochBoundaryIsBitExact) {
  ImageFixture fx;
  Manifest m = imageManifest();
  m.optimizer.schedule = LrSchedule::Constant; // A --steps part one.
  Model model(m);
  DataSet data = loadModelData(model, fx.data);
  checkResume(m, data, 4, 3, 7);
}

// Each step draws its own dropout masks from (seed, step): a resumed run
// draws the unbroken run's, bit for bit.
TEST(TrainerTest, ResumeWithDropoutIsBitExact) {
  ImageFixture fx;
  Manifest m = imageManifest(true);
  m.optimizer.schedule = LrSchedule::Constant;
  Model model(m);
  DataSet data = loadModelData(model, fx.data);
  checkResume(m, data, 4, 3, 10);
}

TEST(TrainerTest, ResumeMidEpochIsBitExact) {
  ImageFixture fx;
  Manifest m = imageManifest();
  m.optimizer.schedule = LrSchedule::Constant;
  Model model(m);
  DataSet data = loadModelData(model, fx.data);
  checkResume(m, data, 4, 3, 10);
}

TEST(TrainerTest, StopAndResumeWithCosineScheduleIsBitExact) {
  // stopAfter interrupts a run without changing its schedule; the checkpoint
  // records the run's length, so resuming without epochs or steps finishes
  // that run. At an epoch boundary and mid-epoch.
  ImageFixture fx;
  Manifest m = imageManifest();
  Model whole(m);
  DataSet data = loadModelData(whole, fx.data);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 5;
  o.evaluate = false;
  Recorder full;
  train(whole, data, o, &full);
  ASSERT_EQ(full.losses.size(), 12u);

  for (int64_t stop : {6, 8}) {
    TempDir dir;
    Model first(m);
    TrainOptions p = o;
    p.stopAfter = stop;
    p.checkpointPath = dir.file("ckpt.safetensors");
    Recorder a;
    TrainResult ra = train(first, data, p, &a);
    EXPECT_FALSE(ra.finished);
    EXPECT_EQ(ra.steps, stop);
    EXPECT_EQ(a.checkpoints.back(), stop);
    EXPECT_EQ(readCheckpointInfo(p.checkpointPath).totalSteps, 12);

    Model resumed(m);
    TrainOptions r;
    r.resumePath = p.checkpointPath;
    r.evaluate = false;
    Recorder b;
    TrainResult rb = train(resumed, data, r, &b);
    EXPECT_TRUE(rb.finished);
    EXPECT_EQ(b.plan.totalSteps, 12);
    std::vector<float> joined = a.losses;
    joined.insert(joined.end(), b.losses.begin(), b.losses.end());
    EXPECT_EQ(joined, full.losses) << "stopped after " << stop;
    EXPECT_EQ(resumed.parameters(), whole.parameters());

    // Stopping at or before the checkpoint's step is an error.
    r.stopAfter = stop;
    EXPECT_TRUE(failsWith([&] { train(resumed, data, r); }, "",
                          {"is not beyond the checkpoint's step"}));
  }
}

// The first six columns of the log's lines (kind, step, epoch, loss, lr,
// grad_norm: what does not depend on the time a step took).
std::vector<std::string> logColumns(const std::string &path) {
  std::istringstream csv(readFile(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(csv, line);) {
    size_t at = 0;
    for (int comma = 0; comma < 6 && at != std::string::npos; ++comma)
      at = line.find(',', at + 1);
    lines.push_back(line.substr(0, at));
  }
  return lines;
}

TEST(TrainerTest, ResumeAfterAKillLogsEveryStepOnce) {
  // A run checkpoints at step 7 (epoch 1), goes on to step 10, logging
  // steps 8 to 10 and an evaluation, and is killed before its next
  // checkpoint: its checkpoint is still step 7's. Resumed from it, the run
  // takes steps 8 to 10 again: they are logged once, as in an unbroken run.
  ImageFixture fx;
  Manifest m = imageManifest();
  DataSet data = loadModelData(Model(m), fx.data);
  TrainOptions o;
  o.epochs = 3;
  o.batch = 4;
  o.seed = 11;
  o.logPath = fx.dir.file("full.csv");
  Model whole(m);
  train(whole, data, o, nullptr);

  TrainOptions part = o;
  part.logPath = fx.dir.file("killed.csv");
  part.checkpointPath = fx.dir.file("step7.ckpt");
  part.stopAfter = 7;
  Model first(m);
  train(first, data, part, nullptr);
  TrainOptions doomed = part;
  doomed.resumePath = part.checkpointPath;
  doomed.checkpointPath = "";
  doomed.stopAfter = 10;
  Model second(m);
  train(second, data, doomed, nullptr);
  // The kill tore the last row.
  writeFile(part.logPath, readFile(part.logPath) + "train,11,2,0.5");
  ASSERT_EQ(logColumns(part.logPath).size(), 1u + 10 + 2 + 1);

  TrainOptions resumed = o;
  resumed.resumePath = part.checkpointPath;
  resumed.logPath = part.logPath;
  Model third(m);
  train(third, data, resumed, nullptr);
  EXPECT_EQ(logColumns(part.logPath), logColumns(o.logPath));
  EXPECT_EQ(third.parameters(), whole.parameters());
  // The rewrite left no temporary file behind.
  for (const std::string &entry : fx.dir.entries())
    EXPECT_EQ(entry.find(".tmp."), std::string::npos) << entry;
}

TEST(TrainerTest, ResumeRefusesWhatIsNotItsRun) {
  ImageFixture fx;
  Manifest m = imageManifest();
  DataSet data = loadModelData(Model(m), fx.data);
  TrainOptions o;
  o.epochs = 3;
  o.batch = 4;
  o.stopAfter = 10; // epoch 1 of 7 steps each
  o.evaluate = false;
  o.checkpointPath = fx.dir.file("ckpt");
  Model model(m);
  train(model, data, o, nullptr);

  // Other data: 20 examples make 5 steps per epoch, 2 epochs by step 10.
  std::string other = fx.dir.file("other");
  std::filesystem::create_directory(other);
  writeImages(other, "train", 20);
  writeImages(other, "t10k", 3);
  TrainOptions resume;
  resume.resumePath = o.checkpointPath;
  resume.evaluate = false;
  Model again(m);
  EXPECT_TRUE(failsWith([&] { train(again, loadModelData(again, other), resume, nullptr); },
                        o.checkpointPath,
                        {"the checkpoint records 1 completed epochs at step 10, but 20 train "
                         "examples in batches of 4 make 5 steps per epoch (2 epochs by step "
                         "10): it is a run on other data, or damaged"}));

  // A log that is not a training log is not rewritten.
  resume.logPath = fx.dir.file("notes.txt");
  writeFile(resume.logPath, "my notes\n");
  EXPECT_TRUE(failsWith([&] { train(again, data, resume, nullptr); }, resume.logPath,
                        {"is not a training log (its first line is not \"kind,step,"}));
  EXPECT_EQ(readFile(resume.logPath), "my notes\n");
}

TEST(TrainerTest, BatchMemoryIsEstimatedAndCheckedBeforeAllocating) {
  Model model(imageManifest());
  const BatchMemory need = batchMemory(model, 4, true, 1);
  EXPECT_GT(need.gradients, 0);
  EXPECT_GT(need.forward, 0);
  EXPECT_EQ(need.batch, 4 * (4 + 1) * 4); // image [1, 2, 2] and a label per example
  EXPECT_EQ(need.grads, model.parameterCount() * 2 * 4);
  EXPECT_NO_THROW(checkBatchMemory(model, 4, true, 1, "training", need.total()));
  EXPECT_TRUE(failsWith([&] { checkBatchMemory(model, 4, true, 1, "training", need.total() - 1); },
                        "",
                        {"training at batch 4 needs about ", "for the gradients program's",
                         "available: use a smaller --batch (at most about 3 fits)"}));
  // An absurd batch saturates; it never overflows.
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_EQ(batchMemory(model, huge, true, 1).total(), std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(failsWith([&] { checkBatchMemory(model, huge, false, 3, "evaluation", 1 << 30); },
                        "", {"evaluation at batch", "needs about more than 9 EB of memory"}));
}

TEST(TrainerTest, ABatchThatCannotFitIsRefusedNotAllocated) {
  // 2^32 floats (16 GiB) an example: batch 30 needs ~1 TB.
  Manifest m;
  m.model = "huge";
  m.inputs = {{"image", DType::F32, {-1, 1, 2, 2}}, {"label", DType::I32, {-1}}};
  for (Program *p : {&m.forward, &m.gradients}) {
    ProgramBuilder g;
    ValueId image = g.input(f32({-1, 1, 2, 2}));
    g.input(i32({-1}));
    ValueId big = g.op1("pe.expand_axis", {image}, f32({-1, int64_t(1) << 30, 1, 2, 2}),
                        {{"axis", int64_t(1)}, {"size", int64_t(1) << 30}});
    g.output("loss", g.op1("pe.mean", {big}, f32({})));
    *p = g.program;
  }
  ImageFixture fx;
  Model model(m);
  DataSet data = loadModelData(model, fx.data);
  if (availableMemoryBytes() > batchMemory(model, 30, true, 1).total())
    GTEST_SKIP() << "this machine has a terabyte available";
  TrainOptions o;
  o.batch = 30;
  EXPECT_TRUE(failsWith([&] { train(model, data, o); }, "",
                        {"training at batch 30 needs about 1.0 TB of memory (515.4 GB for the "
                         "gradients program's intermediate values, 515.4 GB for the forward "
                         "program's, ",
                         "use a smaller --batch"}));
  EXPECT_TRUE(failsWith([&] { evaluate(model, data, 9, 2); }, "",
                        {"evaluation at batch 9 needs about"}));
  EXPECT_TRUE(failsWith([&] { bench(model, data, 30, 1); }, "", {"bench at batch 30 needs"}));
}

TEST(TrainerTest, ThreadCountsAreBounded) {
  ImageFixture fx;
  Model model(imageManifest());
  DataSet data = loadModelData(model, fx.data);
  const int beyond = cpu::maxThreads() + 1;
  EXPECT_GE(cpu::maxThreads(), 16);
  EXPECT_LE(cpu::maxThreads(), 1024);
  EXPECT_TRUE(failsWith([&] { evaluate(model, data, 1, beyond); }, "",
                        {"evaluation: " + std::to_string(beyond) + " threads asked for; this "
                         "machine has ",
                         "allows at most " + std::to_string(cpu::maxThreads())}));
  EXPECT_TRUE(failsWith([&] { cpu::setNumThreads(beyond); }, "",
                        {"setNumThreads: " + std::to_string(beyond) + " threads asked for"}));
  EXPECT_GE(cpu::numThreads(), 1); // the pool is untouched
}

// 400 bytes of "abcab" repeated: 360 to train on, 40 to test, context 4.
DataSet abcabCorpus() {
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "abcab"[i % 5];
  std::vector<int32_t> tokens(text.begin(), text.end());
  return DataSet::textFromTokens(std::vector<int32_t>(tokens.begin(), tokens.begin() + 360),
                                 std::vector<int32_t>(tokens.begin() + 360, tokens.end()), 4);
}

TEST(TrainerTest, TrainsTextAndReportsPerplexity) {
  DataSet data = abcabCorpus();
  Model model(textManifest());
  TrainOptions o;
  o.epochs = 3;
  o.batch = 8;
  Recorder rec;
  train(model, data, o, &rec);
  // floor(359 / 4) = 89 windows, 11 steps per epoch.
  EXPECT_EQ(rec.plan.stepsPerEpoch, 11);
  EXPECT_EQ(rec.plan.unit, "tokens");
  ASSERT_EQ(rec.evals.size(), 3u);
  const EvalResult &e = rec.evals.back();
  EXPECT_EQ(e.examples, 9); // floor(39 / 4)
  ASSERT_TRUE(e.perplexity.has_value());
  EXPECT_FALSE(e.accuracy.has_value());
  EXPECT_NEAR(*e.perplexity, std::exp(e.loss), 1e-9 * *e.perplexity);
  // Far better than uniform over 256 bytes.
  EXPECT_LT(*e.perplexity, 20.0);
  EXPECT_LT(rec.losses.back(), rec.losses.front());

  checkResume(textManifest(), data, 8, 2, 5);
}

TEST(TrainerTest, RejectsDataThatDoesNotFitAndBadRuns) {
  ImageFixture fx;
  // Text data for an image model.
  Model model(imageManifest());
  std::string corpus = fx.dir.file("corpus.txt");
  writeFile(corpus, std::string(200, 'x'));
  EXPECT_TRUE(failsWith([&] { loadModelData(model, corpus); }, corpus,
                        {"text data needs a first input i32 [-1, T]",
                         "model 'tiny_image' takes 'image' as f32 [-1, 1, 2, "
                         "2]"}));
  // No dataset and no path.
  EXPECT_TRUE(failsWith([&] { loadModelData(model, ""); }, "",
                        {"declares no dataset"}));
  DataSet data = loadModelData(model, fx.data);
  TrainOptions o;
  o.batch = 31;
  EXPECT_TRUE(failsWith([&] { train(model, data, o); }, "",
                        {"fewer than one batch of 31"}));

  // Resuming with another batch size or seed, or past the end.
  o.batch = 4;
  o.epochs = 1;
  o.checkpointPath = fx.dir.file("ckpt.safetensors");
  train(model, data, o);
  TrainOptions r;
  r.resumePath = o.checkpointPath;
  r.batch = 5;
  EXPECT_TRUE(failsWith([&] { train(model, data, r); }, r.resumePath,
                        {"trained with batch 4"}));
  r.batch = 0;
  r.seed = 9;
  EXPECT_TRUE(failsWith([&] { train(model, data, r); }, r.resumePath,
                        {"trained with data seed 0"}));
  r.seed.reset();
  EXPECT_TRUE(failsWith([&] { train(model, data, r); }, r.resumePath,
                        {"nothing left to train"}));
  // Another model's checkpoint.
  Model text(textManifest());
  DataSet tokens = DataSet::textFromTokens(std::vector<int32_t>(50, 1),
                                           std::vector<int32_t>(10, 1), 4);
  r.epochs = 2;
  EXPECT_TRUE(failsWith([&] { train(text, tokens, r); }, r.resumePath,
                        {"checkpoint is of model 'tiny_image', not "
                         "'tiny_bigram'"}));
}

// A backend that runs each step on the CPU when it is queued but hands the
// results back only when collected, and records the trainer's calls: the
// trainer's side of queueing steps ahead (the GPU backend's
// stepsAhead() is 1).
class QueueingBackend : public TrainBackend {
public:
  QueueingBackend(Model &model, int64_t ahead) : model_(model), ahead_(ahead) {}
  std::string name() const override { return "queueing"; }
  void start(const std::vector<float> &params, const Optimizer &optimizer) override {
    model_.parameters() = params;
    optimizer_ = std::make_unique<Optimizer>(optimizer);
    calls.push_back("start");
  }
  void queue(const std::map<std::string, HostTensor> &batch, const NextBatch &next,
             int64_t totalSteps, const StepKey &key) override {
    model_.setStepKey(key);
    float loss = 0;
    std::vector<float> grads;
    model_.gradients(batch, loss, grads);
    OptimizerStepInfo info;
    if (std::isfinite(loss))
      info = optimizer_->step(model_.parameters(), grads, totalSteps);
    results_.push_back({loss, info});
    next();
    calls.push_back("queue");
    maxQueued = std::max(maxQueued, int64_t(results_.size()));
  }
  OptimizerStepInfo collect(float &loss) override {
    EXPECT_FALSE(results_.empty());
    loss = results_.front().first;
    OptimizerStepInfo info = results_.front().second;
    results_.pop_front();
    calls.push_back("collect");
    return info;
  }
  int64_t stepsAhead() const override { return ahead_; }
  EvalResult evaluate(const DataSet &data, int64_t batch) override {
    EXPECT_TRUE(results_.empty()) << "evaluated with steps not collected";
    calls.push_back("evaluate");
    return stringrt::evaluate(model_, data, batch);
  }
  EvalResult evaluateEma(const DataSet &data, int64_t batch) override {
    EXPECT_TRUE(results_.empty()) << "evaluated with steps not collected";
    calls.push_back("evaluate ema");
    std::vector<float> raw = model_.parameters();
    model_.parameters() = optimizer_->emaParameters(raw);
    EvalResult ema = stringrt::evaluate(model_, data, batch);
    model_.parameters() = std::move(raw);
    return ema;
  }
  void fetch(std::vector<float> &params, Optimizer &optimizer) override {
    EXPECT_TRUE(results_.empty()) << "fetched with steps not collected";
    params = model_.parameters();
    optimizer = *optimizer_;
    calls.push_back("fetch");
  }

  std::vector<std::string> calls;
  int64_t maxQueued = 0;

private:
  Model &model_;
  int64_t ahead_;
  std::unique_ptr<Optimizer> optimizer_;
  std::deque<std::pair<float, OptimizerStepInfo>> results_;
};

TEST(TrainerTest, StepsQueuedAheadAreReportedInOrderAndNeverCrossAnEpoch) {
  ImageFixture fx;
  TrainOptions o;
  o.epochs = 2;
  o.batch = 4; // 7 steps per epoch
  o.seed = 3;
  o.checkpointPath = fx.dir.file("ckpt.safetensors");
  Model cpu(imageManifest());
  DataSet data = loadModelData(cpu, fx.data);
  Recorder want;
  train(cpu, data, o, &want);
  for (int64_t ahead : {1, 2}) {
    Model model(imageManifest());
    QueueingBackend backend(model, ahead);
    Recorder got;
    train(model, data, o, &got, &backend);
    EXPECT_EQ(got.losses, want.losses) << ahead;
    EXPECT_EQ(got.steps, want.steps) << ahead;
    EXPECT_EQ(model.parameters(), cpu.parameters()) << ahead;
    ASSERT_EQ(got.evals.size(), 2u);
    EXPECT_EQ(got.evals[1].loss, want.evals[1].loss);
    EXPECT_EQ(backend.maxQueued, 1 + ahead);
    // Each epoch: queued ahead by `ahead`, then everything collected before
    // the evaluation and the checkpoint's fetch.
    std::vector<std::string> epoch;
    for (int64_t s = 0; s < 7; ++s) {
      epoch.push_back("queue");
      if (s >= ahead && s < 6)
        epoch.push_back("collect");
    }
    for (int64_t i = 0; i < std::min<int64_t>(ahead, 6) + 1; ++i)
      epoch.push_back("collect");
    epoch.push_back("evaluate");
    epoch.push_back("fetch");
    std::vector<std::string> expected = {"start"};
    for (int e = 0; e < 2; ++e)
      expected.insert(expected.end(), epoch.begin(), epoch.end());
    expected.push_back("fetch"); // the end of the run
    EXPECT_EQ(backend.calls, expected) << ahead;
  }
}

// A device whose steps take 20 ms to finish after they are queued.
class SlowDeviceBackend : public QueueingBackend {
public:
  using QueueingBackend::QueueingBackend;
  OptimizerStepInfo collect(float &loss) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return QueueingBackend::collect(loss);
  }
};

// Each epoch's report splits its time: assembling batches on the host, and
// waiting in collect() for the backend (the CPU computes in queue()).
TEST(TrainerTest, EpochReportsSplitBatchAndWaitTime) {
  ImageFixture fx;
  TrainOptions o;
  o.epochs = 2;
  o.batch = 4; // 7 steps per epoch
  o.evaluate = false;
  Model cpu(imageManifest());
  DataSet data = loadModelData(cpu, fx.data);
  Recorder onCpu;
  train(cpu, data, o, &onCpu);
  Model model(imageManifest());
  SlowDeviceBackend device(model, 1);
  Recorder onDevice;
  train(model, data, o, &onDevice, &device);
  for (const Recorder *r : {&onCpu, &onDevice}) {
    ASSERT_EQ(r->epochs.size(), 2u);
    for (const EpochReport &e : r->epochs) {
      EXPECT_GT(e.batchSeconds, 0);
      EXPECT_LE(e.batchSeconds + e.waitSeconds, e.seconds);
    }
  }
  for (const EpochReport &e : onCpu.epochs)
    EXPECT_LT(e.waitSeconds, 0.05);
  for (const EpochReport &e : onDevice.epochs)
    EXPECT_GE(e.waitSeconds, 7 * 0.020); // 7 steps collected, 20 ms each
}

// The image classifier with an infinite (frozen) bias: every loss is NaN.
Manifest divergingImageManifest() {
  Manifest m = imageManifest();
  m.params[1].value = std::numeric_limits<double>::infinity();
  return m;
}

TEST(TrainerTest, DivergingLossStops) {
  ImageFixture fx;
  Model model(divergingImageManifest());
  DataSet data = loadModelData(model, fx.data);
  TrainOptions o;
  o.batch = 4;
  o.epochs = 2;
  EXPECT_TRUE(failsWith([&] { train(model, data, o); }, "",
                        {"step 1 (epoch 1): the loss is", "stopping"}));
  // Queued ahead of its report (QueueingBackend below), the run stops at
  // the same step.
  QueueingBackend backend(model, 1);
  EXPECT_TRUE(failsWith([&] { train(model, data, o, nullptr, &backend); }, "",
                        {"step 1 (epoch 1): the loss is", "stopping"}));
}

TEST(TrainerTest, BenchTimesSteps) {
  ImageFixture fx;
  Model model(imageManifest());
  DataSet data = loadModelData(model, fx.data);
  BenchResult r = bench(model, data, 4, 20);
  EXPECT_EQ(r.steps, 20);
  EXPECT_EQ(r.batch, 4);
  EXPECT_EQ(r.unit, "images");
  EXPECT_GT(r.stepsPerSecond, 0);
  EXPECT_DOUBLE_EQ(r.unitsPerSecond, r.stepsPerSecond * 4);
}


// Gradient accumulation: micro-batches of the step's batch (equal, uneven,
// one example each) take the whole batch's steps within float rounding, for
// images (f32 [B, ...] and i32 labels) and tokens (i32 [B, T]).
void expectSameRun(const Recorder &want, const Model &wantModel, const Recorder &got,
                   const Model &gotModel, int64_t accumulate) {
  ASSERT_EQ(got.losses.size(), want.losses.size()) << accumulate;
  // The first step's loss is before any update: the batch's mean either way.
  EXPECT_NEAR(got.losses[0], want.losses[0], 1e-6 * std::abs(want.losses[0])) << accumulate;
  for (size_t i = 0; i < want.losses.size(); ++i)
    EXPECT_NEAR(got.losses[i], want.losses[i], 1e-4 * std::abs(want.losses[i]) + 1e-6)
        << "step " << i + 1 << ", accumulate " << accumulate;
  ASSERT_EQ(gotModel.parameters().size(), wantModel.parameters().size());
  for (size_t i = 0; i < wantModel.parameters().size(); ++i)
    EXPECT_NEAR(gotModel.parameters()[i], wantModel.parameters()[i], 1e-4)
        << "parameter " << i << ", accumulate " << accumulate;
}

TEST(TrainerTest, AccumulatedMicroBatchesTakeTheWholeBatchsSteps) {
  ImageFixture fx;
  TrainOptions o;
  o.epochs = 2;
  o.batch = 6; // 30 examples: 5 steps per epoch
  o.seed = 5;
  Model whole(imageManifest());
  DataSet data = loadModelData(whole, fx.data);
  Recorder want;
  train(whole, data, o, &want);
  for (int64_t accumulate : {2, 3, 4, 6}) { // 4: micro-batches of 2, 2, 1, 1
    Model model(imageManifest());
    TrainOptions p = o;
    p.accumulate = accumulate;
    Recorder got;
    train(model, data, p, &got);
    expectSameRun(want, whole, got, model, accumulate);
    // The data order and the plan are the whole batch's.
    EXPECT_EQ(got.plan.batch, 6);
    EXPECT_EQ(got.plan.stepsPerEpoch, 5);
    // Deterministic: the same run again gives the same bits.
    Model again(imageManifest());
    Recorder repeat;
    train(again, data, p, &repeat);
    EXPECT_EQ(repeat.losses, got.losses);
    EXPECT_EQ(again.parameters(), model.parameters());
  }

  // With dropout: each micro-batch draws the masks of its rows of the
  // whole batch (DropoutMask.h: the sample's index in the step's batch).
  Model wholeDropout(imageManifest(true));
  Recorder wantDropout;
  train(wholeDropout, data, o, &wantDropout);
  for (int64_t accumulate : {2, 4, 6}) {
    Model model(imageManifest(true));
    TrainOptions p = o;
    p.accumulate = accumulate;
    Recorder got;
    train(model, data, p, &got);
    expectSameRun(wantDropout, wholeDropout, got, model, accumulate);
  }
  // The masks matter: the run differs from the one without dropout.
  EXPECT_NE(wantDropout.losses, want.losses);
  EXPECT_NE(wholeDropout.parameters(), whole.parameters());

  DataSet corpus = abcabCorpus();
  TrainOptions t;
  t.epochs = 1;
  t.batch = 8;
  Model gpt(textManifest());
  Recorder wantText;
  train(gpt, corpus, t, &wantText);
  Model gptParts(textManifest());
  t.accumulate = 4;
  Recorder gotText;
  train(gptParts, corpus, t, &gotText);
  expectSameRun(wantText, gpt, gotText, gptParts, 4);
}

TEST(TrainerTest, AccumulationIsRefusedWhereItCannotRun) {
  ImageFixture fx;
  Model model(imageManifest());
  DataSet data = loadModelData(model, fx.data);
  TrainOptions o;
  o.batch = 4;
  o.accumulate = 0;
  EXPECT_TRUE(failsWith([&] { train(model, data, o); }, "", {"accumulate must be >= 1, got 0"}));
  o.accumulate = 5;
  EXPECT_TRUE(failsWith([&] { train(model, data, o); }, "",
                        {"--accumulate 5 splits each batch of 4 into more micro-batches"}));
  o.accumulate = 2;
  QueueingBackend backend(model, 0);
  EXPECT_TRUE(failsWith([&] { train(model, data, o, nullptr, &backend); }, "",
                        {"--accumulate 2) is not available on the queueing backend"}));
}

// Augmentation (Augment.h) on the training batches: the package's policy
// unless the options give one; the same bits run after run and across a
// resume; another run than without it; refused for text.
TEST(TrainerTest, AugmentedRunsAreDeterministicAndResumeExactly) {
  ImageFixture fx;
  AugmentPolicy policy;
  policy.cropPadding = 2;
  policy.flipProbability = 0.5;
  policy.eraseProbability = 0.5;
  Manifest declared = imageManifest();
  declared.dataset = ManifestDataset{DatasetKind::Idx, fx.data, 0, policy};
  Model plainModel(imageManifest());
  DataSet data = loadModelData(plainModel, fx.data);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 6;
  o.seed = 3;
  o.evaluate = false;
  Recorder plain;
  train(plainModel, data, o, &plain);
  EXPECT_FALSE(plain.plan.augment.enabled());

  Model first(declared), second(imageManifest());
  Recorder a, b;
  train(first, data, o, &a); // the manifest's policy
  TrainOptions withOption = o;
  withOption.augment = policy; // the same policy given as an option
  train(second, data, withOption, &b);
  EXPECT_EQ(a.plan.augment.cropPadding, 2);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(first.parameters(), second.parameters());
  EXPECT_NE(a.losses, plain.losses);
  // An option turns the declared policy off.
  Model off(declared);
  Recorder c;
  TrainOptions none = o;
  none.augment = AugmentPolicy{};
  train(off, data, none, &c);
  EXPECT_EQ(c.losses, plain.losses);

  Manifest constant = declared; // checkResume's first part is a --steps run
  constant.optimizer.schedule = LrSchedule::Constant;
  checkResume(constant, data, 6, 2, 7);

  Model gpt(textManifest());
  DataSet corpus = abcabCorpus();
  TrainOptions t;
  t.batch = 8;
  t.augment = policy;
  EXPECT_TRUE(failsWith([&] { train(gpt, corpus, t); }, "",
                        {"augmentation (crop 2, flip 0.5, erase 0.5) applies to images"}));
  t.augment->cropPadding = -1;
  Model image(imageManifest());
  EXPECT_TRUE(failsWith([&] { train(image, data, t); }, "", {"crop padding must be in [0, 64]"}));
}

// optimizer ema = d: after each evaluation of the weights, one of their EMA
// (logged as eval_ema, reported to the observer, in the result); the EMA is
// checkpointed ("ema.*"), resumed exactly, and readable by loadParameters;
// another backend evaluates its own EMA (TrainBackend::evaluateEma).
TEST(TrainerTest, EmaWeightsAreEvaluatedCheckpointedAndResumed) {
  ImageFixture fx;
  Manifest m = imageManifest();
  m.optimizer.schedule = LrSchedule::Constant; // a --steps first part below
  m.optimizer.emaDecay = 0.8;
  Model model(m);
  DataSet data = loadModelData(model, fx.data);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 6;
  o.seed = 4;
  o.checkpointPath = fx.dir.file("whole.safetensors");
  o.logPath = fx.dir.file("whole.csv");
  Recorder rec;
  TrainResult r = train(model, data, o, &rec);
  ASSERT_EQ(rec.evals.size(), 4u); // raw, EMA, raw, EMA
  EXPECT_FALSE(rec.evals[0].ema);
  EXPECT_TRUE(rec.evals[1].ema);
  ASSERT_TRUE(r.lastEmaEval.has_value());
  EXPECT_TRUE(r.lastEmaEval->ema);
  EXPECT_NE(r.lastEmaEval->loss, r.lastEval->loss);
  const std::string log = readFile(o.logPath);
  EXPECT_NE(log.find("\neval_ema,5,1,"), std::string::npos) << log;
  EXPECT_NE(log.find("\neval_ema,10,2,"), std::string::npos) << log;

  // The checkpoint's EMA weights, evaluated, give the logged EMA loss.
  std::vector<float> ema = model.parameters();
  loadParameters(o.checkpointPath, m.model, optimizerSlots(model), ema, true);
  EXPECT_NE(ema, model.parameters());
  Model emaModel(m);
  emaModel.parameters() = ema;
  EXPECT_EQ(evaluate(emaModel, data, 6).loss, r.lastEmaEval->loss);

  // Stopped after step 3 and resumed: the same weights and the same EMA.
  Model parted(m);
  TrainOptions first = o;
  first.epochs = 0;
  first.steps = 3;
  first.checkpointPath = fx.dir.file("parted.safetensors");
  first.logPath.clear();
  first.evaluate = false;
  train(parted, data, first);
  Model resumed(m);
  TrainOptions second;
  second.epochs = 2;
  second.resumePath = second.checkpointPath = first.checkpointPath;
  train(resumed, data, second);
  EXPECT_EQ(resumed.parameters(), model.parameters());
  std::vector<float> resumedEma = resumed.parameters();
  loadParameters(second.checkpointPath, m.model, optimizerSlots(resumed), resumedEma, true);
  EXPECT_EQ(resumedEma, ema);

  // A checkpoint without an EMA has none to load.
  Model plain(imageManifest());
  TrainOptions p = o;
  p.checkpointPath = fx.dir.file("plain.safetensors");
  p.logPath.clear();
  train(plain, data, p);
  std::vector<float> none = plain.parameters();
  EXPECT_TRUE(failsWith(
      [&] { loadParameters(p.checkpointPath, "tiny_image", optimizerSlots(plain), none, true); },
      p.checkpointPath, {"holds no EMA of the weights"}));

  // Another backend keeps and evaluates the EMA itself (TrainBackend::
  // evaluateEma; the queueing one from its own optimizer, the GPU's on the
  // device): the same evaluations, weights and EMA as the CPU's.
  Model device(m);
  QueueingBackend backend(device, 1);
  Recorder deviceRec;
  TrainOptions d = o;
  d.checkpointPath = fx.dir.file("device.safetensors");
  d.logPath.clear();
  train(device, data, d, &deviceRec, &backend);
  ASSERT_EQ(deviceRec.evals.size(), rec.evals.size());
  for (size_t i = 0; i < rec.evals.size(); ++i) {
    EXPECT_EQ(deviceRec.evals[i].ema, rec.evals[i].ema) << i;
    EXPECT_EQ(deviceRec.evals[i].loss, rec.evals[i].loss) << i;
  }
  EXPECT_EQ(device.parameters(), model.parameters());
  std::vector<float> deviceEma = device.parameters();
  loadParameters(d.checkpointPath, m.model, optimizerSlots(device), deviceEma, true);
  EXPECT_EQ(deviceEma, ema);
}

} // namespace
} // namespace stringrt
