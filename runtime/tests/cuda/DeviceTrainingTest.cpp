// The device training loop (DeviceTraining.h, DeviceExecutor.h): train() with
// the GPU as its backend, evaluation, checkpoints and resume, SGD, and the
// overlapped batch upload, on examples/vit_rope.pe (STRINGRT_CUDA_VIT_PACKAGE)
// and its SGD twin (STRINGRT_CUDA_VIT_SGD_PACKAGE, tests/cuda/CMakeLists.txt)
// with a few 28x28 images written here (batches of 2 to 4, a few steps, so
// that the tests take seconds under the host emulator).
//
// Tolerances and why:
// - the device against itself (resume vs an unbroken run, overlapped upload
//   vs not, graphs vs eager, evaluating twice): bitwise. Every kernel is
//   deterministic (no atomics; fixed reduction orders, the gradient norm's
//   too), and cuBLAS picks the same algorithm for the same shapes.
// - the device against the CPU: the kernels sum in other orders in f32
//   (the CPU's fast kernels too), so the evaluation loss is within 1e-4
//   relative and the accuracy equal; training losses within 1e-3 relative
//   after a few steps (as GpuDeviceExecutor.VitRopeMatchesTheCpu).
//
// Without a device the GPU tests skip; refusing bad checkpoints needs none
// (the trainer validates the checkpoint before the device is opened).
#include "EmulatorCounters.h"
#include "GpuKernelSession.h"
#include "TestFiles.h"

#include "stringrt/Checkpoint.h"
#include "stringrt/Error.h"
#include "stringrt/Model.h"
#include "stringrt/OpProfile.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Package.h"
#include "stringrt/Trainer.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/DeviceExecutor.h"
#include "stringrt/cuda/DeviceTraining.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace stringrt::test {
namespace {

std::string bigEndian(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[size_t(i)] = char((v >> (24 - 8 * i)) & 0xFF);
  return s;
}

// `count` 28x28 images (random pixels, class c brightens row 2c) and labels.
void writeImages(const std::string &dir, const std::string &prefix, uint32_t count,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pixel(0, 120);
  std::string images = std::string("\0\0\x08\x03", 4) + bigEndian(count) + bigEndian(28) +
                       bigEndian(28);
  std::string labels = std::string("\0\0\x08\x01", 4) + bigEndian(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t c = (i * 7 + seed) % 10;
    for (uint32_t y = 0; y < 28; ++y)
      for (uint32_t x = 0; x < 28; ++x)
        images += char(y == 2 * c ? 255 : pixel(rng));
    labels += char(c);
  }
  writeFile(dir + "/" + prefix + "-images-idx3-ubyte", images);
  writeFile(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
}

// Every step's loss and every checkpoint.
struct Recorder : TrainObserver {
  std::vector<float> losses;
  std::vector<int64_t> checkpoints;
  std::vector<EvalResult> evals;
  void onStep(const TrainPlan &, const StepReport &r) override {
    losses.push_back(float(r.loss));
  }
  void onEval(const TrainPlan &, int64_t, const EvalResult &e) override { evals.push_back(e); }
  void onCheckpoint(const TrainPlan &, const std::string &, int64_t step) override {
    checkpoints.push_back(step);
  }
};

// A package, 12 train and 6 test images, and the device (or why to skip).
class DeviceTraining : public ::testing::Test {
protected:
  // "" when the test can run; else the reason to skip.
  std::string open(const char *variable = "STRINGRT_CUDA_VIT_PACKAGE", bool needDevice = true) {
    std::string why;
    std::string path = existingPathFromEnv(variable, why);
    if (path.empty())
      return why;
    if (needDevice) {
      why = cuda::unavailableReason();
      if (!why.empty())
        return "no CUDA device: " + why;
    }
    package = std::make_unique<Package>(Package::load(path));
    if (!package->cuda())
      return path + " is not a cuda package";
    section = *package->cuda();
    data = dir.path().string() + "/data";
    std::filesystem::create_directory(data);
    writeImages(data, "train", 12, 1);
    writeImages(data, "t10k", 6, 2);
    return "";
  }

  Model model() { return Model(*package); }

  // Kernel groups against a launch a layer (defined below the tests' helpers).
  void expectTheBitsOfOneLaunchALayer(const char *groupedVariable, const char *ungroupedVariable,
                                      const std::vector<std::string> &groups);

  // train() on the GPU (or the CPU with cpu = true).
  TrainResult run(Model &m, TrainOptions options, Recorder &recorder, bool cpu = false,
                  cuda::DeviceOptions device = {}) {
    DataSet set = loadModelData(m, data);
    if (cpu)
      return train(m, set, options, &recorder);
    cuda::DeviceTrainBackend backend(m.manifest(), section, device);
    return train(m, set, options, &recorder, &backend);
  }

  TempDir dir;
  std::unique_ptr<Package> package;
  CudaSection section;
  std::string data;
};

#define OPEN_OR_SKIP(...)                                                                          \
  do {                                                                                             \
    std::string why = open(__VA_ARGS__);                                                           \
    if (!why.empty())                                                                              \
      GTEST_SKIP() << why;                                                                         \
  } while (0)

TrainOptions steps(int64_t total, int64_t batch = 2) {
  TrainOptions o;
  o.steps = total;
  o.batch = batch;
  o.seed = 5;
  o.evaluate = false;
  return o;
}

TEST_F(DeviceTraining, EvaluationMatchesTheCpu) {
  OPEN_OR_SKIP();
  Model m = model();
  m.initParameters();
  DataSet set = loadModelData(m, data);
  EvalResult cpu = evaluate(m, set, 4); // batches of 4 and 2
  cuda::DeviceTrainBackend backend(m.manifest(), section);
  backend.start(m.parameters(), Optimizer(m.manifest().optimizer, optimizerSlots(m),
                                          m.parameters().size()));
  EvalResult gpu = backend.evaluate(set, 4);
  EXPECT_EQ(gpu.examples, cpu.examples);
  EXPECT_NEAR(gpu.loss, cpu.loss, 1e-4 * std::max(1.0, std::fabs(cpu.loss)));
  ASSERT_TRUE(gpu.accuracy && cpu.accuracy);
  EXPECT_EQ(*gpu.accuracy, *cpu.accuracy);
  // Again (from the second batch of a size on, CUDA graph replays), and
  // without graphs: the same bits.
  EvalResult again = backend.evaluate(set, 4);
  EXPECT_EQ(again.loss, gpu.loss);
  EXPECT_EQ(*again.accuracy, *gpu.accuracy);
  cuda::DeviceOptions eager;
  eager.graphs = false;
  eager.overlapUpload = false;
  cuda::DeviceTrainBackend plain(m.manifest(), section, eager);
  plain.start(m.parameters(), Optimizer(m.manifest().optimizer, optimizerSlots(m),
                                        m.parameters().size()));
  EvalResult slow = plain.evaluate(set, 4);
  EXPECT_EQ(slow.loss, gpu.loss);
  EXPECT_EQ(*slow.accuracy, *gpu.accuracy);
}

// DeviceOptions::profile (stringrun bench --device cuda --profile): every op
// of @gradients, the gradient copies and the optimizer timed once per step,
// by kind, and the same losses as without it (bitwise: graphs off only).
TEST_F(DeviceTraining, ProfileTimesEveryOpOfTheStepWithoutChangingIt) {
  OPEN_OR_SKIP();
  OpProfile profile;
  cuda::DeviceOptions timed;
  timed.profile = &profile;
  Model plainModel = model(), timedModel = model();
  Recorder plain, profiled;
  run(plainModel, steps(3), plain);
  run(timedModel, steps(3), profiled, /*cpu=*/false, timed);
  ASSERT_EQ(plain.losses.size(), 3u);
  EXPECT_EQ(profiled.losses, plain.losses);
  std::map<std::string, int64_t> perStep;
  for (const ProgramOp &op : plainModel.manifest().gradients.ops)
    if (op.op != "pe.get_param" && op.op != "arith.constant")
      ++perStep[op.op];
  perStep["gradient copies"] = 1;
  perStep["optimizer"] = 1;
  std::map<std::string, OpTime> totals = profile.totals();
  EXPECT_EQ(totals.size(), perStep.size());
  for (const auto &[kind, count] : perStep) {
    EXPECT_EQ(totals[kind].calls, 3 * count) << kind;
    EXPECT_GE(totals[kind].seconds, 0.0) << kind;
  }
  EXPECT_GT(profile.totalSeconds(), 0.0);
}

TEST_F(DeviceTraining, TrainingMatchesTheCpuAndEvaluatesOnTheDevice) {
  OPEN_OR_SKIP();
  TrainOptions o = steps(4);
  o.evaluate = true; // after the epoch's last step (6 steps an epoch: at the end)
  Model gpuModel = model(), cpuModel = model();
  Recorder gpu, cpu;
  run(gpuModel, o, gpu);
  run(cpuModel, o, cpu, /*cpu=*/true);
  ASSERT_EQ(gpu.losses.size(), 4u);
  ASSERT_EQ(cpu.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * std::max(1.0f, std::fabs(cpu.losses[i])))
        << "step " << i + 1;
  ASSERT_EQ(gpu.evals.size(), 1u);
  ASSERT_EQ(cpu.evals.size(), 1u);
  EXPECT_NEAR(gpu.evals[0].loss, cpu.evals[0].loss, 1e-3 * std::max(1.0, cpu.evals[0].loss));
  // train() leaves the trained parameters in the model.
  double moved = 0;
  Model fresh = model();
  fresh.initParameters();
  for (size_t i = 0; i < fresh.parameters().size(); ++i)
    moved = std::max(moved, std::fabs(double(gpuModel.parameters()[i]) - fresh.parameters()[i]));
  EXPECT_GT(moved, 0.0);
}

TEST_F(DeviceTraining, ResumedTrainingIsBitwiseTheUnbrokenRun) {
  OPEN_OR_SKIP();
  // Unbroken: 7 steps (an epoch is 6: the run crosses into epoch 2).
  Model whole = model();
  Recorder unbroken;
  TrainOptions o = steps(7);
  o.checkpointPath = dir.file("whole.ckpt");
  run(whole, o, unbroken);
  ASSERT_EQ(unbroken.losses.size(), 7u);
  EXPECT_EQ(unbroken.checkpoints, (std::vector<int64_t>{6, 7}));
  // Stopped after step 3, resumed to the end.
  Model first = model();
  Recorder part1, part2;
  TrainOptions stop = steps(7);
  stop.stopAfter = 3;
  stop.checkpointPath = dir.file("part.ckpt");
  run(first, stop, part1);
  EXPECT_EQ(part1.checkpoints, (std::vector<int64_t>{3}));
  EXPECT_EQ(readCheckpointInfo(stop.checkpointPath).step, 3);
  Model second = model();
  TrainOptions resume;
  resume.resumePath = stop.checkpointPath;
  resume.checkpointPath = dir.file("resumed.ckpt");
  resume.evaluate = false;
  run(second, resume, part2);
  std::vector<float> losses = part1.losses;
  losses.insert(losses.end(), part2.losses.begin(), part2.losses.end());
  ASSERT_EQ(losses.size(), 7u);
  for (size_t i = 0; i < 7; ++i)
    EXPECT_EQ(losses[i], unbroken.losses[i]) << "step " << i + 1;
  EXPECT_EQ(second.parameters(), whole.parameters());
  // The checkpoints hold the same parameters and optimizer state.
  std::vector<OptimizerSlot> slots = optimizerSlots(whole);
  Optimizer a(whole.manifest().optimizer, slots, whole.parameters().size());
  Optimizer b(whole.manifest().optimizer, slots, whole.parameters().size());
  std::vector<float> pa(whole.parameters().size()), pb(pa.size());
  loadCheckpoint(o.checkpointPath, whole.manifest().model, slots, pa, a);
  loadCheckpoint(resume.checkpointPath, whole.manifest().model, slots, pb, b);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(a.stepCount(), 7);
  EXPECT_EQ(b.stepCount(), 7);
  for (size_t i = 0; i < a.stateBuffers().size(); ++i)
    EXPECT_EQ(*a.stateBuffers()[i].values, *b.stateBuffers()[i].values)
        << a.stateBuffers()[i].prefix;
}

// The kernels of the kernel groups of a package's steps
// (CudaLaunch::groupSize), program by program in step order, each followed
// by the later launches its first member runs as grouped GEMMs (a group of
// first launches: "gemm launch L xN").
std::vector<std::string> kernelGroups(const CudaSection &section) {
  std::vector<std::string> groups;
  for (const CudaProgramSteps &program : section.steps)
    for (const CudaOpSteps &op : program.ops)
      for (size_t l = 0; l < op.launches.size(); ++l) {
        const CudaLaunch &launch = op.launches[l];
        if (launch.groupSize > 1)
          groups.push_back(program.program + " " + section.kernels[size_t(launch.kernel)].name +
                           " x" + std::to_string(launch.groupSize));
        if (l > 0 && launch.gemm && launch.gemm->groupSize > 1)
          groups.push_back(program.program + " gemm launch " + std::to_string(l) + " x" +
                           std::to_string(launch.gemm->groupSize));
      }
  return groups;
}

// The number of grouped GEMMs of a package's steps of one op alone
// (CudaGemm::groupSize on an op's only launch), program by program.
std::vector<int64_t> wholeGemmGroups(const CudaSection &section) {
  std::vector<int64_t> sizes;
  for (const CudaProgramSteps &program : section.steps)
    for (const CudaOpSteps &op : program.ops)
      if (op.launches.size() == 1 && op.launches[0].gemm && op.launches[0].gemm->groupSize > 1)
        sizes.push_back(op.launches[0].gemm->groupSize);
  return sizes;
}

// Trains the package of `groupedVariable`, whose kernel groups are
// `groups`, and that of `ungroupedVariable` (the same model without
// pe-cluster-cayley: no group) 3 steps each: the same losses and
// parameters, bit for bit. Skips where either package (or the device) is
// missing.
void DeviceTraining::expectTheBitsOfOneLaunchALayer(const char *groupedVariable,
                                                    const char *ungroupedVariable,
                                                    const std::vector<std::string> &groups) {
  OPEN_OR_SKIP(groupedVariable);
  EXPECT_EQ(kernelGroups(section), groups);
  Model grouped = model();
  Recorder withGroups;
  TrainOptions o = steps(3);
  o.evaluate = false;
  run(grouped, o, withGroups);
  OPEN_OR_SKIP(ungroupedVariable);
  EXPECT_TRUE(kernelGroups(section).empty());
  Model ungrouped = model();
  Recorder without;
  run(ungrouped, o, without);
  ASSERT_EQ(withGroups.losses.size(), 3u);
  EXPECT_EQ(withGroups.losses, without.losses);
  EXPECT_TRUE(std::isfinite(withGroups.losses.back()));
  EXPECT_EQ(grouped.parameters(), ungrouped.parameters());
}

// vit_cayley's skew builders, Cayley weights, Cayley weight gradients' first
// launches (M from W, then each layer's GEMMs) and skew gradients, one
// launch a kind for the four layers (pe-cluster-cayley; kernel groups of
// pe_skews, pe_cayley_weights, pe_cayley_inverses_of_weight and
// pe_skew_grads), train as the package without the pass (a launch a
// layer): the same losses and parameters, bit for bit.
TEST_F(DeviceTraining, CayleyWeightGroupsGiveTheBitsOfOneLaunchALayer) {
  expectTheBitsOfOneLaunchALayer(
      "STRINGRT_CUDA_CAYLEY_PACKAGE", "STRINGRT_CUDA_CAYLEY_UNGROUPED_PACKAGE",
      {"forward pe_skews x4", "forward pe_cayley_weights x4", "gradients pe_skews x4",
       "gradients pe_cayley_weights x4", "gradients pe_cayley_inverses_of_weight x4",
       "gradients gemm launch 1 x4", "gradients gemm launch 2 x4", "gradients pe_skew_grads x4"});
}

// vit_sparse_cayley's sparse skew builders and their gradients (one
// support for the four layers, the group's constant), and its Cayley weight
// gradients' first launches, one launch a kind: the bits of a launch a
// layer.
TEST_F(DeviceTraining, SparseSkewGroupsGiveTheBitsOfOneLaunchALayer) {
  expectTheBitsOfOneLaunchALayer(
      "STRINGRT_CUDA_SPARSE_CAYLEY_PACKAGE", "STRINGRT_CUDA_SPARSE_CAYLEY_UNGROUPED_PACKAGE",
      {"forward pe_sparse_skews x4", "forward pe_cayley_weights x4",
       "gradients pe_sparse_skews x4", "gradients pe_cayley_weights x4",
       "gradients pe_cayley_inverses_of_weight x4", "gradients gemm launch 1 x4",
       "gradients gemm launch 2 x4", "gradients pe_sparse_skew_grads x4"});
}

// vit_string's kernel groups as vit_cayley's, and its folded weights
// (W_Q U and W_K U of the four layers, one grouped GEMM of 8) and their
// gradients (the layers' W^T dW' products, one of 8, and the parameters'
// dW' U^T, one of 8), each of them a layer's GEMMs (of 2 or 1) without
// pe-cluster-cayley: the same losses and parameters, bit for bit.
TEST_F(DeviceTraining, StringFoldGroupsGiveTheBitsOfOneLaunchALayer) {
  OPEN_OR_SKIP("STRINGRT_CUDA_STRING_PACKAGE");
  std::vector<int64_t> sizes = wholeGemmGroups(section);
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), int64_t(8)), 4) // 1 forward, 3 gradients
      << ::testing::PrintToString(sizes);
  expectTheBitsOfOneLaunchALayer(
      "STRINGRT_CUDA_STRING_PACKAGE", "STRINGRT_CUDA_STRING_UNGROUPED_PACKAGE",
      {"forward pe_skews x4", "forward pe_cayley_weights x4", "gradients pe_skews x4",
       "gradients pe_cayley_weights x4", "gradients pe_cayley_inverses_of_weight x4",
       "gradients gemm launch 1 x4", "gradients gemm launch 2 x4", "gradients pe_skew_grads x4"});
}

TEST_F(DeviceTraining, CheckpointsMoveBetweenTheCpuAndTheGpu) {
  OPEN_OR_SKIP();
  // Three steps on the CPU, then the rest on the GPU and, for reference, on
  // the CPU; and a GPU checkpoint continued on the CPU.
  Model cpuFirst = model();
  Recorder warmup;
  TrainOptions stop = steps(6);
  stop.stopAfter = 3;
  stop.checkpointPath = dir.file("cpu.ckpt");
  run(cpuFirst, stop, warmup, /*cpu=*/true);
  TrainOptions resume;
  resume.resumePath = stop.checkpointPath;
  resume.evaluate = false;
  Model onGpu = model(), onCpu = model();
  Recorder gpu, cpu;
  resume.checkpointPath = dir.file("gpu-end.ckpt");
  run(onGpu, resume, gpu);
  resume.checkpointPath = dir.file("cpu-end.ckpt");
  run(onCpu, resume, cpu, /*cpu=*/true);
  ASSERT_EQ(gpu.losses.size(), 3u);
  ASSERT_EQ(cpu.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * std::max(1.0f, std::fabs(cpu.losses[i])))
        << "step " << i + 4;
  // The GPU's checkpoint is an ordinary one: the CPU reads it.
  Model back = model();
  std::vector<OptimizerSlot> slots = optimizerSlots(back);
  Optimizer state(back.manifest().optimizer, slots, back.parameters().size());
  CheckpointInfo info = loadCheckpoint(dir.file("gpu-end.ckpt"), back.manifest().model, slots,
                                       back.parameters(), state);
  EXPECT_EQ(info.step, 6);
  EXPECT_EQ(state.stepCount(), 6);
  EXPECT_EQ(back.parameters(), onGpu.parameters());
  // ... and continues from it (a longer run of the same batch and seed).
  Model further = model();
  Recorder more;
  TrainOptions longer;
  longer.resumePath = dir.file("gpu-end.ckpt");
  longer.steps = 8;
  longer.evaluate = false;
  run(further, longer, more, /*cpu=*/true);
  ASSERT_EQ(more.losses.size(), 2u);
  EXPECT_TRUE(std::isfinite(more.losses[0]) && std::isfinite(more.losses[1]));
}

TEST_F(DeviceTraining, OverlappedUploadAndGraphsChangeNoBits) {
  OPEN_OR_SKIP();
  std::vector<std::vector<float>> losses, params;
  for (bool overlap : {true, false})
    for (bool graphs : {true, false}) {
      cuda::DeviceOptions device;
      device.overlapUpload = overlap;
      device.graphs = graphs;
      Model m = model();
      Recorder r;
      run(m, steps(4), r, false, device);
      losses.push_back(r.losses);
      params.push_back(m.parameters());
    }
  for (size_t i = 1; i < losses.size(); ++i) {
    EXPECT_EQ(losses[i], losses[0]) << "configuration " << i;
    EXPECT_EQ(params[i], params[0]) << "configuration " << i;
  }
}

// Augmentation in a kernel as each batch enters its step (the package has
// pe_augment_images: its first input is a batch of images) gives the bits
// of the host's augmentation, with and without the overlapped upload (two
// paths into the kernel) and in micro-batches; and it augments: the losses
// are not those of the plain run.
TEST_F(DeviceTraining, AugmentationOnTheDeviceIsTheHostsBits) {
  OPEN_OR_SKIP();
  ASSERT_TRUE(section.find(kAugmentImagesKernel));
  TrainOptions o = steps(4, 4);
  o.augment = AugmentPolicy{};
  o.augment->cropPadding = 3;
  o.augment->flipProbability = 0.5;
  o.augment->eraseProbability = 0.75;
  struct Variant {
    bool onDevice, overlap;
    int64_t accumulate;
  };
  std::vector<std::vector<float>> losses, params;
  for (Variant v : {Variant{true, true, 1}, Variant{true, false, 1}, Variant{false, true, 1},
                    Variant{true, true, 2}, Variant{false, true, 2}}) {
    cuda::DeviceOptions device;
    device.augmentOnDevice = v.onDevice;
    device.overlapUpload = v.overlap;
    TrainOptions options = o;
    options.accumulate = v.accumulate;
    Model m = model();
    Recorder r;
    TrainResult result = run(m, options, r, false, device);
    EXPECT_EQ(result.plan.augmentOnBackend, v.onDevice);
    ASSERT_EQ(r.losses.size(), 4u);
    losses.push_back(r.losses);
    params.push_back(m.parameters());
  }
  for (size_t i : {1, 2}) {
    EXPECT_EQ(losses[i], losses[0]) << "variant " << i;
    EXPECT_EQ(params[i], params[0]) << "variant " << i;
  }
  EXPECT_EQ(losses[3], losses[4]) << "accumulated";
  EXPECT_EQ(params[3], params[4]) << "accumulated";
  Model plain = model();
  Recorder r;
  run(plain, steps(4, 4), r);
  EXPECT_NE(r.losses, losses[0]);
}

// Gradient accumulation on the device (TrainOptions::accumulate): batches of
// 4 in micro-batches of 2, 1 and 1 (two sizes: two programs' buffers in one
// step) follow the CPU trainer's accumulated run and the device's own
// whole-batch run within float rounding; without graphs and the overlapped
// upload, the same bits.
TEST_F(DeviceTraining, AccumulatedStepsFollowTheCpuAndTheWholeBatch) {
  OPEN_OR_SKIP();
  TrainOptions o = steps(3, 4); // 3 steps an epoch
  o.accumulate = 3;
  Model gpuModel = model(), cpuModel = model(), wholeModel = model();
  Recorder gpu, cpu, whole;
  run(gpuModel, o, gpu);
  run(cpuModel, o, cpu, /*cpu=*/true);
  run(wholeModel, steps(3, 4), whole);
  ASSERT_EQ(gpu.losses.size(), 3u);
  ASSERT_EQ(cpu.losses.size(), 3u);
  ASSERT_EQ(whole.losses.size(), 3u);
  // The first loss is before any update: the batch's mean, weighted by the
  // micro-batches' sizes.
  EXPECT_NEAR(gpu.losses[0], cpu.losses[0], 1e-5 * std::fabs(cpu.losses[0]));
  EXPECT_NEAR(gpu.losses[0], whole.losses[0], 1e-5 * std::fabs(cpu.losses[0]));
  for (size_t i = 0; i < 3; ++i) {
    const float scale = std::max(1.0f, std::fabs(cpu.losses[i]));
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * scale) << "step " << i + 1;
    EXPECT_NEAR(gpu.losses[i], whole.losses[i], 1e-3 * scale) << "step " << i + 1;
  }
  // Not the whole batch's bits: the micro-batches really ran.
  EXPECT_NE(gpu.losses, whole.losses);
  double fromCpu = 0, fromWhole = 0;
  for (size_t i = 0; i < gpuModel.parameters().size(); ++i) {
    fromCpu = std::max(fromCpu, std::fabs(double(gpuModel.parameters()[i]) -
                                          cpuModel.parameters()[i]));
    fromWhole = std::max(fromWhole, std::fabs(double(gpuModel.parameters()[i]) -
                                              wholeModel.parameters()[i]));
  }
  EXPECT_LT(fromCpu, 1e-3);
  EXPECT_LT(fromWhole, 1e-3);
  cuda::DeviceOptions eager;
  eager.overlapUpload = false;
  eager.graphs = false;
  Model eagerModel = model();
  Recorder eagerRun;
  run(eagerModel, o, eagerRun, /*cpu=*/false, eager);
  EXPECT_EQ(eagerRun.losses, gpu.losses);
  EXPECT_EQ(eagerModel.parameters(), gpuModel.parameters());
}

TEST_F(DeviceTraining, SgdMatchesTheCpuTrainer) {
  OPEN_OR_SKIP("STRINGRT_CUDA_VIT_SGD_PACKAGE");
  ASSERT_EQ(package->manifest().optimizer.kind, OptimizerKind::Sgd);
  ASSERT_GT(package->manifest().optimizer.momentum, 0.0);
  Model gpuModel = model(), cpuModel = model();
  Recorder gpu, cpu;
  TrainOptions o = steps(4);
  o.checkpointPath = dir.file("sgd.ckpt");
  run(gpuModel, o, gpu);
  o.checkpointPath = "";
  run(cpuModel, o, cpu, /*cpu=*/true);
  ASSERT_EQ(gpu.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * std::max(1.0f, std::fabs(cpu.losses[i])))
        << "step " << i + 1;
  // The checkpoint holds the momentum ("sgd.u.").
  Model back = model();
  std::vector<OptimizerSlot> slots = optimizerSlots(back);
  Optimizer state(back.manifest().optimizer, slots, back.parameters().size());
  loadCheckpoint(dir.file("sgd.ckpt"), back.manifest().model, slots, back.parameters(), state);
  ASSERT_EQ(state.stateBuffers().size(), 1u);
  EXPECT_EQ(state.stateBuffers()[0].prefix, "sgd.u.");
  double largest = 0;
  for (float u : *state.stateBuffers()[0].values)
    largest = std::max(largest, std::fabs(double(u)));
  EXPECT_GT(largest, 0.0);
}

// ---------------------------------------------------------------------------
// The step itself: on the device from end to end, queued ahead of the host.

// The first `count` train images of the fixture as model inputs, `batch` at a time.
std::vector<std::map<std::string, HostTensor>> inputBatches(const Model &m, const DataSet &set,
                                                            std::vector<Batch> &keep, int64_t count,
                                                            int64_t batch) {
  std::vector<int64_t> order = epochOrder(set.count(Split::Train), 3, 0);
  std::vector<std::map<std::string, HostTensor>> out;
  keep.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    keep.push_back(set.batch(Split::Train, order.data() + (i * batch) % 12, size_t(batch)));
    out.push_back(modelInputs(m, keep.back()));
  }
  return out;
}

// From the third step at a batch size (the first runs eagerly, the second is
// captured) queueing a step launches one CUDA graph (gradients, the norm,
// the optimizer's scalars and the optimizer) and no kernel, and waits for
// nothing; collecting it waits once. Counted by the host emulator.
TEST_F(DeviceTraining, AQueuedStepIsOneGraphLaunchAndNoHostWait) {
  OPEN_OR_SKIP();
  Model m = model();
  m.initParameters();
  DataSet set = loadModelData(m, data);
  if (!emulatorCounters())
    GTEST_SKIP() << "counts the host emulator's driver calls (STRINGRT_CUDA_DRIVER)";
  std::vector<Batch> keep;
  auto batches = inputBatches(m, set, keep, 4, 2);
  cuda::DeviceModel device(m.manifest(), section, m.parameters());
  float loss = 0;
  for (int i = 0; i < 2; ++i) {
    device.stage(batches[size_t(i)]);
    device.trainStaged(10, loss);
  }
  device.stage(batches[2]);
  auto before = *emulatorCounters();
  device.queueStep(10);
  auto queued = *emulatorCounters();
  EXPECT_EQ(queued[0] - before[0], 0u) << "kernel launches while queueing a step";
  EXPECT_EQ(queued[1] - before[1], 1u) << "graph launches while queueing a step";
  EXPECT_EQ(queued[2] - before[2], 0u) << "host waits while queueing a step";
  cuda::StepOutcome outcome = device.collectStep();
  auto collected = *emulatorCounters();
  EXPECT_EQ(collected[2] - queued[2], 1u) << "host waits to collect a step";
  EXPECT_TRUE(outcome.applied);
  EXPECT_EQ(outcome.info.step, 3);
  EXPECT_EQ(device.stepCount(), 3);
}

// With SGD the update is linear in the gradient, so the accumulated
// gradients themselves are compared: the device's update over two steps is
// the CPU trainer's accumulated one within float rounding, relative to its
// size (AdamW's normalised update would hide a wrongly weighted sum).
TEST_F(DeviceTraining, AccumulatedSgdStepsMoveTheParametersAsTheCpu) {
  OPEN_OR_SKIP("STRINGRT_CUDA_VIT_SGD_PACKAGE");
  TrainOptions o = steps(2, 4);
  o.accumulate = 3;
  Model start = model(), gpuModel = model(), cpuModel = model();
  start.initParameters();
  Recorder gpu, cpu;
  run(gpuModel, o, gpu);
  run(cpuModel, o, cpu, /*cpu=*/true);
  double largest = 0, error = 0;
  for (size_t i = 0; i < start.parameters().size(); ++i) {
    const double want = double(cpuModel.parameters()[i]) - start.parameters()[i];
    const double got = double(gpuModel.parameters()[i]) - start.parameters()[i];
    largest = std::max(largest, std::fabs(want));
    error = std::max(error, std::fabs(got - want));
  }
  EXPECT_GT(largest, 0.0);
  EXPECT_LT(error, 1e-3 * largest) << "largest update " << largest;
}

// The device model refuses a split finer than the staged batch before
// touching it; the batch stays staged for a step that fits.
TEST_F(DeviceTraining, AnAccumulationFinerThanTheBatchIsRefused) {
  OPEN_OR_SKIP();
  Model m = model();
  m.initParameters();
  DataSet set = loadModelData(m, data);
  std::vector<Batch> keep;
  auto batches = inputBatches(m, set, keep, 1, 2);
  cuda::DeviceModel device(m.manifest(), section, m.parameters());
  device.stage(batches[0]);
  try {
    device.queueStep(4, 3);
    ADD_FAILURE() << "a batch of 2 split into 3 micro-batches was queued";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot split a batch of 2 into 3 micro-batches"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(device.hasStagedBatch());
  device.queueStep(4, 2);
  EXPECT_TRUE(std::isfinite(device.collectStep().loss));
}

// Queueing a step before collecting the previous one changes nothing: the
// same losses, scalars and parameters, bitwise, as one step at a time; a
// third step is refused while two are in flight.
TEST_F(DeviceTraining, StepsQueuedAheadGiveTheSameBits) {
  OPEN_OR_SKIP();
  Model m = model();
  m.initParameters();
  DataSet set = loadModelData(m, data);
  std::vector<Batch> keep;
  auto batches = inputBatches(m, set, keep, 6, 2);
  const int64_t total = 8;

  cuda::DeviceModel oneByOne(m.manifest(), section, m.parameters());
  std::vector<cuda::StepOutcome> want;
  for (const auto &inputs : batches) {
    oneByOne.stage(inputs);
    oneByOne.queueStep(total);
    want.push_back(oneByOne.collectStep());
  }

  cuda::DeviceModel ahead(m.manifest(), section, m.parameters());
  std::vector<cuda::StepOutcome> got;
  for (const auto &inputs : batches) {
    ahead.stage(inputs);
    if (ahead.stepsInFlight() == cuda::kStepsInFlight) {
      EXPECT_THROW(ahead.queueStep(total), Error);
      EXPECT_TRUE(ahead.hasStagedBatch()); // the refused step consumed nothing
      got.push_back(ahead.collectStep());
    }
    ahead.queueStep(total);
  }
  while (ahead.stepsInFlight() > 0)
    got.push_back(ahead.collectStep());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].loss, want[i].loss) << "step " << i + 1;
    EXPECT_EQ(got[i].info.step, int64_t(i + 1));
    EXPECT_EQ(got[i].info.lr, want[i].info.lr) << "step " << i + 1;
    EXPECT_EQ(got[i].info.gradNorm, want[i].info.gradNorm) << "step " << i + 1;
    EXPECT_EQ(got[i].info.lr, learningRate(m.manifest().optimizer, int64_t(i + 1), total));
  }
  EXPECT_EQ(ahead.parameters(), oneByOne.parameters());
  EXPECT_EQ(ahead.stepCount(), int64_t(batches.size()));
}

// Dropout and drop-path on the device (STRINGRT_CUDA_VIT_DROPOUT_PACKAGE:
// vit_rope with both in every block): each step draws the masks the CPU
// draws at that step (the step key {seed, step, 0}, written before every
// step, the graph replays included), so the losses follow the CPU's step
// by step; and a run stopped and resumed is bitwise the unbroken one.
TEST_F(DeviceTraining, DropoutFollowsTheCpuStepByStepAndResumesBitwise) {
  OPEN_OR_SKIP("STRINGRT_CUDA_VIT_DROPOUT_PACKAGE");
  ASSERT_TRUE(section.usesStepKey());
  const int64_t total = 5;
  Model gpuModel = model(), cpuModel = model();
  Recorder gpu, cpu;
  run(gpuModel, steps(total), gpu);
  run(cpuModel, steps(total), cpu, /*cpu=*/true);
  ASSERT_EQ(gpu.losses.size(), size_t(total));
  ASSERT_EQ(cpu.losses.size(), size_t(total));
  for (size_t i = 0; i < size_t(total); ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-4 * std::max(1.0f, std::fabs(cpu.losses[i])))
        << "step " << i + 1;
  // The key reaches the device: another step's masks give another loss,
  // and the first key again the first loss, bit for bit.
  Model m = model();
  m.initParameters();
  DataSet set = loadModelData(m, data);
  std::vector<Batch> keep;
  auto batches = inputBatches(m, set, keep, 1, 2);
  cuda::DeviceModel device(m.manifest(), section, m.parameters());
  auto lossAt = [&](const StepKey &key) {
    float loss = 0;
    std::vector<float> grads;
    device.setStepKey(key);
    device.gradients(batches[0], loss, grads);
    return loss;
  };
  const float step0 = lossAt({5, 0, 0});
  EXPECT_NE(lossAt({5, 1, 0}), step0);
  EXPECT_NE(lossAt({(uint64_t(1) << 32) + 5, 0, 0}), step0); // the seed's high word
  EXPECT_EQ(lossAt({5, 0, 0}), step0);
  EXPECT_THROW(lossAt({5, int64_t(1) << 32, 0}), Error); // outside the masks' domain

  Model first = model(), second = model();
  Recorder part1, part2;
  TrainOptions stop = steps(total);
  stop.stopAfter = 2;
  stop.checkpointPath = dir.file("dropout.ckpt");
  run(first, stop, part1);
  TrainOptions resume;
  resume.resumePath = stop.checkpointPath;
  resume.evaluate = false;
  run(second, resume, part2);
  std::vector<float> losses = part1.losses;
  losses.insert(losses.end(), part2.losses.begin(), part2.losses.end());
  EXPECT_EQ(losses, gpu.losses);
  EXPECT_EQ(second.parameters(), gpuModel.parameters());

  // Accumulated (batches of 4 in 2, 1, 1): each micro-batch draws the masks
  // of its rows of the whole batch, as on the CPU; the run resumes bitwise.
  const int64_t partSteps = 3;
  TrainOptions parts = steps(partSteps, 4);
  parts.accumulate = 3;
  Model gpuParts = model(), cpuParts = model();
  Recorder gotParts, wantParts;
  run(gpuParts, parts, gotParts);
  run(cpuParts, parts, wantParts, /*cpu=*/true);
  ASSERT_EQ(gotParts.losses.size(), size_t(partSteps));
  for (size_t i = 0; i < size_t(partSteps); ++i)
    EXPECT_NEAR(gotParts.losses[i], wantParts.losses[i],
                1e-4 * std::max(1.0f, std::fabs(wantParts.losses[i])))
        << "accumulated step " << i + 1;
  TrainOptions stopParts = parts;
  stopParts.stopAfter = 2;
  stopParts.checkpointPath = dir.file("dropout-parts.ckpt");
  Model firstParts = model(), secondParts = model();
  Recorder part1Parts, part2Parts;
  run(firstParts, stopParts, part1Parts);
  TrainOptions resumeParts;
  resumeParts.resumePath = stopParts.checkpointPath;
  resumeParts.evaluate = false;
  resumeParts.accumulate = 3;
  run(secondParts, resumeParts, part2Parts);
  std::vector<float> partLosses = part1Parts.losses;
  partLosses.insert(partLosses.end(), part2Parts.losses.begin(), part2Parts.losses.end());
  EXPECT_EQ(partLosses, gotParts.losses);
  EXPECT_EQ(secondParts.parameters(), gpuParts.parameters());
}

// The EMA of the weights on the device (STRINGRT_CUDA_VIT_EMA_PACKAGE:
// vit_rope with ema = 0.9): pe_ema after each step, evaluated by swapping it
// for the weights (eval_ema), checkpointed as the CPU's "ema.*" and resumed
// bitwise; the evaluations and the EMA follow the CPU trainer's.
TEST_F(DeviceTraining, EmaIsKeptEvaluatedAndCheckpointedOnTheDevice) {
  OPEN_OR_SKIP("STRINGRT_CUDA_VIT_EMA_PACKAGE");
  ASSERT_GT(package->manifest().optimizer.emaDecay, 0.0);
  TrainOptions o = steps(6); // one epoch: an evaluation of each at its end
  o.evaluate = true;
  o.checkpointPath = dir.file("gpu.ckpt");
  Model gpuModel = model(), cpuModel = model();
  Recorder gpu, cpu;
  run(gpuModel, o, gpu);
  o.checkpointPath = dir.file("cpu.ckpt");
  run(cpuModel, o, cpu, /*cpu=*/true);
  ASSERT_EQ(gpu.evals.size(), 2u); // the weights, then their EMA
  ASSERT_EQ(cpu.evals.size(), 2u);
  EXPECT_FALSE(gpu.evals[0].ema);
  EXPECT_TRUE(gpu.evals[1].ema);
  EXPECT_NE(gpu.evals[1].loss, gpu.evals[0].loss);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(gpu.evals[i].loss, cpu.evals[i].loss, 1e-4 * std::max(1.0, cpu.evals[i].loss))
        << (i ? "EMA" : "weights");
  // The weights came back after the EMA's evaluation: the next step starts
  // from them (the final checkpoint's weights are the model's).
  std::vector<float> weights(gpuModel.parameters().size()), ema = weights, cpuEma = weights;
  loadParameters(dir.file("gpu.ckpt"), gpuModel.manifest().model, optimizerSlots(gpuModel),
                 weights);
  EXPECT_EQ(weights, gpuModel.parameters());
  loadParameters(dir.file("gpu.ckpt"), gpuModel.manifest().model, optimizerSlots(gpuModel), ema,
                 /*ema=*/true);
  loadParameters(dir.file("cpu.ckpt"), cpuModel.manifest().model, optimizerSlots(cpuModel),
                 cpuEma, /*ema=*/true);
  double worst = 0, moved = 0;
  for (size_t i = 0; i < ema.size(); ++i) {
    worst = std::max(worst, std::fabs(double(ema[i]) - cpuEma[i]));
    moved = std::max(moved, std::fabs(double(ema[i]) - weights[i]));
  }
  EXPECT_LT(worst, 1e-5) << "the GPU's EMA against the CPU's";
  EXPECT_GT(moved, 1e-4) << "the EMA is not the weights";

  // Stopped after step 2 and resumed on the device: the same EMA, bitwise.
  Model first = model(), second = model();
  Recorder part1, part2;
  TrainOptions stop = steps(6);
  stop.stopAfter = 2;
  stop.checkpointPath = dir.file("part.ckpt");
  run(first, stop, part1);
  TrainOptions resume;
  resume.resumePath = stop.checkpointPath;
  resume.checkpointPath = dir.file("resumed.ckpt");
  resume.evaluate = false;
  run(second, resume, part2);
  std::vector<float> resumedEma = ema;
  loadParameters(resume.checkpointPath, second.manifest().model, optimizerSlots(second),
                 resumedEma, /*ema=*/true);
  EXPECT_EQ(resumedEma, ema);
  EXPECT_EQ(second.parameters(), gpuModel.parameters());
}

// A step whose loss is not finite (every other parameter NaN here) leaves the
// parameters and the optimizer state alone, and so do the steps after it,
// until setState() gives the device a state again.
TEST_F(DeviceTraining, ANonFiniteLossLeavesTheStateAloneUntilSetState) {
  OPEN_OR_SKIP();
  Model m = model();
  m.initParameters();
  DataSet set = loadModelData(m, data);
  std::vector<Batch> keep;
  auto batches = inputBatches(m, set, keep, 3, 2);
  std::vector<float> poisoned = m.parameters();
  for (size_t i = 0; i < poisoned.size(); i += 2)
    poisoned[i] = std::numeric_limits<float>::quiet_NaN();
  cuda::DeviceModel device(m.manifest(), section, m.parameters());
  Optimizer state(m.manifest().optimizer, optimizerSlots(m), poisoned.size());
  device.setState(poisoned, state);
  float loss = 0;
  device.stage(batches[0]);
  device.trainStaged(10, loss);
  EXPECT_TRUE(std::isnan(loss));
  device.stage(batches[1]);
  cuda::StepOutcome outcome;
  device.queueStep(10);
  outcome = device.collectStep();
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(device.stepCount(), 0);
  std::vector<float> after = device.parameters();
  ASSERT_EQ(after.size(), poisoned.size());
  EXPECT_EQ(std::memcmp(after.data(), poisoned.data(), after.size() * 4), 0);
  // A good state again: the next step applies.
  device.setState(m.parameters(), state);
  device.stage(batches[2]);
  device.queueStep(10);
  outcome = device.collectStep();
  EXPECT_TRUE(outcome.applied);
  EXPECT_TRUE(std::isfinite(outcome.loss));
  EXPECT_EQ(outcome.info.step, 1);
}

// ---------------------------------------------------------------------------
// No device needed: the trainer refuses a bad checkpoint before the device
// model is made.

TEST_F(DeviceTraining, BadCheckpointsAreRefusedBeforeTheDevice) {
  OPEN_OR_SKIP("STRINGRT_CUDA_VIT_PACKAGE", /*needDevice=*/false);
  Model m = model();
  DataSet set = loadModelData(m, data);
  cuda::DeviceTrainBackend backend(m.manifest(), section);
  auto resumeFrom = [&](const std::string &path) {
    TrainOptions o;
    o.resumePath = path;
    o.evaluate = false;
    train(m, set, o, nullptr, &backend);
  };
  EXPECT_TRUE(failsWith([&] { resumeFrom(dir.file("missing.ckpt")); }, dir.file("missing.ckpt"),
                        {}));
  writeFile(dir.file("garbage.ckpt"), "not a checkpoint at all");
  EXPECT_TRUE(failsWith([&] { resumeFrom(dir.file("garbage.ckpt")); }, dir.file("garbage.ckpt"),
                        {}));
  // A checkpoint of the SGD optimizer for this AdamW model.
  std::vector<OptimizerSlot> slots = optimizerSlots(m);
  m.initParameters();
  ManifestOptimizer sgd = m.manifest().optimizer;
  sgd.kind = OptimizerKind::Sgd;
  Optimizer other(sgd, slots, m.parameters().size());
  CheckpointInfo info;
  info.model = m.manifest().model;
  info.step = 2;
  info.batch = 2;
  info.totalSteps = 6;
  saveCheckpoint(dir.file("sgd.ckpt"), info, slots, m.parameters(), other);
  EXPECT_TRUE(failsWith([&] { resumeFrom(dir.file("sgd.ckpt")); }, dir.file("sgd.ckpt"),
                        {"sgd optimizer state", "adamw"}));
  // Another model's checkpoint.
  info.model = "another_model";
  Optimizer same(m.manifest().optimizer, slots, m.parameters().size());
  saveCheckpoint(dir.file("other.ckpt"), info, slots, m.parameters(), same);
  EXPECT_TRUE(failsWith([&] { resumeFrom(dir.file("other.ckpt")); }, dir.file("other.ckpt"),
                        {"another_model"}));
  EXPECT_EQ(backend.model(), nullptr) << "the device model was made before the checkpoint was read";
}

} // namespace
} // namespace stringrt::test
