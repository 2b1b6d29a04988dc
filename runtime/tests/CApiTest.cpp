// The C ABI (stringrt/stringrt.h) on a hand-written package: training steps
// and forward outputs against the C++ API doing the same, checkpoints written
// and read back, and every failure (NULL handles and pointers, bad paths,
// wrong input names, dtypes and shapes, unbound inputs, too small output
// buffers, non-finite losses) reported through stringrt_last_error without
// changing the model. CApiCTest.c calls the API from C.
#include "stringrt/stringrt.h"

#include "TestFiles.h"
#include "TestPackages.h"
#include "stringrt/Checkpoint.h"
#include "stringrt/Model.h"
#include "stringrt/Optimizer.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"
#include "stringrt/Trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

extern "C" int stringrt_test_c_train_step(const char *package_path, float *loss_out);

namespace stringrt {
namespace {

using test::TempDir;

// The manifest of model `name`: a linear classifier, logits = image w + b,
// loss = cross_entropy(logits, label), with a frozen parameter no op reads; `frozen` is the frozen parameter's entry.
std::string manifest(const std::string &name,
                     const std::string &frozen =
                         R"({"name": "frozen", "shape": [2], "frozen": true,
                             "init": "constant", "value": 0.5})") {
  return R"({"model": ")" + name + R"(",
  "inputs": [{"name": "image", "dtype": "f32", "shape": [-1, 4]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [
    {"name": "w", "shape": [4, 3], "frozen": false, "init": "normal",
     "mean": 0.0, "std": 0.1, "seed": 7},
    {"name": "b", "shape": [3], "frozen": false, "init": "zeros"},
    )" + frozen + R"(
  ],
  "optimizer": {"kind": "adamw", "lr": 0.1, "beta1": 0.9, "beta2": 0.999,
                "eps": 1e-8, "weight_decay": 0.01, "momentum": 0.0,
                "clip_norm": 1.0, "schedule": "warmup_cosine",
                "warmup_steps": 1, "min_lr": 0.001},
  "programs": {"forward": )" +
         test::linearForwardProgram(4, 3) + R"(, "gradients": )" +
         test::linearGradientsProgram(4, 3) + "}}";
}

constexpr int64_t kBatch = 6;
constexpr int64_t kParams = 4 * 3 + 3 + 2;
constexpr int kSteps = 5;

// A batch the classifier can learn: example i is class i % 3, bright in
// feature i % 3, with a little of feature 3.
struct Data {
  std::vector<float> image;
  std::vector<int32_t> label;
  std::vector<int64_t> imageShape = {kBatch, 4};
  std::vector<int64_t> labelShape = {kBatch};

  Data() {
    for (int64_t i = 0; i < kBatch; ++i) {
      for (int64_t f = 0; f < 4; ++f)
        image.push_back(f == i % 3 ? 1.0f : f == 3 ? 0.1f * static_cast<float>(i) : 0.0f);
      label.push_back(static_cast<int32_t>(i % 3));
    }
  }
};

// "" when the last error contains every fragment, else a description.
::testing::AssertionResult lastErrorHas(const std::vector<std::string> &fragments) {
  std::string message = stringrt_last_error();
  for (const std::string &f : fragments)
    if (message.find(f) == std::string::npos)
      return ::testing::AssertionFailure()
             << "last error lacks \"" << f << "\": \"" << message << "\"";
  return ::testing::AssertionSuccess() << message;
}

class CApiTest : public ::testing::Test {
protected:
  std::string writePackage(const std::string &json, const std::string &file = "model.pkg") {
    std::string path = dir.file(file);
    test::writePackageFile(path, json);
    return path;
  }

  void SetUp() override { path = writePackage(manifest("tiny")); }

  // A loaded, initialised model with the batch bound and the total steps set.
  stringrt_model *ready() {
    stringrt_model *m = stringrt_model_load(path.c_str());
    EXPECT_NE(m, nullptr) << stringrt_last_error();
    if (!m)
      return nullptr;
    EXPECT_EQ(stringrt_model_init_parameters(m), 0) << stringrt_last_error();
    bind(m);
    EXPECT_EQ(stringrt_model_set_total_steps(m, kSteps), 0) << stringrt_last_error();
    return m;
  }

  void bind(stringrt_model *m) {
    EXPECT_EQ(stringrt_model_set_input_f32(m, "image", data.image.data(), data.imageShape.data(),
                                           2),
              0)
        << stringrt_last_error();
    EXPECT_EQ(stringrt_model_set_input_i32(m, "label", data.label.data(), data.labelShape.data(),
                                           1),
              0)
        << stringrt_last_error();
  }

  std::vector<float> logits(stringrt_model *m) {
    std::vector<float> out(kBatch * 3, -1.0f);
    int64_t count = 0;
    EXPECT_EQ(stringrt_model_forward(m, "logits", out.data(), static_cast<int64_t>(out.size()),
                                     &count),
              0)
        << stringrt_last_error();
    EXPECT_EQ(count, kBatch * 3);
    return out;
  }

  std::map<std::string, HostTensor> inputs() const {
    return {{"image", HostTensor(data.image.data(), data.imageShape)},
            {"label", HostTensor(data.label.data(), data.labelShape)}};
  }

  TempDir dir;
  std::string path;
  Data data;
};

TEST_F(CApiTest, TrainsExactlyAsTheCppApi) {
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(stringrt_model_parameter_count(m), kParams);

  // The same run through the C++ API.
  Model model(Package::load(path));
  model.initParameters();
  std::vector<OptimizerSlot> slots = optimizerSlots(model);
  Optimizer optimizer(model.manifest().optimizer, slots, model.parameters().size());

  // Before any step, the forward loss is the one the C++ model computes.
  float forwardLoss = -1;
  int64_t count = 0;
  ASSERT_EQ(stringrt_model_forward(m, "loss", &forwardLoss, 1, &count), 0)
      << stringrt_last_error();
  EXPECT_EQ(count, 1);
  EXPECT_EQ(forwardLoss, model.run("forward", inputs()).at("loss").values[0]);

  std::vector<float> losses;
  for (int s = 0; s < kSteps; ++s) {
    float loss = -1;
    ASSERT_EQ(stringrt_model_train_step(m, &loss), 0) << stringrt_last_error();
    float expected = 0;
    std::vector<float> grads;
    model.gradients(inputs(), expected, grads);
    optimizer.step(model.parameters(), grads, kSteps);
    EXPECT_EQ(loss, expected) << "step " << s + 1;
    losses.push_back(loss);
  }
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_NEAR(losses.front(), std::log(3.0), 0.2);
  // A NULL loss_out is allowed (a sixth step: past the schedule's end, min_lr).
  EXPECT_EQ(stringrt_model_train_step(m, nullptr), 0) << stringrt_last_error();
  {
    float ignored = 0;
    std::vector<float> grads;
    model.gradients(inputs(), ignored, grads);
    optimizer.step(model.parameters(), grads, kSteps);
  }

  // The logits after training are the C++ model's.
  std::vector<float> out = logits(m);
  EXPECT_EQ(out, model.run("forward", inputs()).at("logits").values);

  // The checkpoint holds the same parameters and the run's bookkeeping.
  std::string ckpt = dir.file("run.ckpt");
  ASSERT_EQ(stringrt_model_save_checkpoint(m, ckpt.c_str()), 0) << stringrt_last_error();
  CheckpointInfo info = readCheckpointInfo(ckpt);
  EXPECT_EQ(info.model, "tiny");
  EXPECT_EQ(info.step, kSteps + 1);
  EXPECT_EQ(info.batch, kBatch);
  // Past the schedule's end, the run's length is the steps it took.
  EXPECT_EQ(info.totalSteps, kSteps + 1);
  std::vector<float> saved(model.parameters().size(), 0.0f);
  loadParameters(ckpt, "tiny", slots, saved);
  EXPECT_EQ(saved, model.parameters());
  // So does the optimizer state: resuming in C++ continues the same run.
  Model resumed(Package::load(path));
  Optimizer resumedOptimizer(resumed.manifest().optimizer, slots, resumed.parameters().size());
  loadCheckpoint(ckpt, "tiny", slots, resumed.parameters(), resumedOptimizer);
  EXPECT_EQ(resumedOptimizer.stepCount(), kSteps + 1);

  stringrt_model_free(m);
}

TEST_F(CApiTest, ForwardCopiesOutputs) {
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  // Capacity 0 with a NULL buffer asks for the size.
  int64_t count = -1;
  EXPECT_NE(stringrt_model_forward(m, "logits", nullptr, 0, &count), 0);
  EXPECT_EQ(count, kBatch * 3);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_forward", "output 'logits' has 18 elements [6, 3]",
                            "capacity 0"}));
  // A larger buffer is fine; only `count` elements are written.
  std::vector<float> big(100, 42.0f);
  ASSERT_EQ(stringrt_model_forward(m, "logits", big.data(), 100, &count), 0)
      << stringrt_last_error();
  EXPECT_EQ(count, kBatch * 3);
  EXPECT_EQ(big[18], 42.0f);
  Model model(Package::load(path));
  model.initParameters();
  std::vector<float> expected = model.run("forward", inputs()).at("logits").values;
  EXPECT_EQ(std::vector<float>(big.begin(), big.begin() + 18), expected);
  // count_out may be NULL.
  std::vector<float> exact(18, 0.0f);
  ASSERT_EQ(stringrt_model_forward(m, "logits", exact.data(), 18, nullptr), 0)
      << stringrt_last_error();
  EXPECT_EQ(exact, expected);
  // A different batch size (batches of 1 and 6 give the same first row).
  const float one[4] = {1, 0, 0, 0};
  const int32_t label[1] = {0};
  const int64_t oneShape[2] = {1, 4}, labelShape[1] = {1};
  ASSERT_EQ(stringrt_model_set_input_f32(m, "image", one, oneShape, 2), 0);
  ASSERT_EQ(stringrt_model_set_input_i32(m, "label", label, labelShape, 1), 0);
  float row[3] = {0, 0, 0};
  ASSERT_EQ(stringrt_model_forward(m, "logits", row, 3, &count), 0) << stringrt_last_error();
  EXPECT_EQ(count, 3);
  for (int k = 0; k < 3; ++k)
    EXPECT_NEAR(row[k], expected[static_cast<size_t>(k)], 1e-6);
  stringrt_model_free(m);
}

TEST_F(CApiTest, ForwardErrors) {
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  std::vector<float> out(18, 7.0f);
  int64_t count = -1;

  EXPECT_NE(stringrt_model_forward(m, "probs", out.data(), 18, &count), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_forward: ", "has no output 'probs'",
                            "its outputs: loss, logits"}));
  EXPECT_EQ(count, -1);
  EXPECT_NE(stringrt_model_forward(m, "grad:w", out.data(), 18, &count), 0);
  EXPECT_TRUE(lastErrorHas({"has no output 'grad:w'"}));
  EXPECT_NE(stringrt_model_forward(m, nullptr, out.data(), 18, &count), 0);
  EXPECT_TRUE(lastErrorHas({"the output name is NULL"}));

  // Too small: nothing is written, the count tells the size.
  EXPECT_NE(stringrt_model_forward(m, "logits", out.data(), 17, &count), 0);
  EXPECT_TRUE(lastErrorHas({"output 'logits' has 18 elements", "more than the capacity 17"}));
  EXPECT_EQ(count, 18);
  EXPECT_EQ(out, std::vector<float>(18, 7.0f));

  EXPECT_NE(stringrt_model_forward(m, "logits", out.data(), -1, &count), 0);
  EXPECT_TRUE(lastErrorHas({"the capacity is negative (-1)"}));
  EXPECT_NE(stringrt_model_forward(m, "logits", nullptr, 18, &count), 0);
  EXPECT_TRUE(lastErrorHas({"the output buffer is NULL"}));
  stringrt_model_free(m);
}

TEST_F(CApiTest, LoadFailures) {
  EXPECT_EQ(stringrt_model_load(nullptr), nullptr);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_load: the path is NULL"}));

  std::string missing = dir.file("missing.pkg");
  EXPECT_EQ(stringrt_model_load(missing.c_str()), nullptr);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_load: " + missing + ": "}));

  std::string garbage = dir.file("garbage.pkg");
  test::writeFile(garbage, "not a package");
  EXPECT_EQ(stringrt_model_load(garbage.c_str()), nullptr);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_load: " + garbage + ": "}));

  // A package whose manifest is invalid (an unknown op).
  std::string bad = manifest("tiny");
  bad.replace(bad.find("pe.linear"), 9, "pe.nonsense");
  std::string badPath = writePackage(bad, "bad.pkg");
  EXPECT_EQ(stringrt_model_load(badPath.c_str()), nullptr);
  EXPECT_TRUE(lastErrorHas({badPath + ": ", "pe.nonsense"}));
}

TEST_F(CApiTest, NullHandles) {
  const char *null = "the model is NULL";
  float f = 0;
  int32_t i = 0;
  int64_t shape[1] = {1}, count = 0;

  stringrt_model_free(nullptr); // Ignored.
  EXPECT_EQ(stringrt_model_parameter_count(nullptr), -1);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_parameter_count: ", null}));
  EXPECT_NE(stringrt_model_init_parameters(nullptr), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_init_parameters: ", null}));
  EXPECT_NE(stringrt_model_load_parameters(nullptr, path.c_str()), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_load_parameters: ", null}));
  EXPECT_NE(stringrt_model_set_input_f32(nullptr, "image", &f, shape, 1), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_set_input_f32: ", null}));
  EXPECT_NE(stringrt_model_set_input_i32(nullptr, "label", &i, shape, 1), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_set_input_i32: ", null}));
  EXPECT_NE(stringrt_model_set_total_steps(nullptr, 3), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_set_total_steps: ", null}));
  EXPECT_NE(stringrt_model_train_step(nullptr, &f), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_train_step: ", null}));
  EXPECT_NE(stringrt_model_forward(nullptr, "loss", &f, 1, &count), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_forward: ", null}));
  EXPECT_NE(stringrt_model_save_checkpoint(nullptr, dir.file("x.ckpt").c_str()), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_save_checkpoint: ", null}));
  EXPECT_TRUE(dir.entries().size() == 1u); // Only model.pkg: nothing written.
}

TEST_F(CApiTest, InputErrors) {
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  const std::vector<float> before = logits(m);
  const float *image = data.image.data();
  const int32_t *label = data.label.data();
  const int64_t *imageShape = data.imageShape.data();
  const int64_t *labelShape = data.labelShape.data();

  EXPECT_NE(stringrt_model_set_input_f32(m, "pixels", image, imageShape, 2), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_set_input_f32: model 'tiny' has no input 'pixels'",
                            "its inputs: image, label"}));
  EXPECT_NE(stringrt_model_set_input_f32(m, nullptr, image, imageShape, 2), 0);
  EXPECT_TRUE(lastErrorHas({"the input name is NULL"}));

  // Wrong dtype, both ways.
  EXPECT_NE(stringrt_model_set_input_f32(m, "label", image, labelShape, 1), 0);
  EXPECT_TRUE(lastErrorHas({"input 'label' is i32 [-1], not f32",
                            "use stringrt_model_set_input_i32"}));
  EXPECT_NE(stringrt_model_set_input_i32(m, "image", label, imageShape, 2), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_set_input_i32: input 'image' is f32 [-1, 4], not i32"}));

  // Wrong rank and dimensions.
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, imageShape, 1), 0);
  EXPECT_TRUE(lastErrorHas({"input 'image' is f32 [-1, 4], got rank 1 [6]"}));
  const int64_t wide[2] = {3, 8};
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, wide, 2), 0);
  EXPECT_TRUE(lastErrorHas({"input 'image' is f32 [-1, 4], got shape [3, 8]"}));
  const int64_t empty[2] = {0, 4};
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, empty, 2), 0);
  EXPECT_TRUE(lastErrorHas({"got shape [0, 4]", "batch dimension must be in [1, 2^31]"}));
  const int64_t negative[1] = {-1};
  EXPECT_NE(stringrt_model_set_input_i32(m, "label", label, negative, 1), 0);
  EXPECT_TRUE(lastErrorHas({"input 'label' is i32 [-1], got shape [-1]"}));
  const int64_t huge[2] = {(int64_t{1} << 31) + 1, 4};
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, huge, 2), 0);
  EXPECT_TRUE(lastErrorHas({"batch dimension must be in [1, 2^31]"}));
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, imageShape, -1), 0);
  EXPECT_TRUE(lastErrorHas({"rank -1 is not in [0, 8]"}));
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, imageShape, 9), 0);
  EXPECT_TRUE(lastErrorHas({"rank 9 is not in [0, 8]"}));

  // NULL pointers.
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", image, nullptr, 2), 0);
  EXPECT_TRUE(lastErrorHas({"input 'image': the shape is NULL"}));
  EXPECT_NE(stringrt_model_set_input_f32(m, "image", nullptr, imageShape, 2), 0);
  EXPECT_TRUE(lastErrorHas({"input 'image': the data is NULL"}));
  EXPECT_NE(stringrt_model_set_input_i32(m, "label", nullptr, labelShape, 1), 0);
  EXPECT_TRUE(lastErrorHas({"input 'label': the data is NULL"}));

  // None of the failures replaced the bound inputs.
  EXPECT_EQ(logits(m), before);

  // A binding copies the data: changing the caller's buffer afterwards does
  // not change the model's input.
  std::vector<float> scratch = data.image;
  ASSERT_EQ(stringrt_model_set_input_f32(m, "image", scratch.data(), imageShape, 2), 0);
  std::fill(scratch.begin(), scratch.end(), 100.0f);
  EXPECT_EQ(logits(m), before);
  stringrt_model_free(m);
}

TEST_F(CApiTest, RunErrors) {
  stringrt_model *m = stringrt_model_load(path.c_str());
  ASSERT_NE(m, nullptr) << stringrt_last_error();
  float loss = -1;
  float out[18];
  int64_t count = 0;

  // Parameters never set.
  bind(m);
  ASSERT_EQ(stringrt_model_set_total_steps(m, kSteps), 0);
  EXPECT_NE(stringrt_model_train_step(m, &loss), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_train_step: the parameters of model 'tiny' are not "
                            "set",
                            "stringrt_model_init_parameters"}));
  EXPECT_NE(stringrt_model_forward(m, "logits", out, 18, &count), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_forward: the parameters of model 'tiny' are not set"}));
  EXPECT_EQ(loss, -1.0f);
  stringrt_model_free(m);

  // Inputs not bound.
  m = stringrt_model_load(path.c_str());
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(stringrt_model_init_parameters(m), 0);
  ASSERT_EQ(stringrt_model_set_total_steps(m, kSteps), 0);
  EXPECT_NE(stringrt_model_train_step(m, &loss), 0);
  EXPECT_TRUE(lastErrorHas({"input 'image' of model 'tiny' is not bound",
                            "stringrt_model_set_input_f32"}));
  ASSERT_EQ(stringrt_model_set_input_f32(m, "image", data.image.data(), data.imageShape.data(), 2),
            0);
  EXPECT_NE(stringrt_model_forward(m, "logits", out, 18, &count), 0);
  EXPECT_TRUE(lastErrorHas({"input 'label' of model 'tiny' is not bound",
                            "stringrt_model_set_input_i32"}));

  // Inputs of different batch sizes.
  const int32_t four[4] = {0, 1, 2, 0};
  const int64_t fourShape[1] = {4};
  ASSERT_EQ(stringrt_model_set_input_i32(m, "label", four, fourShape, 1), 0);
  EXPECT_NE(stringrt_model_train_step(m, &loss), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_train_step: " + path + ": ",
                            "inputs disagree on the batch size"}));
  stringrt_model_free(m);

  // The total steps: not set, or not >= 1.
  m = stringrt_model_load(path.c_str());
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(stringrt_model_init_parameters(m), 0);
  bind(m);
  EXPECT_NE(stringrt_model_train_step(m, &loss), 0);
  EXPECT_TRUE(lastErrorHas({"the run's total steps are not set",
                            "stringrt_model_set_total_steps"}));
  EXPECT_NE(stringrt_model_set_total_steps(m, 0), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_set_total_steps: the total steps must be >= 1, got 0"}));
  EXPECT_NE(stringrt_model_set_total_steps(m, -5), 0);
  EXPECT_TRUE(lastErrorHas({"got -5"}));
  EXPECT_NE(stringrt_model_train_step(m, &loss), 0); // Still not set.
  EXPECT_EQ(loss, -1.0f);
  // Forward needs no total steps.
  EXPECT_EQ(stringrt_model_forward(m, "logits", out, 18, &count), 0) << stringrt_last_error();
  stringrt_model_free(m);
}

TEST_F(CApiTest, NonFiniteLossTakesNoStep) {
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  const std::vector<float> before = logits(m);
  std::vector<float> poisoned = data.image;
  poisoned[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(
      stringrt_model_set_input_f32(m, "image", poisoned.data(), data.imageShape.data(), 2), 0);
  float loss = -1;
  EXPECT_NE(stringrt_model_train_step(m, &loss), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_train_step: step 1: the loss is", "not taken"}));
  EXPECT_EQ(loss, -1.0f);
  // The parameters and the step count are unchanged.
  bind(m);
  EXPECT_EQ(logits(m), before);
  std::string ckpt = dir.file("nan.ckpt");
  ASSERT_EQ(stringrt_model_save_checkpoint(m, ckpt.c_str()), 0) << stringrt_last_error();
  EXPECT_EQ(readCheckpointInfo(ckpt).step, 0);
  EXPECT_EQ(readCheckpointInfo(ckpt).batch, 0);
  // And training goes on from there.
  EXPECT_EQ(stringrt_model_train_step(m, &loss), 0) << stringrt_last_error();
  EXPECT_TRUE(std::isfinite(loss));
  stringrt_model_free(m);
}

TEST_F(CApiTest, LoadParametersFromACheckpoint) {
  stringrt_model *a = ready();
  ASSERT_NE(a, nullptr);
  for (int s = 0; s < 3; ++s)
    ASSERT_EQ(stringrt_model_train_step(a, nullptr), 0) << stringrt_last_error();
  std::string ckpt = dir.file("a.ckpt");
  ASSERT_EQ(stringrt_model_save_checkpoint(a, ckpt.c_str()), 0) << stringrt_last_error();

  // A fresh handle with the loaded parameters computes the same logits,
  // without ever being initialised.
  stringrt_model *b = stringrt_model_load(path.c_str());
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(stringrt_model_load_parameters(b, ckpt.c_str()), 0) << stringrt_last_error();
  bind(b);
  EXPECT_EQ(logits(b), logits(a));
  stringrt_model_free(b);

  // Failures leave the parameters as they were.
  const std::vector<float> trained = logits(a);
  EXPECT_NE(stringrt_model_load_parameters(a, nullptr), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_load_parameters: the path is NULL"}));
  std::string missing = dir.file("missing.ckpt");
  EXPECT_NE(stringrt_model_load_parameters(a, missing.c_str()), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_load_parameters: " + missing + ": "}));
  // A file where `w` has the wrong shape (b is right).
  std::vector<float> w(6, 1.0f), bias(3, 1.0f), frozen(2, 1.0f);
  std::string wrong = dir.file("wrong.safetensors");
  writeSafetensors(wrong, {{"w", DType::F32, {2, 3}, w.data()},
                           {"b", DType::F32, {3}, bias.data()},
                           {"frozen", DType::F32, {2}, frozen.data()}});
  EXPECT_NE(stringrt_model_load_parameters(a, wrong.c_str()), 0);
  EXPECT_TRUE(lastErrorHas({wrong + ": ", "'w'"}));
  // A checkpoint of another model.
  std::string otherPath = writePackage(manifest("other"), "other.pkg");
  stringrt_model *other = stringrt_model_load(otherPath.c_str());
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(stringrt_model_init_parameters(other), 0);
  std::string otherCkpt = dir.file("other.ckpt");
  ASSERT_EQ(stringrt_model_save_checkpoint(other, otherCkpt.c_str()), 0) << stringrt_last_error();
  stringrt_model_free(other);
  EXPECT_NE(stringrt_model_load_parameters(a, otherCkpt.c_str()), 0);
  EXPECT_TRUE(lastErrorHas({otherCkpt + ": ", "model 'other'"}));
  EXPECT_EQ(logits(a), trained);
  stringrt_model_free(a);
}

TEST_F(CApiTest, SaveCheckpointFailures) {
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  EXPECT_NE(stringrt_model_save_checkpoint(m, nullptr), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_save_checkpoint: the path is NULL"}));
  std::string nowhere = dir.file("no/such/dir/x.ckpt");
  EXPECT_NE(stringrt_model_save_checkpoint(m, nowhere.c_str()), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_save_checkpoint: ", "x.ckpt"}));
  stringrt_model_free(m);
}

TEST_F(CApiTest, FailedInitLeavesParametersUnset) {
  // A frozen parameter loaded from a file that does not exist.
  std::string missing = dir.file("absent.safetensors");
  std::string p = writePackage(manifest("tiny", R"({"name": "frozen", "shape": [2],
      "frozen": true, "init": "load", "file": ")" + missing +
                                                    R"(", "tensor": "t"})"),
                               "load.pkg");
  stringrt_model *m = stringrt_model_load(p.c_str());
  ASSERT_NE(m, nullptr) << stringrt_last_error();
  EXPECT_NE(stringrt_model_init_parameters(m), 0);
  EXPECT_TRUE(lastErrorHas({"stringrt_model_init_parameters: ", "absent.safetensors"}));
  bind(m);
  ASSERT_EQ(stringrt_model_set_total_steps(m, 1), 0);
  EXPECT_NE(stringrt_model_train_step(m, nullptr), 0);
  EXPECT_TRUE(lastErrorHas({"are not set"}));
  stringrt_model_free(m);
}

TEST_F(CApiTest, LastErrorIsPerThread) {
  EXPECT_EQ(stringrt_model_init_parameters(nullptr), 1);
  const std::string mine = stringrt_last_error();
  EXPECT_EQ(mine, "stringrt_model_init_parameters: the model is NULL");
  std::string theirsBefore, theirsAfter;
  std::thread other([&] {
    theirsBefore = stringrt_last_error();
    stringrt_model_set_total_steps(nullptr, 1);
    theirsAfter = stringrt_last_error();
  });
  other.join();
  EXPECT_EQ(theirsBefore, "");
  EXPECT_EQ(theirsAfter, "stringrt_model_set_total_steps: the model is NULL");
  EXPECT_EQ(stringrt_last_error(), mine);
  // Successful calls leave it unchanged.
  stringrt_model *m = ready();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(stringrt_last_error(), mine);
  stringrt_model_free(m);
}

TEST_F(CApiTest, CallableFromC) {
  float loss = -1;
  EXPECT_EQ(stringrt_test_c_train_step(path.c_str(), &loss), 0) << stringrt_last_error();
  EXPECT_NEAR(loss, std::log(3.0), 0.2);
  EXPECT_EQ(stringrt_test_c_train_step(dir.file("missing.pkg").c_str(), &loss), 1);
}

} // namespace
} // namespace stringrt
