// The optimizer on the device (compiler/lib/CudaGen/OptimizerKernels.cpp,
// stringrt/cuda/StepControl.h), on the kernels package
// (STRINGRT_CUDA_TEST_PACKAGE):
// - the step control block's host side (no GPU);
// - pe_optimizer_scalars against the host's formulas (learningRate(), the
//   bias corrections, the global norm and clipping) over the steps of runs
//   with either schedule, and a non-finite loss halting the updates;
// - pe_sumsq_partials -> pe_optimizer_scalars -> pe_adamw / pe_sgd, the
//   whole device optimizer with no host value in between, against
//   Optimizer::step over several steps with clipping;
// - the update kernels touch nothing when the step is not applied.
//
// Tolerances and why: the scalars are f64 on both sides, the device's
// libdevice cos and pow within an ulp or two of the host's: 1e-14 relative;
// the norm adds the partials (f32 sums of squares) in another order than the
// host's double loop: 1e-6 relative. pe_sgd is f64 arithmetic with momentum
// and weight decay rounded to f32: 1e-6. pe_adamw is the formula in f32: 1e-5
// over three steps (the moments' division amplifies f32 rounding).
#include "GpuKernelSession.h"

#include "stringrt/Error.h"
#include "stringrt/Optimizer.h"
#include "stringrt/cuda/StepControl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace stringrt::cuda {
namespace {

using KA = KernelArg;

ManifestOptimizer adamwConfig(LrSchedule schedule, double clipNorm) {
  ManifestOptimizer c;
  c.kind = OptimizerKind::AdamW;
  c.lr = 3e-3;
  c.minLr = 1e-4;
  c.schedule = schedule;
  c.warmupSteps = schedule == LrSchedule::WarmupCosine ? 3 : 0;
  c.beta1 = 0.9;
  c.beta2 = 0.98;
  c.eps = 1e-8;
  c.weightDecay = 0.05;
  c.clipNorm = clipNorm;
  return c;
}

TEST(StepControlBlock, HoldsTheRunAndReadsBackWhatTheStepDid) {
  ManifestOptimizer c = adamwConfig(LrSchedule::WarmupCosine, 1.5);
  StepControlBlock block = makeStepControl(c, 7, 40);
  EXPECT_EQ(block[kControlStepsTaken], 7.0);
  EXPECT_EQ(block[kControlTotalSteps], 40.0);
  EXPECT_EQ(block[kControlHalted], 0.0);
  EXPECT_EQ(block[kControlBaseLr], 3e-3);
  EXPECT_EQ(block[kControlMinLr], 1e-4);
  EXPECT_EQ(block[kControlWarmupSteps], 3.0);
  EXPECT_EQ(block[kControlSchedule], 1.0);
  EXPECT_EQ(block[kControlBeta2], 0.98);
  EXPECT_EQ(block[kControlClipNorm], 1.5);
  EXPECT_EQ(block[kControlApplied], 0.0);
  EXPECT_EQ(makeStepControl(adamwConfig(LrSchedule::Constant, 0), 0, 1)[kControlSchedule], 0.0);
  EXPECT_THROW(makeStepControl(c, 0, 0), Error);
  EXPECT_THROW(makeStepControl(c, -1, 10), Error);

  block[kControlStep] = 8;
  block[kControlLoss] = 2.5;
  block[kControlGradNorm] = 3.0;
  block[kControlClipScale] = 0.5;
  block[kControlLr] = 1e-3;
  block[kControlApplied] = 1;
  block[kControlStepsTaken] = 8;
  StepOutcome out = stepOutcome(block);
  EXPECT_TRUE(out.applied);
  EXPECT_EQ(out.loss, 2.5f);
  EXPECT_EQ(out.stepsTaken, 8);
  EXPECT_EQ(out.info.step, 8);
  EXPECT_EQ(out.info.lr, 1e-3);
  EXPECT_EQ(out.info.gradNorm, 3.0);
  EXPECT_EQ(out.info.clipScale, 0.5);
}

class DeviceOptimizer : public ::testing::Test, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(16) << 20); !why.empty())
      GTEST_SKIP() << why;
    rng.seed(3);
  }

  uint64_t putBlock(const StepControlBlock &block) {
    return putBytes(std::vector<double>(block.begin(), block.end()));
  }
  StepControlBlock getBlock(uint64_t address) {
    device->synchronize("test");
    std::vector<double> values = arena->downloadVector<double>(offsets.at(address), kControlSlots);
    StepControlBlock block;
    std::copy(values.begin(), values.end(), block.begin());
    return block;
  }
  void scalars(uint64_t block, uint64_t partials, int64_t blocks, uint64_t loss) {
    launchGrid("pe_optimizer_scalars",
               {KA::pointer(block), KA::pointer(partials), KA::integer(blocks), KA::pointer(loss)},
               {1, 1, 1});
  }
};

void expectRelative(double got, double want, double tol, const std::string &what) {
  EXPECT_LE(std::fabs(got - want), tol * std::max(1e-300, std::fabs(want)))
      << what << ": " << got << " vs " << want;
}

TEST_F(DeviceOptimizer, ScalarsFollowTheScheduleClippingAndBiasCorrections) {
  const int64_t total = 10;
  for (LrSchedule schedule : {LrSchedule::Constant, LrSchedule::WarmupCosine})
    for (double clipNorm : {0.0, 1.0, 1e6}) {
      ManifestOptimizer c = adamwConfig(schedule, clipNorm);
      clearBuffers();
      uint64_t block = putBlock(makeStepControl(c, 0, total));
      // Past the run's end too (progress stays 1).
      for (int64_t t = 1; t <= total + 2; ++t) {
        const int64_t blocks = 1 + (t * 37) % 700;
        std::vector<float> partial = random(size_t(blocks), 0.0f, 0.01f);
        uint64_t partials = put(partial), loss = put({2.0f + float(t)});
        scalars(block, partials, blocks, loss);
        StepControlBlock got = getBlock(block);
        double sumSq = 0;
        for (float p : partial)
          sumSq += p;
        const double norm = std::sqrt(sumSq);
        const std::string what =
            "t " + std::to_string(t) + " clip " + std::to_string(clipNorm) +
            (schedule == LrSchedule::Constant ? " constant" : " warmup-cosine");
        EXPECT_EQ(got[kControlStep], double(t)) << what;
        EXPECT_EQ(got[kControlStepsTaken], double(t)) << what;
        EXPECT_EQ(got[kControlApplied], 1.0) << what;
        EXPECT_EQ(got[kControlHalted], 0.0) << what;
        EXPECT_EQ(got[kControlLoss], 2.0 + double(t)) << what;
        expectRelative(got[kControlGradNorm], norm, 1e-6, what + " norm");
        const double scale = clipNorm > 0 && norm > clipNorm ? clipNorm / norm : 1.0;
        expectRelative(got[kControlClipScale], scale, 1e-6, what + " clip scale");
        expectRelative(got[kControlLr], learningRate(c, t, total), 1e-14, what + " lr");
        expectRelative(got[kControlBiasCorrection1], 1 - std::pow(c.beta1, double(t)), 1e-14,
                       what + " bc1");
        expectRelative(got[kControlBiasCorrection2], 1 - std::pow(c.beta2, double(t)), 1e-14,
                       what + " bc2");
      }
      // The norms (~sqrt(blocks * 0.005)) are below 1.0 at t 1 to 5 and above
      // it from t 6: clip 1.0 takes both sides; 1e6 never clips; 0 is off.
    }
}

TEST_F(DeviceOptimizer, ANonFiniteLossHaltsTheUpdatesUntilTheHostResets) {
  ManifestOptimizer c = adamwConfig(LrSchedule::Constant, 0);
  uint64_t block = putBlock(makeStepControl(c, 4, 100));
  uint64_t partials = put({1.0f, 2.0f});
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    arena->upload(offsets.at(block), makeStepControl(c, 4, 100).data(), sizeof(StepControlBlock),
                  "reset");
    scalars(block, partials, 2, put({bad}));
    StepControlBlock got = getBlock(block);
    EXPECT_EQ(got[kControlApplied], 0.0) << bad;
    EXPECT_EQ(got[kControlStepsTaken], 4.0) << bad;
    EXPECT_EQ(got[kControlHalted], 1.0) << bad;
    EXPECT_EQ(got[kControlStep], 5.0) << bad;
    // A finite loss afterwards does not apply either: the step before it
    // left the state as it was, so its gradients are not this state's.
    scalars(block, partials, 2, put({1.0f}));
    got = getBlock(block);
    EXPECT_EQ(got[kControlApplied], 0.0) << bad;
    EXPECT_EQ(got[kControlStepsTaken], 4.0) << bad;
    EXPECT_EQ(got[kControlHalted], 1.0) << bad;
  }
  // No partials at all (no trainable parameters): a norm of 0, applied.
  arena->upload(offsets.at(block), makeStepControl(c, 0, 100).data(), sizeof(StepControlBlock),
                "reset");
  scalars(block, partials, 0, put({1.0f}));
  StepControlBlock got = getBlock(block);
  EXPECT_EQ(got[kControlApplied], 1.0);
  EXPECT_EQ(got[kControlGradNorm], 0.0);
  EXPECT_EQ(got[kControlClipScale], 1.0);
}

// The device optimizer over three steps (sumsq partials, scalars, update),
// no value through the host, against Optimizer::step on the same gradients.
void runAgainstTheCpu(GpuKernelSession &gpu, const ManifestOptimizer &c, double tol) {
  const size_t n = 10007;
  const bool adamw = c.kind == OptimizerKind::AdamW;
  std::vector<OptimizerSlot> slots = {{"w", {int64_t(n)}, 0, n, false}};
  Optimizer cpu(c, slots, n);
  std::vector<float> params = gpu.random(n, -1, 1);
  uint64_t p = gpu.put(params), m = gpu.zeros(n), v = gpu.zeros(n), g = gpu.zeros(n);
  uint64_t partials = gpu.zeros(1024), loss = gpu.put({1.25f});
  uint64_t block = gpu.putBytes(std::vector<double>(kControlSlots, 0.0));
  const int64_t total = 5;
  StepControlBlock initial = makeStepControl(c, 0, total);
  gpu.arena->upload(gpu.offsets.at(block), initial.data(), sizeof initial, "control");
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> grads = gpu.random(n, -1, 1);
    gpu.arena->upload(gpu.offsets.at(g), grads.data(), n * 4, "grads");
    OptimizerStepInfo info = cpu.step(params, grads, total);
    if (c.clipNorm > 0)
      ASSERT_LT(info.clipScale, 1.0); // the norm of 10007 values in [-1, 1] exceeds 1
    gpu.launch("pe_sumsq_partials", {KA::pointer(partials), KA::pointer(g), KA::integer(int64_t(n))});
    const int64_t blocks = std::min<int64_t>((int64_t(n) + 31) / 32, 1024);
    gpu.launchGrid("pe_optimizer_scalars",
                   {KA::pointer(block), KA::pointer(partials), KA::integer(blocks), KA::pointer(loss)},
                   {1, 1, 1});
    if (adamw)
      gpu.launch("pe_adamw", {KA::pointer(p), KA::pointer(m), KA::pointer(v), KA::pointer(g),
                              KA::integer(int64_t(n)), KA::pointer(block), KA::real(float(c.beta1)),
                              KA::real(float(c.beta2)), KA::real(float(c.eps)),
                              KA::real(float(c.weightDecay))});
    else
      gpu.launch("pe_sgd", {KA::pointer(p), KA::pointer(m), KA::pointer(g), KA::integer(int64_t(n)),
                            KA::pointer(block), KA::real(float(c.momentum)),
                            KA::real(float(c.weightDecay))});
    const std::string what = std::string(adamw ? "adamw" : "sgd") + " step " + std::to_string(step);
    GpuKernelSession::expectClose(gpu.get(p, n), params, tol, what + " params");
    auto state = cpu.stateBuffers();
    GpuKernelSession::expectClose(gpu.get(m, n), *state[0].values, tol, what + " first moment");
    if (adamw)
      GpuKernelSession::expectClose(gpu.get(v, n), *state[1].values, tol, what + " second moment");
  }
}

TEST_F(DeviceOptimizer, AdamWStepsMatchTheCpuOptimizer) {
  ASSERT_TRUE(kernels->has("pe_adamw"));
  runAgainstTheCpu(*this, adamwConfig(LrSchedule::WarmupCosine, 1.0), 1e-5);
}

TEST_F(DeviceOptimizer, SgdStepsMatchTheCpuOptimizer) {
  ASSERT_TRUE(kernels->has("pe_sgd")) << "kernels.pkg lacks pe_sgd";
  ManifestOptimizer c = adamwConfig(LrSchedule::WarmupCosine, 1.0);
  c.kind = OptimizerKind::Sgd;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.weightDecay = 0.01;
  runAgainstTheCpu(*this, c, 1e-6);
}

TEST_F(DeviceOptimizer, UpdatesTouchNothingWhenTheStepIsNotApplied) {
  const int64_t n = 1000;
  std::vector<float> params = random(n), moment = random(n, 0, 1), grads = random(n);
  uint64_t p = put(params), m = put(moment), v = put(moment), g = put(grads);
  StepControlBlock block = makeStepControl(adamwConfig(LrSchedule::Constant, 0), 3, 10);
  block[kControlLr] = 1.0;
  block[kControlBiasCorrection1] = block[kControlBiasCorrection2] = 0.5;
  block[kControlClipScale] = 1.0;
  block[kControlApplied] = 0.0;
  uint64_t control = putBlock(block);
  launch("pe_adamw", {KA::pointer(p), KA::pointer(m), KA::pointer(v), KA::pointer(g),
                      KA::integer(n), KA::pointer(control), KA::real(0.9f), KA::real(0.98f),
                      KA::real(1e-8f), KA::real(0.1f)});
  launch("pe_sgd", {KA::pointer(p), KA::pointer(m), KA::pointer(g), KA::integer(n),
                    KA::pointer(control), KA::real(0.9f), KA::real(0.1f)});
  auto bits = [](const std::vector<float> &x) {
    std::vector<uint32_t> out(x.size());
    std::memcpy(out.data(), x.data(), x.size() * 4);
    return out;
  };
  EXPECT_EQ(bits(get(p, n)), bits(params));
  EXPECT_EQ(bits(get(m, n)), bits(moment));
  EXPECT_EQ(bits(get(v, n)), bits(moment));
}

} // namespace
} // namespace stringrt::cuda
