// Checkpoints: round trips of parameters, optimizer state and metadata,
// atomic replacement, and rejection of checkpoints that do not fit the model
// without touching the live buffers.
#include "stringrt/Checkpoint.h"

#include "TestFiles.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace stringrt {
namespace {

using test::failsWith;
using test::readFile;
using test::TempDir;

// "w" [2, 2] trainable, "frozen" [3] frozen, "b" [2] trainable.
std::vector<OptimizerSlot> slots() {
  return {{"w", {2, 2}, 0, 4, false},
          {"frozen", {3}, 4, 3, true},
          {"b", {2}, 7, 2, false}};
}
constexpr size_t kTotal = 9;

ManifestOptimizer config(OptimizerKind kind) {
  ManifestOptimizer c;
  c.kind = kind;
  c.lr = 0.01;
  c.momentum = kind == OptimizerKind::Sgd ? 0.9 : 0.0;
  return c;
}

// A model state after two optimizer steps.
struct Trained {
  std::vector<float> params;
  Optimizer optimizer;
  explicit Trained(OptimizerKind kind)
      : params(kTotal), optimizer(config(kind), slots(), kTotal) {
    for (size_t i = 0; i < kTotal; ++i)
      params[i] = 0.5f * static_cast<float>(i) - 1.0f;
    std::vector<float> grads(kTotal);
    for (int t = 0; t < 2; ++t) {
      for (size_t i = 0; i < kTotal; ++i)
        grads[i] = static_cast<float>(i % 3) - 0.7f * static_cast<float>(t);
      optimizer.step(params, grads, 10);
    }
  }
};

CheckpointInfo info() {
  CheckpointInfo i;
  i.model = "tiny";
  i.step = 2;
  i.epoch = 1;
  i.dataSeed = 0xFEDCBA9876543210ull; // Above INT64_MAX.
  i.batch = 4;
  i.totalSteps = 10;
  return i;
}

std::vector<std::vector<float>> stateOf(const Optimizer &opt) {
  std::vector<std::vector<float>> s;
  for (const auto &b : opt.stateBuffers())
    s.push_back(*b.values);
  return s;
}

class CheckpointRoundTrip : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(CheckpointRoundTrip, RestoresParametersStateAndMetadata) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(GetParam());
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);

  std::vector<float> params(kTotal, 0.0f);
  Optimizer fresh(config(GetParam()), slots(), kTotal);
  CheckpointInfo loaded = loadCheckpoint(path, "tiny", slots(), params, fresh);
  EXPECT_EQ(params, trained.params);
  EXPECT_EQ(stateOf(fresh), stateOf(trained.optimizer));
  EXPECT_EQ(fresh.stepCount(), 2);
  EXPECT_EQ(loaded.model, "tiny");
  EXPECT_EQ(loaded.step, 2);
  EXPECT_EQ(loaded.epoch, 1);
  EXPECT_EQ(loaded.dataSeed, 0xFEDCBA9876543210ull);
  EXPECT_EQ(loaded.batch, 4);
  EXPECT_EQ(loaded.totalSteps, 10);

  // Continuing from the loaded state is identical to continuing the original.
  std::vector<float> grads(kTotal, 0.25f);
  trained.optimizer.step(trained.params, grads, 10);
  fresh.step(params, grads, 10);
  EXPECT_EQ(params, trained.params);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CheckpointRoundTrip,
                         ::testing::Values(OptimizerKind::AdamW,
                                           OptimizerKind::Sgd));

TEST(CheckpointTest, FileLayout) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::AdamW);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);
  SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<std::string> names;
  for (const TensorInfo &t : file.tensors())
    names.push_back(t.name);
  std::sort(names.begin(), names.end());
  // No optimizer state for the frozen parameter.
  EXPECT_EQ(names, (std::vector<std::string>{"adam.m.b", "adam.m.w", "adam.v.b",
                                             "adam.v.w", "b", "frozen", "w"}));
  EXPECT_EQ(file.find("w")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(file.readF32("frozen"),
            (std::vector<float>(trained.params.begin() + 4,
                                trained.params.begin() + 7)));
  const auto &meta = file.metadata();
  EXPECT_EQ(meta.at("format"), "stringc-checkpoint");
  EXPECT_EQ(meta.at("version"), "2");
  EXPECT_EQ(meta.at("tensor_crc32").size(), 8u);
  EXPECT_EQ(meta.at("model"), "tiny");
  EXPECT_EQ(meta.at("step"), "2");
  EXPECT_EQ(meta.at("epoch"), "1");
  EXPECT_EQ(meta.at("data_seed"), "18364758544493064720");
  EXPECT_EQ(meta.at("optimizer"), "adamw");
  EXPECT_EQ(readCheckpointInfo(path).totalSteps, 10);
}

TEST(CheckpointTest, FailedSaveKeepsThePreviousFile) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::AdamW);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);
  std::string before = readFile(path);
  // Two slots of the same name cannot be written.
  std::vector<OptimizerSlot> dup = {{"w", {2}, 0, 2, false},
                                    {"w", {2}, 2, 2, false}};
  Optimizer opt(config(OptimizerKind::AdamW), dup, 4);
  std::vector<float> params(4, 1.0f);
  EXPECT_THROW(saveCheckpoint(path, info(), dup, params, opt), Error);
  EXPECT_EQ(readFile(path), before);
  // No temporary file is left behind.
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"ckpt.safetensors"}));
  // A directory that does not exist.
  EXPECT_THROW(saveCheckpoint(dir.file("missing/ckpt.safetensors"), info(),
                              slots(), trained.params, trained.optimizer),
               Error);
}

// Loading `path` must fail with `fragments` and leave the live state alone.
void expectRejected(const std::string &path, const std::string &model,
                    const std::vector<OptimizerSlot> &s, size_t total,
                    OptimizerKind kind,
                    const std::vector<std::string> &fragments) {
  std::vector<float> params(total, 3.0f);
  Optimizer opt(config(kind), s, total);
  std::vector<float> grads(total, 1.0f);
  opt.step(params, grads, 10);
  std::vector<float> paramsBefore = params;
  auto stateBefore = stateOf(opt);
  EXPECT_TRUE(failsWith(
      [&] { loadCheckpoint(path, model, s, params, opt); }, path, fragments));
  EXPECT_EQ(params, paramsBefore);
  EXPECT_EQ(stateOf(opt), stateBefore);
  EXPECT_EQ(opt.stepCount(), 1);
}

TEST(CheckpointTest, RejectsMismatchesWithoutTouchingLiveState) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::AdamW);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);

  // Another model's checkpoint.
  expectRejected(path, "other", slots(), kTotal, OptimizerKind::AdamW,
                 {"checkpoint is of model 'tiny', not 'other'"});
  // A parameter whose shape differs.
  auto reshaped = slots();
  reshaped[0].shape = {4};
  expectRejected(path, "tiny", reshaped, kTotal, OptimizerKind::AdamW,
                 {"tensor 'w' has shape [2, 2], expected [4]"});
  // A parameter the checkpoint lacks (the last one, so earlier slots were
  // already read when the problem shows).
  auto extra = slots();
  extra.push_back({"c", {1}, 9, 1, false});
  expectRejected(path, "tiny", extra, kTotal + 1, OptimizerKind::AdamW,
                 {"tensor 'c' is missing"});
  // A tensor the model does not have.
  auto fewer = slots();
  fewer.pop_back();
  expectRejected(path, "tiny", fewer, 7, OptimizerKind::AdamW,
                 {"tensor 'adam.m.b' is not a parameter or optimizer state"});
  // Another optimizer.
  expectRejected(path, "tiny", slots(), kTotal, OptimizerKind::Sgd,
                 {"checkpoint holds adamw optimizer state but the model "
                  "trains with sgd"});
  // A parameter trainable now but frozen when saved has no state.
  auto thawed = slots();
  thawed[1].frozen = false;
  expectRejected(path, "tiny", thawed, kTotal, OptimizerKind::AdamW,
                 {"tensor 'adam.m.frozen' is missing"});
  // A ZeRO-1 shard of the state is neither written nor loaded into.
  Optimizer shard = trained.optimizer.shard(2, 7);
  std::vector<float> params = trained.params;
  EXPECT_TRUE(failsWith([&] { saveCheckpoint(dir.file("shard"), info(), slots(), params, shard); },
                        dir.file("shard"),
                        {"holds the state of elements [2, 7) of 9 only (a ZeRO-1 shard)"}));
  EXPECT_TRUE(failsWith([&] { loadCheckpoint(path, "tiny", slots(), params, shard); }, path,
                        {"holds the state of elements [2, 7) of 9 only"}));
  EXPECT_EQ(params, trained.params);
}

TEST(CheckpointTest, RejectsOtherFilesAndVersions) {
  TempDir dir;
  std::string plain = dir.file("plain.safetensors");
  std::vector<float> w(4, 1.0f);
  writeSafetensors(plain, {{"w", DType::F32, {2, 2}, w.data()}});
  expectRejected(plain, "tiny", slots(), kTotal, OptimizerKind::AdamW,
                 {"not a stringc checkpoint"});

  std::string future = dir.file("future.safetensors");
  writeSafetensors(future, {{"w", DType::F32, {2, 2}, w.data()}},
                   {{"format", "stringc-checkpoint"}, {"version", "3"}});
  expectRejected(future, "tiny", slots(), kTotal, OptimizerKind::AdamW,
                 {"checkpoint format version 3 is not supported (this runtime reads "
                  "versions 1 to 2)"});

  std::string bad = dir.file("bad.safetensors");
  writeSafetensors(bad, {{"w", DType::F32, {2, 2}, w.data()}},
                   {{"format", "stringc-checkpoint"},
                    {"version", "1"},
                    {"model", "tiny"},
                    {"step", "two"}});
  expectRejected(bad, "tiny", slots(), kTotal, OptimizerKind::AdamW,
                 {"checkpoint metadata 'step' is not an integer"});

  // An F64 tensor where an F32 parameter belongs.
  std::string f64 = dir.file("f64.safetensors");
  std::vector<double> wd(4, 1.0);
  writeSafetensors(f64, {{"w", DType::F64, {2, 2}, wd.data()}});
  std::vector<OptimizerSlot> one = {{"w", {2, 2}, 0, 4, false}};
  std::vector<float> params(4, 0.0f);
  EXPECT_TRUE(failsWith([&] { loadParameters(f64, "tiny", one, params); }, f64,
                        {"tensor 'w' is F64, expected F32"}));
  EXPECT_EQ(params, std::vector<float>(4, 0.0f));
}

// `path`'s checkpoint rewritten with its metadata changed by `edit` (a key
// with an empty value is removed) and, when `flip` is set, one bit of a
// tensor flipped; the tensors as they were.
std::string rewritten(const TempDir &dir, const std::string &path, const std::string &name,
                      const std::map<std::string, std::string> &edit, bool flip = false) {
  SafetensorsFile file = SafetensorsFile::open(path);
  std::map<std::string, std::string> meta = file.metadata();
  for (const auto &[key, value] : edit)
    if (value.empty())
      meta.erase(key);
    else
      meta[key] = value;
  std::vector<std::vector<float>> data;
  for (const TensorInfo &t : file.tensors())
    data.push_back(file.readF32(t.name));
  if (flip)
    data.back()[0] = -data.back()[0]; // the sign bit
  std::vector<TensorView> views;
  for (size_t i = 0; i < data.size(); ++i)
    views.push_back({file.tensors()[i].name, DType::F32, file.tensors()[i].shape,
                     data[i].data()});
  std::string out = dir.file(name);
  writeSafetensors(out, views, meta);
  return out;
}

TEST(CheckpointTest, FlippedBitsAreRefused) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::AdamW);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);
  std::string flipped = rewritten(dir, path, "flipped.safetensors", {}, /*flip=*/true);
  expectRejected(flipped, "tiny", slots(), kTotal, OptimizerKind::AdamW,
                 {"checkpoint data is corrupt: its tensors' CRC-32 is",
                  "(a damaged or edited checkpoint)"});
  std::vector<float> params(kTotal, 0.0f);
  EXPECT_TRUE(failsWith([&] { loadParameters(flipped, "tiny", slots(), params); }, flipped,
                        {"checkpoint data is corrupt"}));
  EXPECT_EQ(params, std::vector<float>(kTotal, 0.0f));
  // A version 2 checkpoint must have its checksum.
  expectRejected(rewritten(dir, path, "unsummed.safetensors", {{"tensor_crc32", ""}}), "tiny",
                 slots(), kTotal, OptimizerKind::AdamW,
                 {"checkpoint metadata lacks 'tensor_crc32'"});
}

TEST(CheckpointTest, Version1CheckpointsStillLoad) {
  // What this runtime wrote before checksums: version 1, no tensor_crc32.
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::Sgd);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);
  std::string old = rewritten(dir, path, "v1.safetensors", {{"version", "1"}, {"tensor_crc32", ""}});
  ASSERT_EQ(SafetensorsFile::open(old).metadata().count("tensor_crc32"), 0u);
  std::vector<float> params(kTotal, 0.0f);
  Optimizer opt(config(OptimizerKind::Sgd), slots(), kTotal);
  CheckpointInfo loaded = loadCheckpoint(old, "tiny", slots(), params, opt);
  EXPECT_EQ(loaded.step, 2);
  EXPECT_EQ(params, trained.params);
  EXPECT_EQ(stateOf(opt), stateOf(trained.optimizer));
}

TEST(CheckpointTest, InconsistentMetadataIsRefused) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::AdamW);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer); // step 2, epoch 1
  const std::pair<std::map<std::string, std::string>, std::string> cases[] = {
      {{{"total_steps", "0"}}, "step 2 of a run of total_steps 0"},
      {{{"step", "11"}}, "step 11 of a run of total_steps 10"},
      {{{"batch", "0"}}, "step 2 with batch 0"},
      {{{"epoch", "3"}}, "epoch 3 after step 2 (an epoch takes at least one step)"},
      {{{"step", "0"}}, "epoch 1 after step 0"},
      {{{"epoch", "-1"}}, "negative step, epoch, batch or total_steps"},
      {{{"total_steps", "-5"}}, "negative step, epoch, batch or total_steps"},
  };
  int n = 0;
  for (const auto &[edit, message] : cases) {
    std::string bad = rewritten(dir, path, "bad" + std::to_string(n++) + ".safetensors", edit);
    EXPECT_TRUE(failsWith([&] { readCheckpointInfo(bad); }, bad, {message}));
    expectRejected(bad, "tiny", slots(), kTotal, OptimizerKind::AdamW, {message});
  }
  // Nor is such a checkpoint written.
  CheckpointInfo beyond = info();
  beyond.step = 11;
  EXPECT_TRUE(failsWith(
      [&] { saveCheckpoint(dir.file("x.ckpt"), beyond, slots(), trained.params, trained.optimizer); },
      dir.file("x.ckpt"), {"step 11 of a run of total_steps 10"}));
}

TEST(CheckpointTest, LoadParametersFromCheckpointsAndWeightFiles) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Trained trained(OptimizerKind::Sgd);
  saveCheckpoint(path, info(), slots(), trained.params, trained.optimizer);
  std::vector<float> params(kTotal, 0.0f);
  loadParameters(path, "tiny", slots(), params);
  EXPECT_EQ(params, trained.params);
  EXPECT_TRUE(failsWith([&] { loadParameters(path, "other", slots(), params); },
                        path, {"checkpoint is of model 'tiny', not 'other'"}));

  // Any safetensors file with the parameters by name; other tensors ignored.
  std::string weights = dir.file("weights.safetensors");
  std::vector<float> w = {1, 2, 3, 4}, f = {5, 6, 7}, b = {8, 9}, x = {0};
  writeSafetensors(weights, {{"w", DType::F32, {2, 2}, w.data()},
                             {"frozen", DType::F32, {3}, f.data()},
                             {"b", DType::F32, {2}, b.data()},
                             {"unrelated", DType::F32, {1}, x.data()}},
                   {{"format", "pt"}});
  loadParameters(weights, "tiny", slots(), params);
  EXPECT_EQ(params, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

} // namespace
} // namespace stringrt
