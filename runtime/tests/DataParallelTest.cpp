// The data-parallel trainer (stringrt/Distributed.h) on ranks that are
// threads of this process, talking through an in-process Communicator: N
// ranks take one process's --accumulate N steps bit for bit (losses, the
// parameters on every rank, the evaluations), with dropout, uneven shares and
// SGD or AdamW, the optimizer state replicated or sharded (ZeRO-1, and ZeRO-2
// with the gradients sharded too: also the checkpoints, resuming on other
// ranks and stages, the state and gradients each rank holds); a silent
// rank is named after the timeout. The MPI transport
// itself is tested under mpirun (tests/distributed/test_ranks.py).
#include "stringrt/Augment.h"
#include "stringrt/Distributed.h"

#include "ProgramBuilder.h"
#include "TestFiles.h"
#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

namespace stringrt {
namespace {

using test::f32;
using test::i32;
using test::ProgramBuilder;
using test::TempDir;
using test::writeFile;

// Messages between the threads of one run: a queue per (from, to).
class Mailboxes {
public:
  explicit Mailboxes(int ranks) : ranks_(ranks), queues_(size_t(ranks * ranks)) {}
  int ranks() const { return ranks_; }
  void put(int from, int to, std::vector<char> message) {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[size_t(from * ranks_ + to)].push_back(std::move(message));
    ready_.notify_all();
  }
  // The oldest message from `from` to `to`; nullopt after `timeout`.
  std::optional<std::vector<char>> take(int from, int to, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto &queue = queues_[size_t(from * ranks_ + to)];
    if (!ready_.wait_for(lock, timeout, [&] { return !queue.empty(); }))
      return std::nullopt;
    std::vector<char> message = std::move(queue.front());
    queue.pop_front();
    return message;
  }

private:
  int ranks_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<std::deque<std::vector<char>>> queues_;
};

class ThreadCommunicator : public Communicator {
public:
  ThreadCommunicator(Mailboxes &boxes, int rank, std::chrono::milliseconds timeout)
      : boxes_(boxes), rank_(rank), timeout_(timeout) {}
  int rank() const override { return rank_; }
  int size() const override { return boxes_.ranks(); }
  void exchange(const std::vector<Send> &send, const std::vector<Receive> &receive,
                const std::string &what) override {
    for (int k = 0; k < size(); ++k)
      if (k != rank_ && !send[size_t(k)].skip) {
        const char *data = static_cast<const char *>(send[size_t(k)].data);
        boxes_.put(rank_, k, std::vector<char>(data, data + send[size_t(k)].bytes));
      }
    for (int r = 0; r < size(); ++r) {
      if (r == rank_ || receive[size_t(r)].skip)
        continue;
      auto message = boxes_.take(r, rank_, timeout_);
      if (!message)
        throw Error("nothing from rank " + std::to_string(r) + " during " + what);
      if (message->size() != receive[size_t(r)].bytes)
        throw Error("a message of the wrong size during " + what);
      if (!message->empty())
        std::memcpy(receive[size_t(r)].data, message->data(), message->size());
    }
  }
  [[noreturn]] void abort(int) override { std::terminate(); }

private:
  Mailboxes &boxes_;
  int rank_;
  std::chrono::milliseconds timeout_;
};

// image [B, 1, 2, 2] -> patch_embed -> dropout (p 0.5, in the gradients
// program only, as pe-autodiff builds it) -> token 0 -> logits [B, 3].
// `frozenBias`: b is frozen (no gradient).
Manifest imageManifest(OptimizerKind optimizer, bool frozenBias = false) {
  Manifest m;
  m.model = "tiny_image_dp";
  m.inputs = {{"image", DType::F32, {-1, 1, 2, 2}}, {"label", DType::I32, {-1}}};
  ManifestParam w;
  w.name = "w";
  w.shape = {4, 3};
  w.init = ParamInit::Normal;
  w.std = 0.3;
  w.seed = 5;
  ManifestParam b;
  b.name = "b";
  b.shape = {3};
  b.init = ParamInit::Constant;
  b.value = 0.1;
  b.frozen = frozenBias;
  m.params = {w, b};
  m.optimizer.kind = optimizer;
  m.optimizer.lr = 0.05;
  m.optimizer.weightDecay = 0.01;
  m.optimizer.clipNorm = 1.0;
  m.optimizer.momentum = 0.9;
  m.optimizer.emaDecay = 0.8;
  for (bool grads : {false, true}) {
    ProgramBuilder g;
    ValueId image = g.input(f32({-1, 1, 2, 2}));
    ValueId label = g.input(i32({-1}));
    ValueId wv = g.param("w", {4, 3});
    ValueId bv = g.param("b", {3});
    ValueId x = g.op1("pe.patch_embed", {image, wv, bv}, f32({-1, 1, 3}),
                      {{"patch", int64_t(2)}});
    const std::map<std::string, AttrValue> dropped = {{"p", 0.5}, {"stream", int64_t(0)}};
    if (grads)
      x = g.op1("pe.dropout", {x}, f32({-1, 1, 3}), dropped);
    ValueId logits = g.op1("pe.select_token", {x}, f32({-1, 3}), {{"index", int64_t(0)}});
    ValueId loss = g.op1("pe.cross_entropy", {logits, label}, f32({}));
    g.output("loss", loss);
    if (!grads) {
      g.output("logits", logits);
      m.forward = g.program;
      continue;
    }
    ValueId one = g.op1("arith.constant", {}, f32({}), {{"value", 1.0}});
    ValueId dlogits = g.op1("pe.cross_entropy_grad", {logits, label, one}, f32({-1, 3}));
    ValueId dx = g.op1("pe.select_token_grad", {dlogits}, f32({-1, 1, 3}),
                       {{"index", int64_t(0)}});
    dx = g.op1("pe.dropout", {dx}, f32({-1, 1, 3}), dropped);
    auto dwb = g.op("pe.patch_embed_grad", {image, dx}, {f32({4, 3}), f32({3})},
                    {{"patch", int64_t(2)}});
    g.grad("w", dwb[0]);
    if (!frozenBias)
      g.grad("b", dwb[1]);
    m.gradients = g.program;
  }
  return m;
}

std::string bigEndian(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[size_t(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xFF);
  return s;
}

// 2x2 images of 3 classes: class c has pixel c bright.
void writeImages(const std::string &dir, const std::string &prefix, uint32_t count) {
  std::string images =
      std::string("\0\0\x08\x03", 4) + bigEndian(count) + bigEndian(2) + bigEndian(2);
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

// The tests' data: 30 training and 9 test images in dir/data; its path.
std::string writeImageData(const TempDir &dir) {
  const std::string data = dir.path().string() + "/data";
  std::filesystem::create_directory(data);
  writeImages(data, "train", 30);
  writeImages(data, "t10k", 9);
  return data;
}

struct Recorder : TrainObserver {
  std::vector<double> losses, lrs, norms, evals;
  void onStep(const TrainPlan &, const StepReport &r) override {
    losses.push_back(r.loss);
    lrs.push_back(r.lr);
    norms.push_back(r.gradNorm);
  }
  void onEval(const TrainPlan &, int64_t, const EvalResult &e) override {
    evals.push_back(e.loss);
  }
};

struct RankRun {
  Recorder record;
  std::vector<std::vector<float>> params; // per rank
  std::vector<OptimizerStateMemory> memory; // per rank
};

// `ranks` threads training as one data-parallel run (rank 0 observed).
RankRun onRanks(const Manifest &manifest, const std::string &data, const TrainOptions &options,
                int ranks, const DataParallelOptions &parallel = {}) {
  Mailboxes boxes(ranks);
  RankRun run;
  run.params.resize(size_t(ranks));
  run.memory.resize(size_t(ranks));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        Model model(manifest);
        DataSet set = loadModelData(model, data);
        ThreadCommunicator comm(boxes, r, std::chrono::seconds(30));
        auto backend = makeDataParallelBackend(model, comm, parallel);
        run.memory[size_t(r)] = backend->optimizerStateMemory();
        train(model, set, options, r == 0 ? &run.record : nullptr, backend.get());
        run.params[size_t(r)] = model.parameters();
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  return run;
}

RankRun oneProcess(const Manifest &manifest, const std::string &data, TrainOptions options,
               int64_t accumulate) {
  options.accumulate = accumulate;
  Model model(manifest);
  DataSet set = loadModelData(model, data);
  RankRun run;
  train(model, set, options, &run.record);
  run.params = {model.parameters()};
  return run;
}

TEST(DataParallelTest, RanksTakeTheAccumulatedStepsBitForBit) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 7; // 4 steps an epoch; 2 ranks: 4 + 3, 3 ranks: 3 + 2 + 2
  o.seed = 3;
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
    const Manifest manifest = imageManifest(kind);
    for (int ranks : {1, 2, 3, 7}) {
      SCOPED_TRACE(testing::Message() << ranks << " ranks, "
                                      << (kind == OptimizerKind::AdamW ? "adamw" : "sgd"));
      RankRun want = oneProcess(manifest, data, o, ranks);
      RankRun got = onRanks(manifest, data, o, ranks);
      EXPECT_EQ(got.record.losses, want.record.losses);
      EXPECT_EQ(got.record.lrs, want.record.lrs);
      EXPECT_EQ(got.record.norms, want.record.norms);
      EXPECT_EQ(got.record.evals, want.record.evals); // the EMA's too
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(got.params[size_t(r)], want.params[0]) << "rank " << r;
    }
    // And not by accident: the whole batch at once is other bits.
    EXPECT_NE(oneProcess(manifest, data, o, 1).record.losses,
              oneProcess(manifest, data, o, 2).record.losses);
  }
}

// The options of the ZeRO tests: 2 epochs of 4 steps, a checkpoint after
// each.
TrainOptions zeroOptions(const std::string &checkpoint) {
  TrainOptions o;
  o.epochs = 2;
  o.batch = 7;
  o.seed = 3;
  o.checkpointPath = checkpoint;
  return o;
}

// The optimizer's features a shard must reproduce: clipping that takes
// effect every step, the warmup-cosine schedule, a frozen parameter (b).
Manifest clippedFrozenManifest(OptimizerKind kind) {
  Manifest m = imageManifest(kind, true);
  m.optimizer.clipNorm = 0.01;
  m.optimizer.schedule = LrSchedule::WarmupCosine;
  m.optimizer.warmupSteps = 2;
  m.optimizer.minLr = 0.001;
  return m;
}

// ZeRO-1: each rank holds and updates its slice of the optimizer state;
// ZeRO-2: and keeps only its slice of the summed gradients (each step checks
// what it holds); still one process's --accumulate N bit for bit, and rank 0
// gathers the state into one process's checkpoint (the moments and the EMA:
// the bytes of the file).
TEST(DataParallelTest, ZeroOneAndTwoTakeTheAccumulatedStepsBitForBit) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  const std::string oneCkpt = dir.path().string() + "/one.ckpt";
  const std::string zeroCkpt = dir.path().string() + "/zero.ckpt";
  for (int stage : {1, 2}) {
    for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Sgd})
      for (bool features : {false, true}) {
        DataParallelOptions zero;
        zero.zeroStage = stage;
        const Manifest manifest = features ? clippedFrozenManifest(kind) : imageManifest(kind);
        for (int ranks : {1, 2, 3, 7}) {
          SCOPED_TRACE(testing::Message()
                       << "ZeRO-" << stage << ", " << ranks << " ranks, "
                       << (kind == OptimizerKind::AdamW ? "adamw" : "sgd")
                       << (features ? ", clipped, warmup-cosine, b frozen" : ""));
          RankRun want = oneProcess(manifest, data, zeroOptions(oneCkpt), ranks);
          RankRun got = onRanks(manifest, data, zeroOptions(zeroCkpt), ranks, zero);
          EXPECT_EQ(got.record.losses, want.record.losses);
          EXPECT_EQ(got.record.lrs, want.record.lrs);
          EXPECT_EQ(got.record.norms, want.record.norms);
          EXPECT_EQ(got.record.evals, want.record.evals); // the EMA's too
          for (int r = 0; r < ranks; ++r)
            EXPECT_EQ(got.params[size_t(r)], want.params[0]) << "rank " << r;
          EXPECT_EQ(test::readFile(zeroCkpt), test::readFile(oneCkpt));
          if (features) // the clipping took effect at every step
            for (double norm : got.record.norms)
              EXPECT_GT(norm, 0.01);
        }
      }
  }
}

// A ZeRO-1 or ZeRO-2 checkpoint is one process's: it resumes on another N,
// without ZeRO, with the other stage and as one process; a replicated one
// resumes with ZeRO.
TEST(DataParallelTest, ZeroOneAndTwoResumeWithAnyRanks) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  const std::string base = dir.path().string();
  const Manifest manifest = imageManifest(OptimizerKind::AdamW);
  DataParallelOptions zero, zero2, replicated;
  zero.zeroStage = 1;
  zero2.zeroStage = 2;
  TrainOptions first = zeroOptions(base + "/one.ckpt");
  first.stopAfter = 3;
  // One process: 3 steps with --accumulate 2, the rest with 3.
  oneProcess(manifest, data, first, 2);
  TrainOptions rest = zeroOptions(base + "/one.ckpt");
  rest.resumePath = base + "/one.ckpt";
  const RankRun want = oneProcess(manifest, data, rest, 3);
  struct Case {
    const char *name;
    DataParallelOptions before, after;
  };
  for (const Case &c : {Case{"zero then zero", zero, zero},
                        Case{"zero then replicated", zero, replicated},
                        Case{"replicated then zero", replicated, zero},
                        Case{"zero2 then zero2", zero2, zero2},
                        Case{"zero2 then replicated", zero2, replicated},
                        Case{"replicated then zero2", replicated, zero2},
                        Case{"zero then zero2", zero, zero2},
                        Case{"zero2 then zero", zero2, zero}}) {
    SCOPED_TRACE(c.name);
    const std::string ckpt = base + "/" + c.name + ".ckpt";
    TrainOptions o = zeroOptions(ckpt);
    o.stopAfter = 3;
    onRanks(manifest, data, o, 2, c.before);
    o = zeroOptions(ckpt);
    o.resumePath = ckpt;
    RankRun got = onRanks(manifest, data, o, 3, c.after);
    EXPECT_EQ(got.record.losses, want.record.losses);
    EXPECT_EQ(got.record.evals, want.record.evals);
    EXPECT_EQ(got.params[0], want.params[0]);
    EXPECT_EQ(test::readFile(ckpt), test::readFile(base + "/one.ckpt"));
  }
  // And one process resumes a ZeRO-1 or ZeRO-2 checkpoint: 2 ranks' 3
  // steps, then --accumulate 3.
  for (const DataParallelOptions &before : {zero, zero2}) {
    SCOPED_TRACE(testing::Message() << "ZeRO-" << before.zeroStage << " then one process");
    const std::string ckpt = base + "/zero then one.ckpt";
    TrainOptions o = zeroOptions(ckpt);
    o.stopAfter = 3;
    onRanks(manifest, data, o, 2, before);
    o = zeroOptions(ckpt);
    o.resumePath = ckpt;
    EXPECT_EQ(oneProcess(manifest, data, o, 3).record.losses, want.record.losses);
    EXPECT_EQ(test::readFile(ckpt), test::readFile(base + "/one.ckpt"));
  }
}

// What each rank holds of the optimizer state: its slice of every state
// buffer (15 parameters; AdamW m, v and the EMA: 3 floats each, 180 bytes;
// SGD u and the EMA: 120), or the whole with the state replicated; with
// ZeRO-2 also of the gradients after the sum (its slice: 60 bytes whole),
// which every step of the run checks it holds.
TEST(DataParallelTest, ZeroReportsWhatEachRankHolds) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  TrainOptions o;
  o.steps = 2;
  o.batch = 6;
  DataParallelOptions zero;
  zero.zeroStage = 1;
  // 2 ranks: elements [0, 7) and [7, 15); 3 ranks: 5 each.
  RankRun two = onRanks(imageManifest(OptimizerKind::AdamW), data, o, 2, zero);
  for (const OptimizerStateMemory &m : two.memory) {
    EXPECT_EQ(m.rankBytes, (std::vector<size_t>{84, 96}));
    EXPECT_EQ(m.wholeBytes, 180u);
    EXPECT_EQ(m.largestRankBytes(), 96u);
  }
  RankRun three = onRanks(imageManifest(OptimizerKind::Sgd), data, o, 3, zero);
  EXPECT_EQ(three.memory[1].rankBytes, (std::vector<size_t>{40, 40, 40}));
  EXPECT_EQ(three.memory[1].wholeBytes, 120u);
  for (const OptimizerStateMemory &m : two.memory) { // ZeRO-1: the gradients whole
    EXPECT_TRUE(m.gradientRankBytes.empty());
    EXPECT_EQ(m.gradientWholeBytes, 0u);
  }
  RankRun replicated = onRanks(imageManifest(OptimizerKind::AdamW), data, o, 2);
  EXPECT_EQ(replicated.memory[0].rankBytes, (std::vector<size_t>{180, 180}));
  EXPECT_TRUE(replicated.memory[0].gradientRankBytes.empty());

  DataParallelOptions zero2;
  zero2.zeroStage = 2;
  RankRun twoStage2 = onRanks(imageManifest(OptimizerKind::AdamW), data, o, 2, zero2);
  for (const OptimizerStateMemory &m : twoStage2.memory) {
    EXPECT_EQ(m.rankBytes, (std::vector<size_t>{84, 96}));
    EXPECT_EQ(m.gradientRankBytes, (std::vector<size_t>{28, 32}));
    EXPECT_EQ(m.gradientWholeBytes, 60u);
    EXPECT_EQ(m.largestGradientRankBytes(), 32u);
  }
  o.accumulate = 2; // (a micro-batch's gradient freed too)
  RankRun inParts = onRanks(imageManifest(OptimizerKind::Sgd), data, o, 3, zero2);
  EXPECT_EQ(inParts.memory[2].gradientRankBytes, (std::vector<size_t>{20, 20, 20}));

  Mailboxes boxes(2);
  Model model(imageManifest(OptimizerKind::Sgd));
  ThreadCommunicator comm(boxes, 0, std::chrono::seconds(1));
  DataParallelOptions zero3;
  zero3.zeroStage = 3;
  EXPECT_TRUE(test::failsWith([&] { makeDataParallelBackend(model, comm, zero3); }, "",
                              {"ZeRO stage 3: stages 1 (the optimizer state sharded) and 2 "
                               "(and the gradients) are built; stage 3 (the parameters) is "
                               "not"}));
}

// Each rank assembles and augments only its rows (TrainBackend::batchRows),
// with the draws those rows get in the whole batch.
TEST(DataParallelTest, RanksAugmentTheirRowsAsTheWholeBatchWould) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  TrainOptions o;
  o.epochs = 1;
  o.batch = 7;
  o.seed = 5;
  o.augment = parseAugmentPolicy("crop=1,flip=0.5");
  const Manifest manifest = imageManifest(OptimizerKind::AdamW);
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    RankRun want = oneProcess(manifest, data, o, ranks);
    RankRun got = onRanks(manifest, data, o, ranks);
    EXPECT_EQ(got.record.losses, want.record.losses);
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(got.params[size_t(r)], want.params[0]) << "rank " << r;
  }
  TrainOptions plain = o;
  plain.augment = parseAugmentPolicy("none");
  EXPECT_NE(oneProcess(manifest, data, plain, 2).record.losses,
            oneProcess(manifest, data, o, 2).record.losses);
}

TEST(DataParallelTest, ShareAndRefusals) {
  EXPECT_EQ(rankShare(7, 0, 3).begin, 0);
  EXPECT_EQ(rankShare(7, 0, 3).count, 3);
  EXPECT_EQ(rankShare(7, 1, 3).begin, 3);
  EXPECT_EQ(rankShare(7, 2, 3).begin, 5);
  EXPECT_EQ(rankShare(7, 2, 3).count, 2);
  // In micro-batches (ranks with --accumulate A): rank r takes
  // micro-batches [r A, (r + 1) A) of --accumulate R A's, and splitting its
  // share in A gives those micro-batches: 8 rows in 3 x 2 are 2 2 | 1 1 | 1 1.
  EXPECT_EQ(rankShare(8, 0, 3, 2).begin, 0);
  EXPECT_EQ(rankShare(8, 0, 3, 2).count, 4);
  EXPECT_EQ(rankShare(8, 1, 3, 2).begin, 4);
  EXPECT_EQ(rankShare(8, 1, 3, 2).count, 2);
  EXPECT_EQ(rankShare(8, 2, 3, 2).begin, 6);
  for (int64_t rows = 1; rows <= 40; ++rows)
    for (int ranks = 1; ranks <= 4; ++ranks)
      for (int64_t parts = 1; parts <= 4 && ranks * parts <= rows; ++parts) {
        const std::vector<int64_t> all = microBatchSizes(rows, ranks * parts);
        int64_t begin = 0;
        for (int r = 0; r < ranks; ++r) {
          const RankShare share = rankShare(rows, r, ranks, parts);
          EXPECT_EQ(share.begin, begin) << rows << " " << ranks << " " << parts;
          const std::vector<int64_t> mine(all.begin() + r * parts,
                                          all.begin() + (r + 1) * parts);
          EXPECT_EQ(microBatchSizes(share.count, parts), mine)
              << rows << " rows, rank " << r << " of " << ranks << " x " << parts;
          begin += share.count;
        }
        EXPECT_EQ(begin, rows);
      }
  EXPECT_TRUE(test::failsWith([] { rankShare(5, 0, 3, 2); }, "",
                              {"a batch of 5 examples cannot be shared by 3 ranks in 2 "
                               "micro-batches each (--accumulate 2): give --batch >= 6"}));
  {
    // The backend reads its share of each batch.
    Mailboxes boxes(3);
    Model model(imageManifest(OptimizerKind::Sgd));
    ThreadCommunicator comm(boxes, 1, std::chrono::seconds(1));
    auto backend = makeDataParallelBackend(model, comm);
    EXPECT_EQ(backend->batchRows(7).begin, 3);
    EXPECT_EQ(backend->batchRows(7).count, 2);
  }

  TempDir dir;
  const std::string data = writeImageData(dir);
  TrainOptions o;
  o.steps = 1;
  o.batch = 2;
  EXPECT_TRUE(test::failsWith([&] { onRanks(imageManifest(OptimizerKind::Sgd), data, o, 3); },
                              "", {"a batch of 2 examples cannot be shared by 3 ranks"}));
  o.batch = 3;
  o.accumulate = 2;
  EXPECT_TRUE(test::failsWith([&] { onRanks(imageManifest(OptimizerKind::Sgd), data, o, 2); },
                              "", {"a batch of 3 examples cannot be shared by 2 ranks in 2 "
                                   "micro-batches each (--accumulate 2): give --batch >= 4"}));
}

// The largest difference between a and b relative to max(1, |a|).
double relativeDifference(const std::vector<double> &a, const std::vector<double> &b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(a[i])));
  return worst;
}

double relativeDifference(const std::vector<float> &a, const std::vector<float> &b) {
  return relativeDifference(std::vector<double>(a.begin(), a.end()),
                            std::vector<double>(b.begin(), b.end()));
}

// R ranks with --accumulate A: each rank's share in A micro-batches, then
// the shares' sum as without: one process's --accumulate R A within float
// rounding (the A pieces are summed on the rank, then weighted by the
// share's size; one process weights each piece by its size and sums all R A
// in order), replicated or sharded (ZeRO-1, ZeRO-2), every rank with the same
// parameters, and a second run the first bit for bit.
TEST(DataParallelTest, RanksInMicroBatchesTakeTheAccumulatedStepsWithinRounding) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 7; // 2 ranks x 2: 2 2 | 2 1; 2 x 3: 2 1 1 | 1 1 1; 3 x 2: 2 1 | 1 1 | 1 1
  o.seed = 3;
  constexpr double kTolerance = 1e-5;
  const Manifest manifest = imageManifest(OptimizerKind::AdamW);
  for (auto [ranks, parts] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{3, 2}})
    for (int zero : {0, 1, 2}) {
      SCOPED_TRACE(testing::Message() << ranks << " ranks x " << parts << ", zero " << zero);
      TrainOptions mine = o;
      mine.accumulate = parts;
      DataParallelOptions parallel;
      parallel.zeroStage = zero;
      RankRun want = oneProcess(manifest, data, o, ranks * parts);
      RankRun got = onRanks(manifest, data, mine, ranks, parallel);
      EXPECT_EQ(got.record.lrs, want.record.lrs);
      EXPECT_LE(relativeDifference(got.record.losses, want.record.losses), kTolerance);
      EXPECT_LE(relativeDifference(got.record.norms, want.record.norms), kTolerance);
      EXPECT_LE(relativeDifference(got.record.evals, want.record.evals), kTolerance);
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(got.params[size_t(r)], got.params[0]) << "rank " << r;
      EXPECT_LE(relativeDifference(got.params[0], want.params[0]), kTolerance);
      RankRun again = onRanks(manifest, data, mine, ranks, parallel);
      EXPECT_EQ(again.record.losses, got.record.losses);
      EXPECT_EQ(again.params[0], got.params[0]);
    }
}

// A rank that never sends: the other names it when the wait times out.
TEST(DataParallelTest, SilentRankIsNamed) {
  TempDir dir;
  const std::string data = writeImageData(dir);
  Mailboxes boxes(2);
  Model model(imageManifest(OptimizerKind::Sgd));
  DataSet set = loadModelData(model, data);
  ThreadCommunicator comm(boxes, 0, std::chrono::milliseconds(50));
  auto backend = makeDataParallelBackend(model, comm);
  TrainOptions o;
  o.steps = 1;
  o.batch = 6;
  EXPECT_TRUE(test::failsWith([&] { train(model, set, o, nullptr, backend.get()); }, "",
                              {"nothing from rank 1 during the gradients of step 1"}));
}

} // namespace
} // namespace stringrt
