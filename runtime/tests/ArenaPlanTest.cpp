// The arena plan at run time (docs/package.md, "The arena plan"): the loader's
// structural checks, the executor's liveness check (a corrupt plan is refused,
// naming the program and the values), and runs in the arena giving the same
// bits as runs on the buffer pool.
#include "stringrt/Model.h"

#include "execution/ArenaPlan.h"
#include "ProgramBuilder.h"
#include "TestFiles.h"
#include "TestPackages.h"
#include "stringrt/Error.h"
#include "stringrt/Package.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace stringrt {
namespace {

using ref::Tensor;
using test::f32;
using test::failsWith;
using test::i32;
using test::ProgramBuilder;

constexpr const char *kPath = "arena.pkg";
constexpr int64_t kIn = 4, kClasses = 3;

ManifestInput input(const std::string &name, DType dtype, std::vector<int64_t> shape) {
  ManifestInput in;
  in.name = name;
  in.dtype = dtype;
  in.shape = std::move(shape);
  return in;
}

ManifestParam normal(const std::string &name, std::vector<int64_t> shape, uint64_t seed) {
  ManifestParam p;
  p.name = name;
  p.shape = std::move(shape);
  p.init = ParamInit::Normal;
  p.std = 0.5;
  p.seed = seed;
  return p;
}

// A linear classifier whose gradients program has the values
// 0 x, 1 label, 2 w, 3 b (views), 4 logits [2,5], 5 loss [3,8] (output),
// 6 one [4,5], 7 dlogits [5,7], 8 dw [6,8] (output), 9 db [7,8] (output)
// (liveness intervals in op indices; outputs live to op 8, the end).
Manifest linearManifest() {
  Manifest m;
  m.model = "linear";
  m.inputs = {input("x", DType::F32, {-1, kIn}), input("label", DType::I32, {-1})};
  m.params = {normal("w", {kIn, kClasses}, 11), normal("b", {kClasses}, 12)};
  for (bool gradients : {false, true}) {
    ProgramBuilder g;
    ValueId x = g.input(f32({-1, kIn}));
    ValueId label = g.input(i32({-1}));
    ValueId wv = g.param("w", {kIn, kClasses});
    ValueId bv = g.param("b", {kClasses});
    ValueId logits = g.op1("pe.linear", {x, wv, bv}, f32({-1, kClasses}));
    ValueId loss = g.op1("pe.cross_entropy", {logits, label}, f32({}));
    g.output("loss", loss);
    if (!gradients) {
      g.output("logits", logits);
      m.forward = g.program;
      continue;
    }
    ValueId one = g.constant(1.0);
    ValueId dlogits = g.op1("pe.cross_entropy_grad", {logits, label, one}, f32({-1, kClasses}));
    g.grad("w", g.op1("pe.linear_grad_weight", {x, dlogits}, f32({kIn, kClasses})));
    g.grad("b", g.op1("pe.sum_to", {dlogits}, f32({kClasses})));
    m.gradients = g.program;
  }
  return m;
}

ProgramArena arena(std::vector<std::pair<int64_t, int64_t>> slots,
                   std::vector<int64_t> valueSlot, int64_t arenaBytes, int64_t noReuseBytes) {
  ProgramArena a;
  a.slots = std::move(slots);
  a.valueSlot = std::move(valueSlot);
  a.reportBatch = 128;
  a.arenaBytes = arenaBytes;
  a.noReuseBytes = noReuseBytes;
  return a;
}

// A valid plan for each program, in bytes: forward 4 -> 0, 5 -> 1; gradients
// as the greedy planner would place them (8 reuses 4's slot, 9 reuses 6's).
// arena_bytes: each slot at batch 128 rounded up to 16 bytes (the 4-byte
// slots take 16).
Manifest plannedManifest() {
  Manifest m = linearManifest();
  m.forward.arena = arena({{12, 0}, {0, 4}}, {-1, -1, -1, -1, 0, 1}, 1536 + 16, 385 * 4);
  m.gradients.arena = arena({{12, 48}, {0, 4}, {0, 12}, {12, 0}},
                            {-1, -1, -1, -1, 0, 1, 2, 3, 0, 2}, 1584 + 16 + 16 + 1536,
                            (384 + 1 + 1 + 384 + 12 + 3) * 4);
  return m;
}

// The gradients plan of a package that stores logits (4) and dlogits (7) in
// bf16 (ProgramArena::elementBytes, 2 bytes an element): their slots half
// the f32 ones, the figures those of the stored bytes.
Manifest bf16PlannedManifest() {
  Manifest m = plannedManifest();
  m.gradients.arena = arena({{6, 48}, {0, 4}, {0, 12}, {6, 0}},
                            {-1, -1, -1, -1, 0, 1, 2, 3, 0, 2}, 816 + 16 + 16 + 768,
                            768 + 4 + 4 + 768 + 48 + 12);
  m.gradients.arena->elementBytes = {4, 4, 4, 4, 2, 4, 4, 2, 4, 4};
  return m;
}

std::map<std::string, HostTensor> batchInputs(int64_t batch, Tensor<float> &x,
                                              Tensor<int32_t> &label) {
  std::mt19937 gen(static_cast<uint32_t>(batch));
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  x = Tensor<float>::zeros({batch, kIn});
  for (float &v : x.values)
    v = value(gen);
  label = Tensor<int32_t>::zeros({batch});
  for (int64_t i = 0; i < batch; ++i)
    label.values[static_cast<size_t>(i)] = static_cast<int32_t>(i % kClasses);
  return {{"x", HostTensor::of(x)}, {"label", HostTensor::of(label)}};
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The gradients program of `planned` and `pooled` on `inputs`: the same loss
// and gradients, bit for bit.
void expectSameGradients(Model &planned, Model &pooled,
                         const std::map<std::string, HostTensor> &inputs, int64_t batch) {
  float lossA = 0, lossB = 0;
  std::vector<float> gradsA, gradsB;
  planned.gradients(inputs, lossA, gradsA);
  pooled.gradients(inputs, lossB, gradsB);
  EXPECT_EQ(std::memcmp(&lossA, &lossB, sizeof(float)), 0) << "batch " << batch;
  EXPECT_TRUE(sameBits(gradsA, gradsB)) << "batch " << batch;
}

TEST(ArenaPlan, RunsGiveTheBitsOfThePool) {
  for (KernelSet kernels : {KernelSet::Reference, KernelSet::Fast}) {
    Model planned(plannedManifest(), kPath, kernels);
    Model pooled(plannedManifest(), kPath, kernels);
    EXPECT_TRUE(planned.arenaPlan());
    pooled.setArenaPlan(false);
    EXPECT_FALSE(pooled.arenaPlan());
    planned.initParameters();
    pooled.initParameters();
    for (int64_t batch : {5, 1, 5, 9}) { // a batch size again: its arena is reused
      Tensor<float> x;
      Tensor<int32_t> label;
      auto inputs = batchInputs(batch, x, label);
      expectSameGradients(planned, pooled, inputs, batch);
      auto outA = planned.run("forward", inputs);
      auto outB = pooled.run("forward", inputs);
      EXPECT_TRUE(sameBits(outA.at("logits").values, outB.at("logits").values));
      EXPECT_TRUE(sameBits(outA.at("loss").values, outB.at("loss").values));
    }
  }
}

// The CPU stores every value in f32: a plan that stores some in bf16 runs in
// slots widened to their members' f32 bytes, with the pool's bits; without
// the element sizes the same plan is refused (its slots are too small).
TEST(ArenaPlan, APlanOfBf16ValuesRunsInWidenedSlots) {
  Model planned(bf16PlannedManifest(), kPath);
  Model pooled(bf16PlannedManifest(), kPath);
  EXPECT_TRUE(planned.arenaPlan());
  pooled.setArenaPlan(false);
  planned.initParameters();
  pooled.initParameters();
  EXPECT_EQ(detail::f32ArenaSlots(planned.manifest().gradients),
            (std::vector<std::pair<int64_t, int64_t>>{{12, 48}, {0, 4}, {0, 12}, {12, 0}}));
  for (int64_t batch : {5, 9}) {
    Tensor<float> x;
    Tensor<int32_t> label;
    expectSameGradients(planned, pooled, batchInputs(batch, x, label), batch);
  }
  EXPECT_EQ(planned.programBytes("gradients", 128), 1584 + 16 + 16 + 1536); // f32, 16-byte slots
  Manifest unsized = bf16PlannedManifest();
  unsized.gradients.arena->elementBytes.clear();
  EXPECT_TRUE(failsWith([&] { Model model(unsized, kPath); }, kPath,
                        {"slot 0 ([6, 48] bytes) is too small for value 4 ([12, 0] bytes)"}));
  Manifest odd = bf16PlannedManifest();
  odd.gradients.arena->elementBytes[4] = 3;
  EXPECT_TRUE(failsWith([&] { Model model(odd, kPath); }, kPath,
                        {"value 4 is stored at 3 bytes an element (2 or 4)"}));
  Manifest short_ = bf16PlannedManifest();
  short_.gradients.arena->elementBytes.pop_back();
  EXPECT_TRUE(failsWith([&] { Model model(short_, kPath); }, kPath,
                        {"element sizes of 9 values, the program has 10"}));
}

TEST(ArenaPlan, WithoutAPlanThePoolIsUsed) {
  Model model(linearManifest(), kPath);
  EXPECT_FALSE(model.arenaPlan());
  EXPECT_TRUE(failsWith([&] { model.setArenaPlan(true); }, kPath, {"has no arena plan"}));
}

TEST(ArenaPlan, CorruptPlansAreRefused) {
  {
    Manifest m = plannedManifest(); // dlogits (7) into logits' slot: both live at op 5
    m.gradients.arena->valueSlot[7] = 0;
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"program 'gradients': arena plan: values 4 (live at ops 2 to 5) and 7 "
                           "(live at ops 5 to 7) overlap but share slot 0"}));
  }
  {
    Manifest m = plannedManifest(); // an output reused before the end
    m.forward.arena = arena({{12, 4}}, {-1, -1, -1, -1, 0, 0}, 1552, 385 * 4);
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"program 'forward'", "values 4", "and 5", "overlap but share slot 0"}));
  }
  {
    Manifest m = plannedManifest();
    m.gradients.arena->valueSlot[9] = -1;
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"program 'gradients': arena plan: value 9 has no slot"}));
  }
  {
    Manifest m = plannedManifest();
    m.gradients.arena->valueSlot[2] = 1; // a parameter view
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"value 2 is not an intermediate", "slot 1"}));
  }
  {
    Manifest m = plannedManifest(); // dw [4, 3] in a slot of 12 fixed bytes
    m.gradients.arena->valueSlot[8] = 2;
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"slot 2 ([0, 12] bytes) is too small for value 8 ([0, 48] bytes)"}));
  }
  {
    Manifest m = plannedManifest();
    m.forward.arena->arenaBytes -= 12; // the packed figure: the slots are 16-byte rounded
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"program 'forward'", "the report says 1540 arena", "the plan gives 1552"}));
  }
}

// The JSON form: a program of TestPackages' linear classifier with an arena.
std::string manifestJson(const std::string &forwardArena) {
  std::string forward = test::linearForwardProgram(2, 2);
  forward.insert(forward.rfind('}'), ", \"arena\": " + forwardArena);
  return R"({
  "model": "json_linear",
  "inputs": [{"name": "x", "dtype": "f32", "shape": [-1, 2]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [{"name": "w", "shape": [2, 2], "frozen": false, "init": "constant", "value": 0.5},
             {"name": "b", "shape": [2], "frozen": true, "init": "zeros"}],
  "optimizer": {"kind": "sgd", "lr": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                "weight_decay": 0.0, "momentum": 0.0, "clip_norm": 0.0,
                "schedule": "constant", "warmup_steps": 0, "min_lr": 0.0},
  "programs": {"forward": )" +
         forward + R"(, "gradients": )" +
         test::linearGradientsProgram(2, 2, /*biasGrad=*/false) + "}}";
}

TEST(ArenaPlan, TheLoaderReadsAndChecksTheJson) {
  test::TempDir dir;
  const std::string report =
      R"("report": {"batch": 128, "arena_bytes": 1028, "no_reuse_bytes": 1028})";
  {
    std::string path = dir.file("good.pkg");
    test::writePackageFile(
        path, manifestJson(R"({"slots": [[2, 0], [0, 1]], "value_slot": [-1, -1, -1, -1, 0, 1], )" +
                           report + "}"));
    Package package = Package::load(path);
    ASSERT_TRUE(package.manifest().forward.arena);
    EXPECT_FALSE(package.manifest().gradients.arena);
    // Version 1 (writePackageFile's): 4-byte elements, read in bytes; the
    // report's packed figure checked, then this runtime's (16-byte slots).
    EXPECT_EQ(package.manifest().forward.arena->slots,
              (std::vector<std::pair<int64_t, int64_t>>{{8, 0}, {0, 4}}));
    EXPECT_EQ(package.manifest().forward.arena->arenaBytes, 1024 + 16);
    EXPECT_EQ(package.manifest().forward.arena->noReuseBytes, 1028);
    Model model(std::move(package));
    EXPECT_FALSE(model.arenaPlan()); // only one program has a plan
    model.initParameters();
    Tensor<float> x({2, 2}, {1.f, 2.f, -1.f, 3.f});
    Tensor<int32_t> label({2}, {0, 1});
    auto out = model.run("forward", {{"x", HostTensor::of(x)}, {"label", HostTensor::of(label)}});
    EXPECT_EQ(out.at("logits").values, (std::vector<float>{1.5f, 1.5f, 1.f, 1.f}));
  }
  struct Case {
    std::string arena, fragment;
  };
  for (const Case &c : std::vector<Case>{
           {R"({"slots": [[2, 0], [0, 1]], "value_slot": [-1, -1, -1, -1, 0], )" + report + "}",
            "manifest.programs.forward.arena.value_slot: 5 entries, the program has 6 values"},
           {R"({"slots": [[2, 0]], "value_slot": [-1, -1, -1, -1, 0, 1], )" + report + "}",
            "value_slot[5]: slot 1 out of range (the plan has 1 slots)"},
           {R"({"slots": [[2, 0, 1]], "value_slot": [-1, -1, -1, -1, 0, 0], )" + report + "}",
            "slots[0]: a slot is [per_batch, fixed]"},
           {R"({"slots": [[-2, 0]], "value_slot": [-1, -1, -1, -1, 0, 0], )" + report + "}",
            "slot size [-2, 0] out of range"},
           // Above 2^32 a slot times a batch could overflow.
           {R"({"slots": [[4294967297, 0]], "value_slot": [-1, -1, -1, -1, 0, 0], )" + report +
                "}",
            "slot size [4294967297, 0] out of range"},
           {R"({"slots": [], "value_slot": [-1, -1, -1, -1, -1, -1], "extra": 1, )" + report + "}",
            "unknown key \"extra\""},
           // A version 1 or 2 report gives the packed 4-byte elements.
           {R"({"slots": [[2, 0], [0, 1]], "value_slot": [-1, -1, -1, -1, 0, 1], )"
            R"("report": {"batch": 128, "arena_bytes": 1040, "no_reuse_bytes": 1028}})",
            "manifest.programs.forward.arena.report: arena_bytes 1040 is not the plan's 1028 "
            "(package version 1: 4-byte elements, slots packed)"},
       }) {
    std::string path = dir.file("bad.pkg");
    test::writePackageFile(path, manifestJson(c.arena));
    EXPECT_TRUE(failsWith([&] { Package::load(path); }, path, {c.fragment})) << c.arena;
  }
}

// Version 3 (what stringc writes): the slots in bytes, arena_bytes with each
// slot rounded up to 16 bytes, as read.
TEST(ArenaPlan, AVersion3PlanIsInBytes) {
  test::TempDir dir;
  const std::map<std::string, std::string> v3 = {{"version", "3"}};
  std::string path = dir.file("v3.pkg");
  test::writePackageFile(
      path,
      manifestJson(R"({"slots": [[8, 0], [0, 4]], "value_slot": [-1, -1, -1, -1, 0, 1], )"
                   R"("report": {"batch": 128, "arena_bytes": 1040, "no_reuse_bytes": 1028}})"),
      v3);
  Package package = Package::load(path);
  EXPECT_EQ(package.manifest().forward.arena->slots,
            (std::vector<std::pair<int64_t, int64_t>>{{8, 0}, {0, 4}}));
  EXPECT_EQ(package.manifest().forward.arena->arenaBytes, 1040);
  EXPECT_TRUE(package.manifest().forward.arena->elementBytes.empty()); // no cuda section
  Model model(std::move(package));
  model.initParameters();
  Tensor<float> x({2, 2}, {1.f, 2.f, -1.f, 3.f});
  Tensor<int32_t> label({2}, {0, 1});
  auto out = model.run("forward", {{"x", HostTensor::of(x)}, {"label", HostTensor::of(label)}});
  EXPECT_EQ(out.at("logits").values, (std::vector<float>{1.5f, 1.5f, 1.f, 1.f}));
  // The packed figure of version 2 is refused in version 3 (by the executor).
  test::writePackageFile(
      path,
      manifestJson(R"({"slots": [[8, 0], [0, 4]], "value_slot": [-1, -1, -1, -1, 0, 1], )"
                   R"("report": {"batch": 128, "arena_bytes": 1028, "no_reuse_bytes": 1028}})"),
      v3);
  EXPECT_TRUE(failsWith([&] { Model m(Package::load(path)); }, path,
                        {"the report says 1028 arena and 1028 no-reuse bytes at batch 128, the "
                         "plan gives 1040 and 1028"}));
  // Bytes up to 4 x 2^32 a slot.
  test::writePackageFile(
      path,
      manifestJson(R"({"slots": [[17179869185, 0], [0, 4]], "value_slot": [-1, -1, -1, -1, 0, 1], )"
                   R"("report": {"batch": 128, "arena_bytes": 1040, "no_reuse_bytes": 1028}})"),
      v3);
  EXPECT_TRUE(failsWith([&] { Package::load(path); }, path,
                        {"slot size [17179869185, 0] out of range"}));
}

TEST(ArenaPlanTest, LayoutOfAnAbsurdBatchIsAnErrorNotAWrappedSize) {
  std::vector<std::pair<int64_t, int64_t>> slots = {{int64_t(1) << 33, 0}, {int64_t(1) << 33, 5}};
  EXPECT_EQ(detail::arenaLayout(slots, 3).bytes, 6 * (int64_t(1) << 33) + 16);
  EXPECT_TRUE(failsWith([&] { detail::arenaLayout(slots, int64_t(1) << 30); }, "",
                        {"the arena at batch 1073741824 would hold more than 2^63 bytes"}));
  EXPECT_FALSE(arenaSlotsBytes(slots, int64_t(1) << 30));
}

// Every slot starts at a multiple of 16 bytes at every batch (the rule:
// each slot's a*B + c rounded up), on the CPU and in the report; the device
// rounds to its 256.
TEST(ArenaPlanTest, SlotsStartSixteenByteAlignedAtEveryBatch) {
  std::vector<std::pair<int64_t, int64_t>> slots = {{6, 0}, {0, 4}, {2, 10}, {12, 48}, {0, 2}};
  for (int64_t batch : {1, 2, 3, 5, 7, 128, 255}) {
    detail::ArenaLayout cpu = detail::arenaLayout(slots, batch);
    detail::ArenaLayout device = detail::arenaLayout(slots, batch, 256);
    int64_t packed = 0;
    for (size_t k = 0; k < slots.size(); ++k) {
      EXPECT_EQ(cpu.offsets[k] % 16, 0) << "slot " << k << " at batch " << batch;
      EXPECT_EQ(device.offsets[k] % 256, 0) << "slot " << k << " at batch " << batch;
      if (k > 0) // back to back: no more than the rounding between slots
        EXPECT_LT(cpu.offsets[k] - cpu.offsets[k - 1] - (slots[k - 1].first * batch + slots[k - 1].second), 16);
      packed += slots[k].first * batch + slots[k].second;
    }
    EXPECT_EQ(cpu.bytes % 16, 0);
    EXPECT_GE(cpu.bytes, packed);
    EXPECT_LT(cpu.bytes, packed + 16 * int64_t(slots.size()));
    EXPECT_EQ(arenaSlotsBytes(slots, batch), cpu.bytes);
  }
  EXPECT_EQ(detail::arenaLayout(slots, 3).offsets, (std::vector<int64_t>{0, 32, 48, 64, 160}));
}

} // namespace
} // namespace stringrt
