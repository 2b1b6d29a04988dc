// The device executor (DeviceExecutor.h) and the kernels and GEMMs it
// launches for dense layers (compiler/lib/CudaGen/LinearKernels.cpp):
//
// - refusals that need no GPU: a package whose programs have ops without
//   steps (the error names them), a package without its optimizer's kernel;
// - on a GPU (skipped without one): pe_add_bias and the column sums of
//   pe.sum_to (pe_colsum_partials, one launch) against host sums, the strided-batched GEMM against a host
//   GEMM, and, with STRINGRT_CUDA_VIT_PACKAGE naming a package of
//   examples/vit_rope.pe compiled with --target=cuda, the loss and every
//   gradient of one step against the CPU executor, then three training
//   steps' losses against the CPU trainer's.
//
// Tolerances (TF32 off, f32 everywhere; the CPU's fast kernels sum in other
// orders): loss 1e-4 relative, each gradient's largest difference 2e-3 of its
// largest magnitude (the bound stringrun gradients --device cuda uses), the
// losses of steps 2 and 3 1e-3 relative (AdamW amplifies the differences of
// small gradients in its first steps).
#include "EmulatorCounters.h"
#include "TestFiles.h"
#include "TestPackages.h"

#include "stringrt/Error.h"
#include "stringrt/Model.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Package.h"
#include "stringrt/Trainer.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/DeviceExecutor.h"
#include "stringrt/cuda/StepBinding.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>

namespace stringrt::test {
namespace {

std::string tinyManifest(const char *optimizer = "adamw") {
  return tinyLinearManifest(linearForwardProgram(4, 3), optimizer);
}

/// Steps for the listed ops of a program (their launches are not looked at
/// by the coverage check).
CudaProgramSteps stepsFor(const char *program, std::vector<int64_t> ops) {
  CudaProgramSteps steps;
  steps.program = program;
  for (int64_t op : ops) {
    CudaOpSteps s;
    s.op = op;
    steps.ops.push_back(s);
  }
  return steps;
}

class DeviceExecutorRefusals : public ::testing::Test {
protected:
  Manifest load(const char *optimizer = "adamw") {
    std::string path = dir.file("tiny.pkg");
    writePackageFile(path, tinyManifest(optimizer));
    return Package::load(path).manifest();
  }
  TempDir dir;
};

TEST_F(DeviceExecutorRefusals, NamesTheOpsWithoutSteps) {
  Manifest manifest = load();
  CudaSection section;
  // forward: only the linear (op 2); gradients: the linear and the sum_to.
  section.steps = {stepsFor("forward", {2}), stepsFor("gradients", {2, 7})};
  std::vector<float> params(15, 0.0f);
  EXPECT_TRUE(failsWith([&] { cuda::DeviceModel model(manifest, section, params); }, "",
                        {"the package cannot run on the GPU: these ops have no GPU steps: "
                         "pe.cross_entropy (forward), pe.cross_entropy (gradients), "
                         "pe.cross_entropy_grad (gradients), pe.linear_grad_weight (gradients)"}));
}

TEST_F(DeviceExecutorRefusals, NeedsTheOptimizersKernel) {
  CudaSection section;
  section.steps = {stepsFor("forward", {2, 3}), stepsFor("gradients", {2, 3, 5, 6, 7})};
  std::vector<float> params(15, 0.0f);
  for (const char *kind : {"sgd", "adamw"}) {
    Manifest manifest = load(kind);
    std::string kernel = std::string(kind) == "sgd" ? "pe_sgd" : "pe_adamw";
    EXPECT_TRUE(failsWith([&] { cuda::DeviceModel model(manifest, section, params); }, "",
                          {"the package has no kernel " + kernel, "compile it again"}));
    // A package from a stringc that passed the step's scalars as values
    // (lr, the bias corrections, the clipping factor): refused by name.
    CudaSection older = section;
    CudaKernel update;
    update.name = kernel;
    using K = CudaParamKind;
    update.params = kernel == "pe_sgd"
                        ? std::vector<K>{K::Ptr, K::Ptr, K::Ptr, K::I64, K::F32, K::F32, K::F32,
                                         K::F32}
                        : std::vector<K>{K::Ptr, K::Ptr, K::Ptr, K::Ptr, K::I64, K::F32, K::F32,
                                         K::F32, K::F32, K::F32, K::F32, K::F32, K::F32};
    older.kernels.push_back(update);
    EXPECT_TRUE(failsWith([&] { cuda::DeviceModel model(manifest, older, params); }, "",
                          {"the package has an older kernel " + kernel, "compile it again"}));
  }
  // With an EMA of the weights, its kernel too.
  Manifest manifest = load("adamw");
  manifest.optimizer.emaDecay = 0.9;
  CudaSection withOptimizer = section;
  using K = CudaParamKind;
  const K P = K::Ptr, I = K::I64, F = K::F32;
  for (auto [name, params] : {std::pair<const char *, std::vector<K>>{
                                  "pe_adamw", {P, P, P, P, I, P, F, F, F, F}},
                              {"pe_sumsq_partials", {P, P, I}},
                              {"pe_optimizer_scalars", {P, P, I, P}}}) {
    CudaKernel kernel;
    kernel.name = name;
    kernel.params = params;
    withOptimizer.kernels.push_back(kernel);
  }
  EXPECT_TRUE(failsWith([&] { cuda::DeviceModel::checkPackage(manifest, withOptimizer); }, "",
                        {"the package has no kernel pe_ema", "compile it again"}));
}

// ---------------------------------------------------------------------------
// On a GPU.

#define REQUIRE_DEVICE()                                                                           \
  do {                                                                                             \
    std::string why = cuda::unavailableReason();                                                   \
    if (!why.empty())                                                                              \
      GTEST_SKIP() << "no CUDA device: " << why;                                                   \
  } while (0)

std::vector<float> random(std::mt19937 &rng, size_t n, float low = -2, float high = 2) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

TEST(GpuLinearKernels, BiasAndColumnSums) {
  std::string why;
  std::string path = existingPathFromEnv("STRINGRT_CUDA_TEST_PACKAGE", why);
  if (path.empty())
    GTEST_SKIP() << why;
  REQUIRE_DEVICE();
  Package package = Package::load(path);
  auto device = cuda::Device::open();
  cuda::KernelSet kernels(device, *package.cuda());
  using KA = cuda::KernelArg;
  std::mt19937 rng(7);
  const int64_t rows = 1000, d = 70, chunks = 64;
  std::vector<float> x = random(rng, size_t(rows * d)), b = random(rng, size_t(d));
  cuda::Arena arena(device, size_t(4) << 20);
  const size_t xAt = 0, bAt = 1 << 20, partialAt = 2 << 20, outAt = 3 << 20,
               ticketAt = outAt + (1 << 19);
  arena.uploadVector(xAt, x);
  arena.uploadVector(bAt, b);
  // pe_add_bias: y[i] += b[i % d], in place.
  kernels.launch("pe_add_bias",
                 {KA::pointer(arena.at(xAt, x.size() * 4)), KA::pointer(arena.at(bAt, d * 4)),
                  KA::integer(rows * d), KA::integer(d)},
                 "test pe_add_bias");
  std::vector<float> y = arena.downloadVector<float>(xAt, x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(y[i], x[i] + b[i % size_t(d)]) << i;
  // pe.sum_to's column sums (TokenKernels.cpp): pe_colsum_partials over 64
  // row chunks, the last block of each group of 32 columns (kColumnBlock,
  // compiler/lib/CudaGen/OpKernelUtil.cpp) finishing it, and one chunk (the
  // launch for few rows); the ticket counters zeroed once, left at 0.
  const int64_t groups = (d + 31) / 32;
  arena.uploadVector(ticketAt, std::vector<int32_t>(size_t(groups), 0));
  std::array<int64_t, 3> first = {groups, chunks, 1}, single = {groups, 1, 1};
  for (auto [grid, n, at] : {std::tuple{&first, chunks, outAt},
                             std::tuple{&single, int64_t(1), outAt + d * 4}}) {
    uint64_t out = arena.at(at, d * 4);
    kernels.launch("pe_colsum_partials",
                   {KA::pointer(arena.at(partialAt, n * d * 4)),
                    KA::pointer(arena.at(xAt, x.size() * 4)), KA::integer(rows), KA::integer(d),
                    KA::integer(n), KA::integer(d), KA::pointer(arena.at(ticketAt, groups * 4)),
                    KA::pointer(out), KA::pointer(out), KA::integer(d)},
                   "test pe_colsum_partials", grid);
  }
  device->synchronize("test column sums");
  std::vector<float> sums = arena.downloadVector<float>(outAt, size_t(2 * d));
  for (int64_t c = 0; c < d; ++c) {
    double want = 0, magnitude = 0;
    for (int64_t r = 0; r < rows; ++r) {
      want += y[size_t(r * d + c)];
      magnitude += std::fabs(y[size_t(r * d + c)]);
    }
    EXPECT_NEAR(sums[size_t(c)], want, 1e-6 * magnitude + 1e-6) << "column " << c;
    // One f32 sum over all rows: the worst case of a sequential sum.
    EXPECT_NEAR(sums[size_t(d + c)], want, double(rows) * 0x1p-24 * magnitude + 1e-6)
        << "one chunk, column " << c;
  }
}

TEST(GpuGemm, StridedBatchedMatchesTheHost) {
  REQUIRE_DEVICE();
  auto device = cuda::Device::open();
  cuda::Gemm gemm(device);
  std::mt19937 rng(3);
  const int64_t M = 5, N = 7, K = 3, count = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool broadcastB : {false, true}) {
        std::vector<float> A = random(rng, size_t(count * M * K));
        std::vector<float> B = random(rng, size_t((broadcastB ? 1 : count) * K * N));
        std::vector<float> C0 = random(rng, size_t(count * M * N));
        cuda::Arena arena(device, 1 << 16);
        arena.uploadVector(0, A);
        arena.uploadVector(16384, B);
        arena.uploadVector(32768, C0);
        gemm.runStridedBatched(ta, tb, M, N, K, 0.5f, arena.at(0, A.size() * 4), M * K,
                               arena.at(16384, B.size() * 4), broadcastB ? 0 : K * N, 1.0f,
                               arena.at(32768, C0.size() * 4), M * N, count, "test gemm");
        device->synchronize("test gemm");
        std::vector<float> C = arena.downloadVector<float>(32768, C0.size());
        for (int64_t i = 0; i < count; ++i)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double want = C0[size_t(i * M * N + m * N + n)];
              for (int64_t k = 0; k < K; ++k) {
                float a = A[size_t(i * M * K + (ta ? k * M + m : m * K + k))];
                size_t bBase = broadcastB ? 0 : size_t(i * K * N);
                float b = B[bBase + size_t(tb ? n * K + k : k * N + n)];
                want += 0.5 * double(a) * b;
              }
              ASSERT_NEAR(C[size_t(i * M * N + m * N + n)], want, 1e-5)
                  << "ta " << ta << " tb " << tb << " batch " << i << " (" << m << ", " << n << ")";
            }
      }
}

/// Random inputs for `manifest` at `batch` (labels in [0, 10)).
struct RandomBatch {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<int32_t>> i32;
  std::map<std::string, HostTensor> inputs;
  RandomBatch(const Manifest &manifest, int64_t batch, std::mt19937 &rng) {
    f32.reserve(manifest.inputs.size());
    i32.reserve(manifest.inputs.size());
    for (const ManifestInput &in : manifest.inputs) {
      std::vector<int64_t> shape = in.shape;
      int64_t n = 1;
      for (int64_t &d : shape) {
        d = d < 0 ? batch : d;
        n *= d;
      }
      if (in.dtype == DType::F32) {
        f32.push_back(random(rng, size_t(n), 0.0f, 1.0f));
        inputs[in.name] = HostTensor(f32.back().data(), shape);
      } else {
        std::uniform_int_distribution<int32_t> label(0, 9);
        i32.emplace_back(size_t(n));
        for (int32_t &v : i32.back())
          v = label(rng);
        inputs[in.name] = HostTensor(i32.back().data(), shape);
      }
    }
  }
};

// The tests of vit_rope on the device: STRINGRT_CUDA_VIT_PACKAGE names a
// package of examples/vit_rope.pe compiled with --target=cuda. Each test
// starts with it loaded (`package`, its CUDA section in `section`), or is
// skipped without it or without a device.
class GpuDeviceExecutor : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    path = existingPathFromEnv("STRINGRT_CUDA_VIT_PACKAGE", why);
    if (path.empty())
      GTEST_SKIP() << why << " (a package of examples/vit_rope.pe, stringc --target=cuda)";
    REQUIRE_DEVICE();
    package.emplace(Package::load(path));
    ASSERT_NE(package->cuda(), nullptr) << path << " is not a cuda package";
    section = *package->cuda();
  }

  std::string path;
  std::optional<Package> package;
  CudaSection section;
};

// ZeRO-1 (zeroStage 1): the model made before the ranks join allocates no
// whole gradients or moments (joinRanks allocates this rank's slices), so
// the start-up's peak is not the replicated one; and nothing reads the
// state before the ranks join.
TEST_F(GpuDeviceExecutor, ZeroOneAllocatesNoWholeStateBeforeTheRanksJoin) {
  Model model(std::move(*package));
  model.initParameters();
  if (!emulatorBytesInUse())
    GTEST_SKIP() << "needs the emulator's count of device bytes";
  auto made = [&](int stage) {
    cuda::DeviceOptions options;
    options.zeroStage = stage;
    const size_t before = *emulatorBytesInUse();
    auto device = std::make_unique<cuda::DeviceModel>(model.manifest(), section,
                                                      model.parameters(), options);
    return std::pair{std::move(device), *emulatorBytesInUse() - before};
  };
  auto [replicated, replicatedBytes] = made(0);
  replicated.reset();
  auto [sharded, shardedBytes] = made(1);
  // vit_rope: AdamW, no EMA: the gradients, m and v, whole.
  ASSERT_EQ(model.manifest().optimizer.kind, OptimizerKind::AdamW);
  const size_t whole = size_t(cuda::deviceParameterLayout(model.manifest()).total) * 4;
  EXPECT_EQ(replicatedBytes - shardedBytes, 3 * whole)
      << replicatedBytes << " bytes replicated, " << shardedBytes << " with ZeRO-1";
  EXPECT_TRUE(failsWith([&] { sharded->optimizerStateBytes(); }, "",
                        {"the optimizer state's bytes with ZeRO-1 (zeroStage 1) before "
                         "joinRanks"}));
  std::mt19937 rng(3);
  RandomBatch batch(model.manifest(), 2, rng);
  EXPECT_TRUE(failsWith([&] { sharded->trainStep(batch.inputs, 1); }, "",
                        {"a training step with ZeRO-1 (zeroStage 1) before joinRanks"}));
}

TEST_F(GpuDeviceExecutor, VitRopeMatchesTheCpu) {
  Model model(std::move(*package));
  model.initParameters();
  std::unique_ptr<cuda::DeviceModel> device;
  try {
    device = std::make_unique<cuda::DeviceModel>(model.manifest(), section, model.parameters());
  } catch (const Error &error) {
    if (std::string(error.what()).find("have no GPU steps") != std::string::npos)
      GTEST_SKIP() << error.what();
    throw;
  }
  std::mt19937 rng(11);
  RandomBatch batch(model.manifest(), 16, rng);

  float gpuLoss = 0, cpuLoss = 0;
  std::vector<float> gpu, cpu;
  device->gradients(batch.inputs, gpuLoss, gpu);
  model.gradients(batch.inputs, cpuLoss, cpu);
  EXPECT_NEAR(gpuLoss, cpuLoss, 1e-4 * std::max(1.0f, std::fabs(cpuLoss)));
  for (const ParamSlot &slot : model.slots()) {
    if (slot.frozen)
      continue;
    double largest = 0, diff = 0;
    for (int64_t i = slot.offset; i < slot.offset + slot.size; ++i) {
      largest = std::max(largest, std::fabs(double(cpu[size_t(i)])));
      diff = std::max(diff, std::fabs(double(gpu[size_t(i)]) - cpu[size_t(i)]));
    }
    EXPECT_LE(diff, 2e-3 * largest + 1e-7) << "gradient of " << slot.name;
  }
  // The forward program too: the logits.
  auto outputs = device->forward(batch.inputs);
  auto cpuOutputs = model.run("forward", batch.inputs);
  ASSERT_TRUE(outputs.count("logits"));
  const std::vector<float> &logits = outputs.at("logits");
  const std::vector<float> &cpuLogits = cpuOutputs.at("logits").values;
  ASSERT_EQ(logits.size(), cpuLogits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    ASSERT_NEAR(logits[i], cpuLogits[i], 1e-4 * (1 + std::fabs(cpuLogits[i]))) << i;

  // Three training steps on both, on the same batches.
  std::vector<OptimizerSlot> slots = optimizerSlots(model);
  Optimizer optimizer(model.manifest().optimizer, slots, model.parameters().size());
  std::vector<float> startParams = model.parameters();
  cuda::DeviceModel trainer(model.manifest(), section, startParams);
  for (int step = 0; step < 3; ++step) {
    RandomBatch b(model.manifest(), 16, rng);
    float deviceLoss = trainer.trainStep(b.inputs, 3);
    float hostLoss = 0;
    std::vector<float> grads;
    model.gradients(b.inputs, hostLoss, grads);
    optimizer.step(model.parameters(), grads, 3);
    EXPECT_NEAR(deviceLoss, hostLoss, 1e-3 * std::max(1.0f, std::fabs(hostLoss))) << "step " << step;
  }
  EXPECT_EQ(trainer.stepCount(), 3);
  std::vector<float> after = trainer.parameters();
  double moved = 0;
  for (size_t i = 0; i < after.size(); ++i)
    moved = std::max(moved, std::fabs(double(after[i]) - startParams[i]));
  EXPECT_GT(moved, 0.0) << "AdamW did not move the parameters";
}

// The bias gradients of vit_rope (the head's and each layer's bo, b1, b2:
// 13) are their weight GEMMs' epilogue in the compiled package, and where
// cuBLASLt runs (the emulator's) the walk runs them as BGRADA matmuls
// (Gemm::chosenAlgorithms) and skips the sum_to; the gradients are the
// CPU's within VitRopeMatchesTheCpu's tolerance.
TEST_F(GpuDeviceExecutor, BiasGradientsAreTheWeightGemmsEpilogue) {
  int64_t fused = 0;
  const CudaProgramSteps &steps = *section.stepsOf("gradients");
  for (size_t e = 0; e < steps.ops.size(); ++e)
    for (const CudaLaunch &l : steps.ops[e].launches)
      if (l.gemm && l.gemm->epilogue == CudaGemmEpilogue::BiasGrad) {
        ++fused;
        ASSERT_LT(e + 1, steps.ops.size());
        EXPECT_EQ(package->manifest().gradients.ops[size_t(steps.ops[e].op)].op,
                  "pe.linear_grad_weight");
        EXPECT_EQ(package->manifest().gradients.ops[size_t(steps.ops[e + 1].op)].op,
                  "pe.sum_to");
      }
  EXPECT_EQ(fused, 13);
  Model model(std::move(*package));
  model.initParameters();
  cuda::DeviceModel device(model.manifest(), section, model.parameters());
  std::mt19937 rng(12);
  RandomBatch batch(model.manifest(), 8, rng);
  float gpuLoss = 0, cpuLoss = 0;
  std::vector<float> gpu, cpu;
  device.gradients(batch.inputs, gpuLoss, gpu);
  model.gradients(batch.inputs, cpuLoss, cpu);
  for (const ParamSlot &slot : model.slots()) {
    double largest = 0, diff = 0;
    for (int64_t i = slot.offset; i < slot.offset + slot.size; ++i) {
      largest = std::max(largest, std::fabs(double(cpu[size_t(i)])));
      diff = std::max(diff, std::fabs(double(gpu[size_t(i)]) - cpu[size_t(i)]));
    }
    EXPECT_LE(diff, 2e-3 * largest + 1e-7) << "gradient of " << slot.name;
  }
  std::vector<std::string> algorithms = device.gemmAlgorithms();
  if (algorithms.empty())
    GTEST_SKIP() << "cuBLASLt ran no GEMM (not loaded): the fallback ran";
  EXPECT_TRUE(std::any_of(algorithms.begin(), algorithms.end(), [](const std::string &line) {
    return line.find("+bias-gradient (BGRADA)") != std::string::npos;
  }));
}

// A kernel that faults (here: a launch of the step program told to cover far
// more elements than its buffers hold, what a wrong size in a step would do)
// is an error, never a crash: CUDA_ERROR_ILLEGAL_ADDRESS at the program's
// next wait by default, and, with DeviceOptions::syncEachLaunch, naming the
// op, the launch and the kernel.
// Only under the emulator: on a GPU the fault poisons the context for the
// rest of the process.
TEST_F(GpuDeviceExecutor, AFaultingKernelIsNamedWhenEachLaunchIsWaitedFor) {
  if (!emulatorCounters())
    GTEST_SKIP() << "faults a kernel: only under the host emulator (STRINGRT_CUDA_DRIVER)";
  // The first elementwise launch of @gradients: its size, far too large.
  std::string kernel, op;
  size_t opIndex = 0, launchIndex = 0;
  for (CudaProgramSteps &program : section.steps) {
    if (program.program != "gradients")
      continue;
    for (CudaOpSteps &steps : program.ops) {
      for (size_t l = 0; l < steps.launches.size() && kernel.empty(); ++l) {
        CudaLaunch &launch = steps.launches[l];
        if (launch.kernel < 0 ||
            section.kernels[size_t(launch.kernel)].grid != CudaGridRule::Elements)
          continue;
        for (CudaArg &arg : launch.args)
          if (arg.kind == CudaArgKind::I64) {
            arg.integer = {0, int64_t(1) << 26};
            kernel = section.kernels[size_t(launch.kernel)].name;
            opIndex = size_t(steps.op);
            launchIndex = l;
            break;
          }
      }
      if (!kernel.empty())
        break;
    }
  }
  ASSERT_FALSE(kernel.empty()) << "no elementwise launch in @gradients";
  Model model(std::move(*package));
  model.initParameters();
  op = model.manifest().program("gradients").ops[opIndex].op;
  std::mt19937 rng(5);
  RandomBatch batch(model.manifest(), 2, rng);
  float loss = 0;
  std::vector<float> grads;
  cuda::DeviceModel plain(model.manifest(), section, model.parameters());
  EXPECT_TRUE(failsWith([&] { plain.gradients(batch.inputs, loss, grads); }, "",
                        {"CUDA_ERROR_ILLEGAL_ADDRESS"}));
  cuda::DeviceOptions options;
  options.syncEachLaunch = true;
  cuda::DeviceModel checked(model.manifest(), section, model.parameters(), options);
  EXPECT_TRUE(failsWith([&] { checked.gradients(batch.inputs, loss, grads); }, "",
                        {fmt::format("gradients op {} ({}) launch {} (kernel {})", opIndex, op,
                                     launchIndex, kernel),
                         "CUDA_ERROR_ILLEGAL_ADDRESS"}));
  // The device model stays usable for what does not fault (the emulator,
  // unlike a GPU's context, recovers).
  cuda::DeviceModel good(model.manifest(), *Package::load(path).cuda(), model.parameters());
  good.gradients(batch.inputs, loss, grads);
  EXPECT_TRUE(std::isfinite(loss));
}

} // namespace
} // namespace stringrt::test
