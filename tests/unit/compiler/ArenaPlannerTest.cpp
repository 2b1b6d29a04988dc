//===- ArenaPlanTest.cpp - the arena plan's liveness and slot assignment --===//
//
// The planner (compiler/lib/Package/ArenaPlanner.cpp) on hand-made intervals, and
// on the forward and gradients programs of every example, where the plan is
// checked by brute force (every pair of values of a slot, every op) rather
// than by verifyArenaPlan alone.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Driver/Driver.h"
#include "stringc/Package/ArenaPlanner.h"
#include "stringc/Package/PackageBuilder.h"

#include "TestHelpers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Parser/Parser.h"

#include "stringrt/Model.h"
#include "stringrt/Package.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <unistd.h>

using namespace mlir;
using stringc::ArenaPlan;
using stringc::ArenaValue;

namespace {

ArenaValue interval(int64_t start, int64_t end, int64_t perBatch, int64_t fixed) {
  ArenaValue v;
  v.planned = true;
  v.start = start;
  v.end = end;
  v.perBatch = perBatch;
  v.fixed = fixed;
  return v;
}

// Independent of verifyArenaPlan: no two values of a slot are live at the
// same op, and every slot holds each member at the batch sizes given.
void expectValid(const std::vector<ArenaValue> &values, const ArenaPlan &plan,
                 const std::string &what) {
  ASSERT_EQ(plan.valueSlot.size(), values.size()) << what;
  for (size_t x = 0; x < values.size(); ++x) {
    if (!values[x].planned) {
      EXPECT_EQ(plan.valueSlot[x], -1) << what << ": value " << x;
      continue;
    }
    ASSERT_GE(plan.valueSlot[x], 0) << what << ": value " << x;
    ASSERT_LT(plan.valueSlot[x], int64_t(plan.slots.size())) << what;
    for (int64_t batch : {1, 7, 128})
      EXPECT_GE(plan.slots[plan.valueSlot[x]].bytes(batch), values[x].bytes(batch))
          << what << ": value " << x << " at batch " << batch;
    for (size_t y = x + 1; y < values.size(); ++y)
      if (values[y].planned && plan.valueSlot[x] == plan.valueSlot[y])
        EXPECT_TRUE(values[x].end < values[y].start || values[y].end < values[x].start)
            << what << ": values " << x << " and " << y << " overlap in slot "
            << plan.valueSlot[x];
  }
}

TEST(ArenaPlanner, OverlappingIntervalsNeverShare) {
  // Three values live at op 2 at once, so three slots.
  std::vector<ArenaValue> values = {interval(0, 2, 10, 0), interval(1, 2, 10, 0),
                                    interval(2, 3, 10, 0)};
  ArenaPlan plan = stringc::planArena(values);
  expectValid(values, plan, "overlap");
  EXPECT_EQ(plan.slots.size(), 3u);
  EXPECT_FALSE(stringc::verifyArenaPlan(values, plan));
}

TEST(ArenaPlanner, DisjointIntervalsReuseASlot) {
  // A chain: each value is read by the next op only, so two slots suffice
  // (an op's result never shares with its operand: both live at that op).
  std::vector<ArenaValue> values;
  for (int64_t i = 0; i < 6; ++i)
    values.push_back(interval(i, i + 1, 64 * 4, 0)); // 64 f32s an example
  ArenaPlan plan = stringc::planArena(values);
  expectValid(values, plan, "chain");
  EXPECT_EQ(plan.slots.size(), 2u);
  EXPECT_EQ(plan.arenaBytes(128), 2 * 64 * 128 * 4);
  EXPECT_EQ(stringc::noReuseBytes(values, 128), 6 * 64 * 128 * 4);
}

TEST(ArenaPlanner, SlotsAreSixteenByteRoundedInTheArena) {
  // Live at once: 3 bf16 elements an example (6 bytes) and one f32 (4 bytes).
  std::vector<ArenaValue> values = {interval(0, 1, 6, 0), interval(0, 1, 0, 4)};
  ArenaPlan plan = stringc::planArena(values);
  ASSERT_EQ(plan.slots.size(), 2u);
  EXPECT_EQ(plan.arenaBytes(1), 16 + 16);
  EXPECT_EQ(plan.arenaBytes(3), 32 + 16);
  EXPECT_EQ(plan.arenaBytes(128), 768 + 16);
  EXPECT_EQ(stringc::noReuseBytes(values, 128), 768 + 4); // the values' own bytes
}

TEST(ArenaPlanner, MixedSizeClassesBoundEveryBatch) {
  // A batch-sized value, then a static one in the same slot: the slot is
  // [max a, max c], which holds both at any batch.
  std::vector<ArenaValue> values = {interval(0, 1, 8, 0), interval(2, 3, 0, 500),
                                    interval(4, 5, 3, 0)};
  values.push_back(ArenaValue()); // an input: not planned
  ArenaPlan plan = stringc::planArena(values);
  expectValid(values, plan, "mixed");
  ASSERT_EQ(plan.slots.size(), 1u);
  EXPECT_EQ(plan.slots[0].perBatch, 8);
  EXPECT_EQ(plan.slots[0].fixed, 500);
  EXPECT_EQ(plan.valueSlot[3], -1);
}

TEST(ArenaPlanner, VerifierRejectsSharedOverlap) {
  std::vector<ArenaValue> values = {interval(0, 3, 4, 0), interval(2, 4, 4, 0)};
  ArenaPlan plan;
  plan.slots = {{4, 0}};
  plan.valueSlot = {0, 0};
  std::optional<std::string> problem = stringc::verifyArenaPlan(values, plan);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("values 0 and 1 share slot 0"), std::string::npos) << *problem;
  plan.slots = {{4, 0}, {2, 0}};
  plan.valueSlot = {0, 1};
  problem = stringc::verifyArenaPlan(values, plan);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("too small for value 1"), std::string::npos) << *problem;
}

class ArenaExample : public ::testing::TestWithParam<std::string> {
protected:
  ArenaExample() {
    context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
  }
  MLIRContext context;
};

TEST_P(ArenaExample, PlanIsValidAndReuses) {
  std::optional<stringc::ModelGraph> graph = stringc::test::compileExample(GetParam());
  ASSERT_TRUE(graph);
  std::ostringstream text, err;
  ASSERT_EQ(stringc::printModelAsMLIR(*graph, text, err, stringc::EmitStage::Train), 0)
      << err.str();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text.str(), &context);
  ASSERT_TRUE(module);
  for (const char *name : {"forward", "gradients"}) {
    auto func = module->lookupSymbol<func::FuncOp>(name);
    ASSERT_TRUE(func) << name;
    std::vector<ArenaValue> values = stringc::arenaValues(func);
    ArenaPlan plan = stringc::planArena(values);
    std::string what = GetParam() + " " + name;
    expectValid(values, plan, what);
    std::optional<std::string> problem = stringc::verifyArenaPlan(values, plan);
    EXPECT_FALSE(problem) << what << ": " << problem.value_or("");
    size_t planned = 0;
    for (const ArenaValue &v : values)
      planned += v.planned;
    EXPECT_GT(planned, 0u) << what;
    EXPECT_LT(plan.slots.size(), planned) << what << ": no reuse";
    for (int64_t batch : {1, 7, 128})
      EXPECT_LE(plan.arenaBytes(batch), stringc::noReuseBytes(values, batch))
          << what << " at batch " << batch;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ArenaExample,
                         ::testing::ValuesIn(stringc::test::exampleFiles()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           for (char &c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

// A value stored in bf16 (a cuda package's: StoredTypes) is planned at 2
// bytes an element, the others at 4; the plan records the element sizes.
TEST(ArenaPlanner, ValuesAreSizedAtTheirStoredType) {
  MLIRContext context;
  context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
  std::optional<stringc::ModelGraph> graph = stringc::test::compileExample("vit_rope.pe");
  ASSERT_TRUE(graph);
  std::ostringstream text, err;
  ASSERT_EQ(stringc::printModelAsMLIR(*graph, text, err, stringc::EmitStage::Train), 0)
      << err.str();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text.str(), &context);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("gradients");
  std::vector<ArenaValue> f32 = stringc::arenaValues(func);
  stringc::StoredTypes stored; // every batch-sized intermediate, as --gpu-precision=bf16 may
  for (size_t v = 0; v < f32.size(); ++v)
    if (f32[v].planned && f32[v].perBatch > 0)
      stored.push_back({int64_t(v), stringrt::DType::BF16});
  ASSERT_FALSE(stored.empty());
  std::vector<ArenaValue> mixed = stringc::arenaValues(func, {}, stored);
  ASSERT_EQ(mixed.size(), f32.size());
  std::vector<bool> isBf16(f32.size(), false);
  for (const auto &[v, dtype] : stored)
    isBf16[size_t(v)] = true;
  for (size_t v = 0; v < f32.size(); ++v) {
    EXPECT_EQ(mixed[v].perBatch, isBf16[v] ? f32[v].perBatch / 2 : f32[v].perBatch) << v;
    EXPECT_EQ(mixed[v].fixed, f32[v].fixed) << v;
    EXPECT_EQ(mixed[v].start, f32[v].start) << v;
    EXPECT_EQ(mixed[v].end, f32[v].end) << v;
  }
  stringrt::ProgramArena allF32, bf16;
  ASSERT_FALSE(stringc::packageArena(func, {}, allF32));
  ASSERT_FALSE(stringc::packageArena(func, {}, bf16, stored));
  EXPECT_TRUE(allF32.elementBytes.empty());
  ASSERT_EQ(bf16.elementBytes.size(), f32.size());
  for (size_t v = 0; v < f32.size(); ++v)
    EXPECT_EQ(bf16.elementBytes[v], isBf16[v] ? 2 : 4) << v;
  EXPECT_LT(bf16.arenaBytes, allF32.arenaBytes);
  EXPECT_EQ(bf16.noReuseBytes, stringc::noReuseBytes(mixed, stringc::kArenaReportBatch));
  EXPECT_LT(bf16.noReuseBytes, allF32.noReuseBytes);
}

// Runs with the package's plan give the same bits as runs on the buffer pool:
// the loss and every gradient, on two examples, at two batch sizes.
class ArenaRun : public ::testing::TestWithParam<std::string> {};

TEST_P(ArenaRun, SameBitsWithAndWithoutThePlan) {
  std::optional<stringc::ModelGraph> graph = stringc::test::compileExample(GetParam());
  ASSERT_TRUE(graph);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("stringc-arena-test-" + std::to_string(::getpid()) + ".pkg"))
                         .string();
  std::ostringstream writeErr;
  ASSERT_EQ(stringc::writeModelPackage(*graph, path, stringc::kReferenceTarget, writeErr), 0)
      << writeErr.str();
  stringrt::Model planned(stringrt::Package::load(path), stringrt::KernelSet::Fast);
  stringrt::Model pooled(stringrt::Package::load(path), stringrt::KernelSet::Fast);
  std::filesystem::remove(path);
  ASSERT_TRUE(planned.arenaPlan());
  const auto &plan = *planned.manifest().gradients.arena;
  EXPECT_LT(plan.arenaBytes, plan.noReuseBytes);
  pooled.setArenaPlan(false);
  planned.initParameters();
  pooled.initParameters();
  for (int64_t batch : {3, 2, 3}) {
    std::mt19937 gen{static_cast<unsigned>(batch)};
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    std::vector<std::vector<float>> f32s;
    std::vector<std::vector<int32_t>> i32s;
    std::map<std::string, stringrt::HostTensor> inputs;
    f32s.reserve(8);
    i32s.reserve(8);
    for (const stringrt::ManifestInput &in : planned.manifest().inputs) {
      std::vector<int64_t> shape = in.shape;
      int64_t n = 1;
      for (int64_t &d : shape)
        n *= (d = d == stringrt::kBatchDim ? batch : d);
      stringrt::HostTensor t;
      t.dtype = in.dtype;
      t.shape = shape;
      if (in.dtype == stringrt::DType::I32) {
        i32s.emplace_back(size_t(n));
        for (int64_t i = 0; i < n; ++i)
          i32s.back()[size_t(i)] = int32_t(i % 2);
        t.data = i32s.back().data();
      } else {
        f32s.emplace_back(size_t(n));
        for (float &v : f32s.back())
          v = uniform(gen);
        t.data = f32s.back().data();
      }
      inputs[in.name] = t;
    }
    float lossA = 0, lossB = 0;
    std::vector<float> gradsA, gradsB;
    planned.gradients(inputs, lossA, gradsA);
    pooled.gradients(inputs, lossB, gradsB);
    EXPECT_EQ(std::memcmp(&lossA, &lossB, sizeof(float)), 0) << GetParam() << " batch " << batch;
    ASSERT_EQ(gradsA.size(), gradsB.size());
    EXPECT_EQ(std::memcmp(gradsA.data(), gradsB.data(), gradsA.size() * sizeof(float)), 0)
        << GetParam() << " batch " << batch;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ArenaRun,
                         ::testing::Values("vit_rope.pe", "gpt_rope_causal.pe"),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

} // namespace
