// Loading scales with the package: a manifest of 200,000 parameters (70 MB
// of JSON), each read by a get_param in both programs and trained, loads
// (parse, validate, build the model and its executors) in a few seconds of
// CPU, not the minutes a search by name per op took; running the gradients
// program (200,001 outputs) takes no longer.
#include "stringrt/Model.h"
#include "stringrt/Package.h"

#include "TestFiles.h"
#include "TestPackages.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>

namespace stringrt {
namespace {

// How much slower the sanitizer build (scripts/sanitize.sh) runs this test.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 5.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kSanitizerSlowdown = 5.0;
#else
constexpr double kSanitizerSlowdown = 1.0;
#endif
#else
constexpr double kSanitizerSlowdown = 1.0;
#endif

// Parameters p0 .. p<n-1>, each [1] and trainable; the loss is mean(x); the
// gradients program gives every parameter's value as its "gradient" (the
// loader checks only the types).
std::string manyParametersManifest(int n) {
  std::string params, values, forwardOps, gradientOutputs;
  for (int i = 0; i < n; ++i) {
    const std::string name = "\"p" + std::to_string(i) + "\"";
    const std::string id = std::to_string(3 + i);
    params += std::string(i ? "," : "") + "{\"name\":" + name +
              ",\"shape\":[1],\"frozen\":false,\"init\":\"zeros\"}";
    values += ",{\"dtype\":\"f32\",\"shape\":[1]}";
    forwardOps += ",{\"op\":\"pe.get_param\",\"results\":[" + id +
                  "],\"operands\":[],\"attrs\":{\"param\":" + name + "}}";
    gradientOutputs += ",{\"grad\":" + name + ",\"value\":" + id + "}";
  }
  auto program = [&](const std::string &outputs) {
    return "{\"values\":[{\"dtype\":\"f32\",\"shape\":[-1,1]},{\"dtype\":\"i32\",\"shape\":[-1]},"
           "{\"dtype\":\"f32\",\"shape\":[]}" +
           values +
           "],\"inputs\":[0,1],\"ops\":[{\"op\":\"pe.mean\",\"results\":[2],\"operands\":[0],"
           "\"attrs\":{}}" +
           forwardOps + "],\"outputs\":[{\"name\":\"loss\",\"value\":2}" + outputs + "]}";
  };
  return "{\"model\":\"many\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[-1,1]},"
         "{\"name\":\"label\",\"dtype\":\"i32\",\"shape\":[-1]}],\"params\":[" +
         params +
         "],\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.1,\"beta1\":0.9,\"beta2\":0.999,"
         "\"eps\":1e-8,\"weight_decay\":0.0,\"momentum\":0.0,\"clip_norm\":0.0,"
         "\"schedule\":\"constant\",\"warmup_steps\":0,\"min_lr\":0.0},\"programs\":{"
         "\"forward\":" +
         program("") + ",\"gradients\":" + program(gradientOutputs) + "}}";
}

TEST(ManyParametersTest, LoadIsLinearInTheParameters) {
  constexpr int kParams = 200000;
  test::TempDir dir;
  const std::string path = dir.file("many.pkg");
  test::writePackageFile(path, manyParametersManifest(kParams));

  // CPU time: the machine may be busy with other work.
  auto cpuSeconds = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  double start = cpuSeconds();
  Model model(Package::load(path), KernelSet::Reference);
  const double loadSeconds = cpuSeconds() - start;
  ASSERT_EQ(model.slots().size(), static_cast<size_t>(kParams));
  EXPECT_EQ(model.findSlot("p123456")->offset, 123456);
  // About 3 s on a 2-core machine (about 23 s under ASan + UBSan,
  // scripts/sanitize.sh); a search by name per op took minutes.
  EXPECT_LT(loadSeconds, 10.0 * kSanitizerSlowdown)
      << "loading " << kParams << " parameters took " << loadSeconds << " s of CPU";
  std::printf("loaded %d parameters in %.2f s of CPU\n", kParams, loadSeconds);

  // And it runs: the gradients program gives back the (zero) parameters.
  std::vector<float> x = {1.0f, 3.0f};
  std::vector<int32_t> label = {0, 0};
  float loss = 0;
  std::vector<float> grads;
  start = cpuSeconds();
  model.gradients({{"x", HostTensor(x.data(), {2, 1})}, {"label", HostTensor(label.data(), {2})}},
                  loss, grads);
  const double runSeconds = cpuSeconds() - start;
  EXPECT_EQ(loss, 2.0f);
  EXPECT_EQ(grads.size(), static_cast<size_t>(kParams));
  // A search per output for a later use of its value took a minute.
  EXPECT_LT(runSeconds, 5.0) << "the gradients program took " << runSeconds << " s of CPU";
}

} // namespace
} // namespace stringrt
