// The pure half of the device executor (StepBinding.h): value placement,
// scratch layout, launch binding, explicit grids and the coverage check.
// No GPU needed.
#include "TestFiles.h"
#include "TestPackages.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/StepBinding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace stringrt::test {
namespace {

using cuda::BoundLaunch;
using cuda::OpPointers;
using cuda::Region;

// forward: x [B, 4], label i32 [B], w [4, 3], b [3] -> logits [B, 3], loss;
// its arena plan puts logits in slot 0 ([3, 0]) and the loss in slot 1.
std::string manifestJson(bool forwardArena) {
  std::string forward = linearForwardProgram(4, 3);
  if (forwardArena)
    forward.insert(forward.rfind('}'), R"(, "arena": {"slots": [[3, 0], [0, 1]],
        "value_slot": [-1, -1, -1, -1, 0, 1],
        "report": {"batch": 128, "arena_bytes": 1540, "no_reuse_bytes": 1540}})");
  return tinyLinearManifest(forward);
}

class StepBindingTest : public ::testing::Test {
protected:
  Manifest load(bool forwardArena) {
    std::string path = dir.file("tiny.pkg");
    writePackageFile(path, manifestJson(forwardArena));
    return Package::load(path).manifest();
  }
  TempDir dir;
};

TEST_F(StepBindingTest, PlacesInputsParametersAndArenaValues) {
  Manifest manifest = load(/*forwardArena=*/true);
  cuda::ProgramPlacement p = cuda::placeValues(manifest, manifest.forward, "forward", 5);
  ASSERT_EQ(p.values.size(), 6u);
  // Inputs in the executor's own buffer, 256-byte aligned.
  EXPECT_EQ(p.values[0].region, Region::Extra);
  EXPECT_EQ(p.values[0].offset, 0u);
  EXPECT_EQ(p.values[0].bytes, 5u * 4 * 4);
  EXPECT_EQ(p.values[1].region, Region::Extra);
  EXPECT_EQ(p.values[1].offset, 256u);
  EXPECT_EQ(p.values[1].bytes, 5u * 4);
  EXPECT_EQ(p.extraBytes, 512u);
  // Parameters: views of the flat buffer, manifest order, each 256-byte
  // aligned (deviceParameterLayout: w [4, 3] at 0, b [3] at 64 floats).
  EXPECT_EQ(p.values[2].region, Region::Params);
  EXPECT_EQ(p.values[2].offset, 0u);
  EXPECT_EQ(p.values[2].bytes, 48u);
  EXPECT_EQ(p.values[3].region, Region::Params);
  EXPECT_EQ(p.values[3].offset, 256u);
  cuda::DeviceParamLayout params = cuda::deviceParameterLayout(manifest);
  EXPECT_EQ(params.offsets, (std::vector<int64_t>{0, 64}));
  EXPECT_EQ(params.total, 128);
  // The plan's slots at batch 5: slot 0 = 15 floats, slot 1 = 1, each
  // starting 256-byte aligned.
  EXPECT_EQ(p.values[4].region, Region::Arena);
  EXPECT_EQ(p.values[4].offset, 0u);
  EXPECT_EQ(p.values[4].bytes, 60u);
  EXPECT_EQ(p.values[5].region, Region::Arena);
  EXPECT_EQ(p.values[5].offset, 256u);
  EXPECT_EQ(p.values[5].bytes, 4u);
  EXPECT_EQ(p.arenaBytes, 512u);
  // Another batch, the same aligned layout here (slot 0 = 6 floats).
  cuda::ProgramPlacement q = cuda::placeValues(manifest, manifest.forward, "forward", 2);
  EXPECT_EQ(q.values[4].bytes, 24u);
  EXPECT_EQ(q.values[5].offset, 256u);
  EXPECT_EQ(q.arenaBytes, 512u);
}

// With the steps of a package that stores logits (value 4) in bf16, the
// value takes its stored bytes in its slot; a slot sized for bf16 is refused
// for a value the steps store in f32.
TEST_F(StepBindingTest, Bf16ValuesTakeTheirStoredBytes) {
  Manifest manifest = load(/*forwardArena=*/true);
  CudaProgramSteps steps;
  steps.program = "forward";
  steps.valueDTypes = {{4, DType::BF16}};
  cuda::ProgramPlacement p = cuda::placeValues(manifest, manifest.forward, "forward", 5, &steps);
  EXPECT_EQ(p.values[4].region, Region::Arena);
  EXPECT_EQ(p.values[4].bytes, 30u); // 15 elements at 2 bytes
  EXPECT_EQ(p.values[5].bytes, 4u);
  manifest.forward.arena->slots[0] = {6, 0}; // bf16-sized: 6 bytes an example
  EXPECT_EQ(cuda::placeValues(manifest, manifest.forward, "forward", 5, &steps).values[4].bytes,
            30u);
  EXPECT_TRUE(failsWith([&] { cuda::placeValues(manifest, manifest.forward, "forward", 5); }, "",
                        {"program 'forward': value 4 (60 bytes at batch 5) does not fit its "
                         "arena slot 0 (30 bytes)"}));
}

TEST_F(StepBindingTest, WithoutAPlanEveryResultHasItsOwnBuffer) {
  Manifest manifest = load(/*forwardArena=*/false);
  cuda::ProgramPlacement p = cuda::placeValues(manifest, manifest.gradients, "gradients", 3);
  EXPECT_EQ(p.arenaBytes, 0u);
  uint64_t previousEnd = 0;
  for (ValueId v : {ValueId(0), ValueId(1), ValueId(4), ValueId(5), ValueId(6), ValueId(7),
                    ValueId(8), ValueId(9)}) {
    EXPECT_EQ(p.values[v].region, Region::Extra) << v;
    EXPECT_EQ(p.values[v].offset % cuda::kDeviceAlignment, 0u) << v;
    EXPECT_GE(p.values[v].offset, previousEnd) << v; // no overlap
    previousEnd = p.values[v].offset + p.values[v].bytes;
  }
  EXPECT_EQ(p.values[8].bytes, 48u); // dw [4, 3]
  EXPECT_EQ(p.values[7].bytes, 36u); // dlogits [3, 3]
  EXPECT_LE(previousEnd, p.extraBytes);
}

CudaSection sectionWithKernel(CudaGridRule grid) {
  CudaSection section;
  CudaKernel k;
  k.name = "k";
  k.params = {CudaParamKind::Ptr, CudaParamKind::Ptr, CudaParamKind::Ptr, CudaParamKind::I64,
              CudaParamKind::F32};
  k.grid = grid;
  k.blockX = 128;
  section.kernels.push_back(k);
  return section;
}

CudaLaunch kernelLaunch() {
  CudaLaunch l;
  l.kernel = 0;
  l.args = {{CudaArgKind::Result, 0, {}, 0}, {CudaArgKind::Operand, 1, {}, 0},
            {CudaArgKind::Scratch, 0, {}, 0}, {CudaArgKind::I64, 0, {12, 5}, 0},
            {CudaArgKind::F32, 0, {}, 0.125f}};
  return l;
}

// ZeRO-1's slices on GPU ranks: equal, 64-float (256-byte) multiples,
// covering the buffer, padded past it.
TEST(StepBinding, CutsZeroSlicesEqualAndAligned) {
  for (int ranks : {1, 2, 3, 7})
    for (int64_t total : {int64_t(0), int64_t(1), int64_t(64), int64_t(128), int64_t(129),
                          int64_t(1000), int64_t(130000)}) {
      cuda::DeviceZeroSlices s = cuda::deviceZeroSlices(total, ranks);
      EXPECT_EQ(s.floats % 64, 0) << total << " on " << ranks;
      EXPECT_GE(s.floats, 64);
      EXPECT_EQ(s.padded, s.floats * ranks);
      EXPECT_GE(s.padded, total);
      EXPECT_TRUE(s.floats == 64 || s.floats - 64 < (total + ranks - 1) / ranks)
          << "not the least: " << total << " on " << ranks;
    }
  EXPECT_EQ(cuda::deviceZeroSlices(129, 2).floats, 128); // 65 each, rounded up
  EXPECT_EQ(cuda::deviceZeroSlices(130000, 3).floats, 43392);
  EXPECT_THROW(cuda::deviceZeroSlices(10, 0), Error);
}

TEST(StepBinding, BindsPointersIntegersAndReals) {
  CudaSection section = sectionWithKernel(CudaGridRule::Elements);
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {0x4000}};
  BoundLaunch b = cuda::bindLaunch(section, kernelLaunch(), pointers, 7, "forward op 3");
  ASSERT_EQ(b.kernel, &section.kernels[0]);
  ASSERT_EQ(b.args.size(), 5u);
  EXPECT_EQ(b.args[0].ptr, 0x3000u);
  EXPECT_EQ(b.args[1].ptr, 0x2000u);
  EXPECT_EQ(b.args[2].ptr, 0x4000u);
  EXPECT_EQ(b.args[3].kind, CudaParamKind::I64);
  EXPECT_EQ(b.args[3].i64, 12 * 7 + 5);
  EXPECT_EQ(b.args[4].f32, 0.125f);
  EXPECT_FALSE(b.grid);
  EXPECT_FALSE(b.gemm);
  // The shape the kernel set would launch with.
  cuda::LaunchShape shape = cuda::launchShapeFor(section.kernels[0], b.args);
  EXPECT_EQ(shape.grid[0], 1u); // 89 elements, 128 threads
}

TEST(StepBinding, RejectsBadBindings) {
  CudaSection section = sectionWithKernel(CudaGridRule::Elements);
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {0x4000}};
  CudaLaunch negative = kernelLaunch();
  negative.args[3].integer = {-1, 3};
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, negative, pointers, 7, "gradients op 9"); },
                        "", {"gradients op 9: kernel k argument 3 is negative (-4 at batch 7)"}));
  CudaLaunch outOfRange = kernelLaunch();
  outOfRange.args[1].index = 2;
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, outOfRange, pointers, 1, "op"); }, "",
                        {"operand 2 out of range (2 bound)"}));
  OpPointers unplaced{{0x1000, 0}, {0x3000}, {0x4000}};
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, kernelLaunch(), unplaced, 1, "op"); }, "",
                        {"operand 1 has no device address"}));
}

TEST(StepBinding, BindsTheStepKey) {
  CudaSection section = sectionWithKernel(CudaGridRule::Elements);
  CudaLaunch l = kernelLaunch();
  l.args[2] = CudaArg::stepKey();
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {0x4000}};
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, l, pointers, 1, "gradients op 4"); }, "",
                        {"gradients op 4: kernel k argument 2: the step key has no device address"}));
  pointers.stepKey = 0x5000;
  BoundLaunch b = cuda::bindLaunch(section, l, pointers, 1, "gradients op 4");
  EXPECT_EQ(b.args[2].kind, CudaParamKind::Ptr);
  EXPECT_EQ(b.args[2].ptr, 0x5000u);
}

// A bias-gradient epilogue's output is a result of the next entry's op:
// bound against that op's pointers, and refused without them.
TEST(StepBinding, BindsABiasGradientAgainstTheNextOp) {
  CudaSection section;
  CudaLaunch l;
  CudaGemm g;
  g.a = CudaArg::operand(0);
  g.b = CudaArg::operand(1);
  g.c = CudaArg::result(0);
  g.m = CudaAffine::fixed(4);
  g.n = CudaAffine::fixed(3);
  g.k = CudaAffine{5, 0};
  g.transA = true;
  g.epilogue = CudaGemmEpilogue::BiasGrad;
  g.bias = CudaArg::result(0);
  l.gemm = g;
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {}};
  OpPointers next{{0x2000}, {0x7000}, {}};
  BoundLaunch b = cuda::bindLaunch(section, l, pointers, 2, "gradients op 6", &next);
  ASSERT_TRUE(b.gemm);
  EXPECT_EQ(b.gemm->biasGrad, 0x7000u);
  EXPECT_EQ(b.gemm->bias, 0u); // nothing to add
  EXPECT_EQ(b.gemm->c, 0x3000u);
  EXPECT_EQ(b.gemm->k, 10);
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, l, pointers, 2, "gradients op 6"); }, "",
                        {"gradients op 6: a bias_grad GEMM bound without its next entry"}));
}

TEST(StepBinding, BindsConstantArrays) {
  CudaSection section = sectionWithKernel(CudaGridRule::Elements);
  CudaLaunch l = kernelLaunch();
  l.args[1] = {CudaArgKind::Constant, 1, {}, 0};
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {0x4000}, {0x5000, 0x6000}};
  BoundLaunch b = cuda::bindLaunch(section, l, pointers, 2, "forward op 4");
  EXPECT_EQ(b.args[1].kind, CudaParamKind::Ptr);
  EXPECT_EQ(b.args[1].ptr, 0x6000u);
  l.args[1].index = 2;
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, l, pointers, 2, "forward op 4"); }, "",
                        {"forward op 4: kernel k argument 1: constant 2 out of range (2 bound)"}));
  l.args[1].index = 0;
  OpPointers unplaced{{0x1000, 0x2000}, {0x3000}, {0x4000}, {0, 0x6000}};
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, l, unplaced, 2, "op"); }, "",
                        {"constant 0 has no device address"}));
}

TEST(StepBinding, LaysOutConstantsAligned) {
  CudaSection section;
  CudaConstant ints;
  ints.i32 = {1, 2, 3};
  CudaConstant reals;
  reals.dtype = DType::F32;
  reals.f32.assign(100, 0.5f);
  section.constants = {ints, reals, ints};
  cuda::ConstantLayout layout = cuda::constantLayout(section);
  ASSERT_EQ(layout.offsets.size(), 3u);
  EXPECT_EQ(layout.offsets[0], 0u);
  EXPECT_EQ(layout.offsets[1], 256u); // 12 bytes rounded up to 256
  EXPECT_EQ(layout.offsets[2], 768u); // 400 bytes rounded up to 512
  EXPECT_EQ(layout.bytes, 1024u);
  EXPECT_EQ(cuda::constantLayout(CudaSection{}).bytes, 0u);
}

TEST(StepBinding, EvaluatesExplicitGridsWithinTheDeviceLimits) {
  CudaSection section = sectionWithKernel(CudaGridRule::Explicit);
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {0x4000}};
  CudaLaunch l = kernelLaunch();
  l.grid = std::array<CudaAffine, 3>{CudaAffine{0, 3}, CudaAffine{2, 0}, CudaAffine{0, 1}};
  BoundLaunch b = cuda::bindLaunch(section, l, pointers, 10, "op");
  ASSERT_TRUE(b.grid);
  EXPECT_EQ((*b.grid)[0], 3);
  EXPECT_EQ((*b.grid)[1], 20);
  EXPECT_EQ((*b.grid)[2], 1);
  cuda::LaunchShape shape = cuda::launchShapeFor(section.kernels[0], b.args, &*b.grid);
  EXPECT_EQ(shape.grid[0], 3u);
  EXPECT_EQ(shape.grid[1], 20u);
  EXPECT_EQ(shape.block[0], 128u);
  // grid.y is at most 65535.
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(section, l, pointers, 40000, "op"); }, "",
                        {"grid[1] = 80000 exceeds the device limit 65535"}));
  // An explicit kernel needs its grid, the others take none.
  EXPECT_TRUE(failsWith([&] { cuda::launchShapeFor(section.kernels[0], b.args); }, "",
                        {"needs an explicit grid"}));
  CudaSection elements = sectionWithKernel(CudaGridRule::Elements);
  EXPECT_TRUE(failsWith([&] { cuda::launchShapeFor(elements.kernels[0], b.args, &*b.grid); }, "",
                        {"takes no explicit grid"}));
}

// The binding sizes every kernel launch's grid at the batch; the executor
// skips exactly the launches with no block (BoundLaunch::empty), never one
// because an i64 argument is 0.
TEST(StepBinding, OnlyEmptyGridsAreSkipped) {
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {0x4000}};
  CudaSection elements = sectionWithKernel(CudaGridRule::Elements);
  CudaLaunch perBatch = kernelLaunch();
  perBatch.args[3].integer = {12, 0}; // n = 12 B elements
  BoundLaunch b = cuda::bindLaunch(elements, perBatch, pointers, 3, "op");
  EXPECT_EQ(b.shape.grid[0], 1u); // 36 elements, 128 threads
  EXPECT_EQ(b.shape.block[0], 128u);
  EXPECT_FALSE(b.empty());
  b = cuda::bindLaunch(elements, perBatch, pointers, 0, "op");
  EXPECT_EQ(b.args[3].i64, 0);
  EXPECT_EQ(b.shape.grid[0], 0u);
  EXPECT_TRUE(b.empty());

  // An explicit grid: empty when a dimension evaluates to 0, whatever the
  // integer arguments; an i64 argument of 0 under a non-empty grid runs.
  CudaSection fixed = sectionWithKernel(CudaGridRule::Explicit);
  CudaLaunch l = kernelLaunch();
  l.args[3].integer = {0, 0};
  l.grid = std::array<CudaAffine, 3>{CudaAffine{4, 0}, CudaAffine{0, 2}, CudaAffine{0, 1}};
  b = cuda::bindLaunch(fixed, l, pointers, 5, "op");
  EXPECT_EQ(b.args[3].i64, 0);
  EXPECT_EQ(b.shape.grid[0], 20u);
  EXPECT_EQ(b.shape.grid[1], 2u);
  EXPECT_FALSE(b.empty());
  b = cuda::bindLaunch(fixed, l, pointers, 0, "op");
  EXPECT_TRUE(b.empty());
  l.grid = std::array<CudaAffine, 3>{CudaAffine{4, 0}, CudaAffine{0, 0}, CudaAffine{0, 1}};
  EXPECT_TRUE(cuda::bindLaunch(fixed, l, pointers, 5, "op").empty());

  // A GEMM is never "empty" here (cuBLAS takes its sizes as they are).
  EXPECT_FALSE(BoundLaunch{}.empty());

  // A grid given to a kernel of another rule, or missing, is a binding error.
  CudaLaunch stray = kernelLaunch();
  stray.grid = std::array<CudaAffine, 3>{CudaAffine{0, 1}, CudaAffine{0, 1}, CudaAffine{0, 1}};
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(elements, stray, pointers, 1, "forward op 2"); },
                        "", {"forward op 2: kernel k (grid rule elements) takes no explicit grid"}));
  EXPECT_TRUE(failsWith([&] { cuda::bindLaunch(fixed, kernelLaunch(), pointers, 1, "op"); }, "",
                        {"needs an explicit grid"}));
}

TEST(StepBinding, BindsGemms) {
  CudaSection section;
  CudaLaunch l;
  CudaGemm g;
  g.a = {CudaArgKind::Operand, 0, {}, 0};
  g.b = {CudaArgKind::Operand, 1, {}, 0};
  g.c = {CudaArgKind::Result, 0, {}, 0};
  g.m = {50, 0};
  g.n = {0, 256};
  g.k = {0, 64};
  g.count = {0, 1};
  g.transB = true;
  g.beta = 1.0f;
  l.gemm = g;
  OpPointers pointers{{0x1000, 0x2000}, {0x3000}, {}};
  BoundLaunch b = cuda::bindLaunch(section, l, pointers, 4, "op");
  ASSERT_TRUE(b.gemm);
  EXPECT_EQ(b.kernel, nullptr);
  EXPECT_EQ(b.gemm->a, 0x1000u);
  EXPECT_EQ(b.gemm->b, 0x2000u);
  EXPECT_EQ(b.gemm->c, 0x3000u);
  EXPECT_EQ(b.gemm->m, 200);
  EXPECT_EQ(b.gemm->n, 256);
  EXPECT_EQ(b.gemm->k, 64);
  EXPECT_TRUE(b.gemm->transB);
  EXPECT_FALSE(b.gemm->transA);
  EXPECT_EQ(b.gemm->beta, 1.0f);
}

TEST(StepBinding, LaysOutScratchAligned) {
  CudaOpSteps steps;
  steps.scratchBytes = {{8, 0}, {0, 4}, {0, 0}, {0, 300}};
  cuda::ScratchLayout layout = cuda::scratchLayout(steps, 100);
  ASSERT_EQ(layout.offsets.size(), 4u);
  EXPECT_EQ(layout.offsets[0], 0u);
  EXPECT_EQ(layout.offsets[1], 1024u); // 800 bytes rounded up to 256
  EXPECT_EQ(layout.offsets[2], 1280u);
  EXPECT_EQ(layout.offsets[3], 1280u);
  EXPECT_EQ(layout.bytes, 1280u + 512u);
}

TEST_F(StepBindingTest, ListsTheOpsWithoutSteps) {
  Manifest manifest = load(false);
  CudaSection section;
  CudaProgramSteps gradients;
  gradients.program = "gradients";
  CudaOpSteps sumTo;
  sumTo.op = 7;
  gradients.ops.push_back(sumTo);
  section.steps.push_back(gradients);
  // Free ops (pe.get_param, arith.constant) need none.
  EXPECT_EQ(cuda::uncoveredOps(section, manifest.gradients, "gradients"),
            (std::vector<std::string>{"pe.linear", "pe.cross_entropy", "pe.cross_entropy_grad",
                                      "pe.linear_grad_weight"}));
  EXPECT_EQ(cuda::uncoveredOps(section, manifest.forward, "forward"),
            (std::vector<std::string>{"pe.linear", "pe.cross_entropy"}));
  CudaProgramSteps forward;
  forward.program = "forward";
  for (int64_t op : {2, 3}) {
    CudaOpSteps s;
    s.op = op;
    forward.ops.push_back(s);
  }
  section.steps.push_back(forward);
  EXPECT_TRUE(cuda::uncoveredOps(section, manifest.forward, "forward").empty());
}

} // namespace
} // namespace stringrt::test

namespace stringrt::test {
namespace {

// Every launch of a compiled package binds at several batch sizes, and every
// GEMM stays inside the buffers it is bound to: the device executor's walk
// without a device. The packages: STRINGRT_CUDA_TEST_PACKAGE (kernels.pe)
// and STRINGRT_CUDA_VIT_PACKAGE (examples/vit_rope.pe), when set.
TEST(CompiledSteps, EveryLaunchBindsAtSeveralBatchSizes) {
  int checked = 0;
  for (const char *variable : {"STRINGRT_CUDA_TEST_PACKAGE", "STRINGRT_CUDA_VIT_PACKAGE"}) {
    const char *path = std::getenv(variable);
    if (!path || !*path || !std::filesystem::exists(path))
      continue;
    SCOPED_TRACE(path);
    Package package = Package::load(path);
    ASSERT_NE(package.cuda(), nullptr);
    for (const char *program : {"forward", "gradients"}) {
      if (!cuda::uncoveredOps(*package.cuda(), package.manifest().program(program), program)
               .empty())
        continue; // the executor refuses it anyway (DeviceExecutorRefusals)
      for (int64_t batch : {1, 3, 128}) {
        int64_t launches = 0;
        ASSERT_NO_THROW(launches = cuda::checkProgramSteps(package.manifest(), *package.cuda(),
                                                          program, batch))
            << program << " at batch " << batch;
        EXPECT_GT(launches, 0);
      }
    }
    ++checked;
  }
  if (checked == 0)
    GTEST_SKIP() << "neither STRINGRT_CUDA_TEST_PACKAGE nor STRINGRT_CUDA_VIT_PACKAGE names a package";
}

// Every example's package (STRINGRT_CUDA_EXAMPLE_PACKAGES: a directory of
// examples/*.pe compiled with --target=cuda by tests/cuda/example_steps.sh,
// which gives their number in STRINGRT_CUDA_EXAMPLE_COUNT) has steps
// for every op of both programs, and every launch binds at batch 1, 3 and
// 128 with its GEMMs and constant arrays inside their buffers.
TEST(CompiledSteps, EveryExamplePackageIsCoveredAndBinds) {
  const char *dirPath = std::getenv("STRINGRT_CUDA_EXAMPLE_PACKAGES");
  if (!dirPath || !*dirPath || !std::filesystem::is_directory(dirPath))
    GTEST_SKIP() << "STRINGRT_CUDA_EXAMPLE_PACKAGES does not name a directory of example packages";
  std::vector<std::string> paths;
  for (const auto &entry : std::filesystem::directory_iterator(dirPath))
    if (entry.path().extension() == ".pkg")
      paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  // One package per example: the script that compiles them counts examples/*.pe.
  if (const char *count = std::getenv("STRINGRT_CUDA_EXAMPLE_COUNT"))
    EXPECT_EQ(paths.size(), std::stoul(count)) << "one package per example";
  for (const std::string &path : paths) {
    SCOPED_TRACE(path);
    Package package = Package::load(path);
    ASSERT_NE(package.cuda(), nullptr);
    // The format's writer gives the compiler's file back from what was read.
    SafetensorsFile file = SafetensorsFile::open(path);
    EXPECT_EQ(writeCudaSectionJson(*package.cuda()), file.metadata().at("cuda"));
    PackageContents contents;
    contents.target = kCudaTarget;
    contents.manifest = package.manifest();
    contents.cuda = *package.cuda();
    test::TempDir dir;
    writePackage(dir.file("again.pkg"), contents);
    EXPECT_EQ(test::readFile(dir.file("again.pkg")), test::readFile(path));
    for (const char *program : {"forward", "gradients"}) {
      EXPECT_EQ(cuda::uncoveredOps(*package.cuda(), package.manifest().program(program), program),
                std::vector<std::string>{})
          << program;
      for (int64_t batch : {1, 3, 128}) {
        int64_t launches = 0;
        ASSERT_NO_THROW(launches = cuda::checkProgramSteps(package.manifest(), *package.cuda(),
                                                          program, batch))
            << program << " at batch " << batch;
        EXPECT_GT(launches, 0);
      }
    }
  }
}

// A bf16 package's arena (STRINGRT_CUDA_VIT_BF16_PACKAGE: examples/vit_rope.pe
// --gpu-precision=bf16) holds each value at its stored bytes: every slot is
// exactly its largest member at 2 bytes an element for a value the package
// stores in bf16 and 4 for the others, the report's figures are those
// slots (each rounded up to 16 bytes) and those members, the arena at every
// batch is smaller than the fp32 package's (STRINGRT_CUDA_VIT_PACKAGE, every
// value at 4 bytes), and the device places every value at the start of its
// 256-byte aligned slot with its stored bytes.
TEST(CompiledSteps, Bf16ValuesTakeHalfSizedArenaSlots) {
  const char *bf16Path = std::getenv("STRINGRT_CUDA_VIT_BF16_PACKAGE");
  const char *fp32Path = std::getenv("STRINGRT_CUDA_VIT_PACKAGE");
  for (const char *path : {bf16Path, fp32Path})
    if (!path || !*path || !std::filesystem::exists(path))
      GTEST_SKIP() << "STRINGRT_CUDA_VIT_BF16_PACKAGE and STRINGRT_CUDA_VIT_PACKAGE must name "
                      "packages";
  Package bf16 = Package::load(bf16Path), fp32 = Package::load(fp32Path);
  ASSERT_EQ(bf16.cuda()->precision, "bf16");
  ASSERT_EQ(fp32.cuda()->precision, "fp32");
  using Slots = std::vector<std::pair<int64_t, int64_t>>;
  struct Needed {
    Slots slots;                  // [max a, max c] bytes over each slot's members
    int64_t bf16Members = 0;      // members stored in bf16
    int64_t noReuseBytes = 0;     // the members' bytes at batch 128
  };
  auto bytesAn = [](const Package &package, const std::string &name, size_t v) -> int64_t {
    return package.cuda()->stepsOf(name)->dtypeOf(int64_t(v)) == DType::BF16 ? 2 : 4;
  };
  auto needed = [&](const Package &package, const std::string &name) {
    const Program &program = package.manifest().program(name);
    Needed n;
    n.slots.assign(program.arena->slots.size(), {0, 0});
    for (size_t v = 0; v < program.values.size(); ++v) {
      const int64_t s = program.arena->valueSlot[v];
      if (s < 0)
        continue;
      const int64_t element = bytesAn(package, name, v);
      n.bf16Members += element == 2;
      int64_t elements = 1;
      bool batched = false;
      for (int64_t d : program.values[v].shape)
        d < 0 ? void(batched = true) : void(elements *= d);
      int64_t &bound = batched ? n.slots[size_t(s)].first : n.slots[size_t(s)].second;
      bound = std::max(bound, elements * element);
      n.noReuseBytes += elements * element * (batched ? 128 : 1);
    }
    return n;
  };
  for (const std::string name : {"forward", "gradients"}) {
    SCOPED_TRACE(name);
    for (const Package *package : {&bf16, &fp32}) {
      const ProgramArena &arena = *package->manifest().program(name).arena;
      Needed n = needed(*package, name);
      EXPECT_EQ(arena.slots, n.slots);
      EXPECT_EQ(arena.reportBatch, 128);
      EXPECT_EQ(arena.arenaBytes, arenaSlotsBytes(n.slots, 128));
      EXPECT_EQ(arena.noReuseBytes, n.noReuseBytes);
      if (package == &bf16)
        EXPECT_GT(n.bf16Members, 0);
      else
        EXPECT_EQ(n.bf16Members, 0);
    }
    const Program &program = bf16.manifest().program(name);
    const Slots &slots = program.arena->slots;
    for (int64_t batch : {1, 3, 128, 256}) {
      const int64_t bf16Bytes = arenaSlotsBytes(slots, batch).value();
      const int64_t fp32Bytes = arenaSlotsBytes(fp32.manifest().program(name).arena->slots, batch).value();
      EXPECT_LT(bf16Bytes, fp32Bytes) << "batch " << batch;
      if (batch == 128)
        std::printf("vit_rope %s arena at batch 128: bf16 %lld bytes, fp32 %lld\n", name.c_str(),
                    static_cast<long long>(bf16Bytes), static_cast<long long>(fp32Bytes));
      cuda::ProgramPlacement placement =
          cuda::placeValues(bf16.manifest(), program, name, batch, bf16.cuda()->stepsOf(name));
      std::vector<uint64_t> starts;
      uint64_t end = 0;
      for (const auto &[perBatch, fixed] : slots) {
        starts.push_back(end);
        end += (uint64_t(perBatch * batch + fixed) + 255) / 256 * 256;
      }
      EXPECT_EQ(placement.arenaBytes, end) << "batch " << batch;
      for (size_t v = 0; v < program.values.size(); ++v) {
        const int64_t s = program.arena->valueSlot[v];
        if (s < 0)
          continue;
        const cuda::ValuePlace &place = placement.values[v];
        int64_t elements = 1;
        for (int64_t d : program.values[v].shape)
          elements *= d < 0 ? batch : d;
        EXPECT_EQ(place.region, Region::Arena) << "value " << v;
        EXPECT_EQ(place.offset, starts[size_t(s)]) << "value " << v;
        EXPECT_EQ(place.bytes, uint64_t(elements * bytesAn(bf16, name, v))) << "value " << v;
        EXPECT_LE(place.bytes, uint64_t(slots[size_t(s)].first * batch + slots[size_t(s)].second))
            << "value " << v;
      }
    }
  }
}

TEST(CompiledSteps, GemmsThatOverrunTheirBuffersAreCaught) {
  const char *path = std::getenv("STRINGRT_CUDA_TEST_PACKAGE");
  if (!path || !*path || !std::filesystem::exists(path))
    GTEST_SKIP() << "STRINGRT_CUDA_TEST_PACKAGE is not set";
  Package package = Package::load(path);
  CudaSection section = *package.cuda();
  // Make the first GEMM of @forward one row too long per example.
  for (CudaProgramSteps &program : section.steps)
    if (program.program == "forward")
      for (CudaOpSteps &op : program.ops)
        for (CudaLaunch &launch : op.launches)
          if (launch.gemm) {
            launch.gemm->m.perBatch += 1;
            EXPECT_TRUE(failsWith(
                [&] { cuda::checkProgramSteps(package.manifest(), section, "forward", 4); }, "",
                {"GEMM A needs", "its buffer has"}));
            return;
          }
  FAIL() << "the package has no GEMM in @forward";
}

} // namespace
} // namespace stringrt::test
