// "cpu" packages with compiled kernels, built by hand around the kernel
// libraries of kernels/TestKernels.c (no compiler needed): a package runs
// on its kernels only with KernelSet::Compiled, which loads the library
// only when it exports exactly the kernels the manifest names, each
// resolving inside it, and each op's kernels are the ones stringc generates
// for it (kind, range); a compiled op runs its reference kernel's argument
// checks first (docs/package.md, "Target cpu").
#include "stringrt/Error.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/Model.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <elf.h>

namespace stringrt {
namespace {

using test::readFile;
using test::TempDir;

#if defined(__x86_64__)
constexpr const char *kHostTriple = "x86_64-pc-linux-gnu";
constexpr const char *kOtherTriple = "aarch64-unknown-linux-gnu";
constexpr uint16_t kOtherMachine = EM_AARCH64;
#elif defined(__aarch64__)
constexpr const char *kHostTriple = "aarch64-unknown-linux-gnu";
constexpr const char *kOtherTriple = "x86_64-pc-linux-gnu";
constexpr uint16_t kOtherMachine = EM_X86_64;
#else
constexpr const char *kHostTriple = nullptr;
#endif

constexpr const char *kLoadedMarker = "STRINGRT_TEST_KERNELS_LOADED";

// The symbols of TestKernels.c: "stringc_k<N>_<digest>_<kind>", the digest
// that of the op's buffer sizes (TheTestKernelsCarryTheirBuffersDigests).
const std::string kReluDigest = "a9eda7630a59fb15";
const std::string kRelu = "stringc_k0_" + kReluDigest + "_relu";
const std::string kMul = "stringc_k1_1bd2da8c19f92d81_mul";

// A classifier whose first two ops run on the library's kernels:
// h = relu(x) (kRelu), g = h * gain (kMul), logits =
// linear(g, w, b), loss = cross_entropy. Values: 0 x, 1 label, 2 gain, 3 w,
// 4 b, 5 h, 6 g, 7 logits, 8 loss; the gradients program adds 9 (the
// loss's seed), 10 dlogits, 11 dw, 12 db and `extraGradientOp`'s results.
std::string manifestText(const std::string &extraGradientValues = "",
                         const std::string &extraGradientOp = "") {
  const std::string values = R"(
    {"dtype": "f32", "shape": [-1, 4]}, {"dtype": "i32", "shape": [-1]},
    {"dtype": "f32", "shape": [4]}, {"dtype": "f32", "shape": [4, 3]}, {"dtype": "f32", "shape": [3]},
    {"dtype": "f32", "shape": [-1, 4]}, {"dtype": "f32", "shape": [-1, 4]},
    {"dtype": "f32", "shape": [-1, 3]}, {"dtype": "f32", "shape": []})";
  const std::string ops = R"(
    {"op": "pe.get_param", "results": [2], "operands": [], "attrs": {"param": "gain"}},
    {"op": "pe.get_param", "results": [3], "operands": [], "attrs": {"param": "w"}},
    {"op": "pe.get_param", "results": [4], "operands": [], "attrs": {"param": "b"}},
    {"op": "pe.relu", "results": [5], "operands": [0], "attrs": {},
     "kernels": [{"symbol": "stringc_k0_a9eda7630a59fb15_relu", "range": -1, "grain": 1}]},
    {"op": "pe.mul", "results": [6], "operands": [5, 2], "attrs": {},
     "kernels": [{"symbol": "stringc_k1_1bd2da8c19f92d81_mul", "range": -1, "grain": 1}]},
    {"op": "pe.linear", "results": [7], "operands": [6, 3, 4], "attrs": {}},
    {"op": "pe.cross_entropy", "results": [8], "operands": [7, 1], "attrs": {}})";
  return R"({
  "model": "compiled",
  "inputs": [{"name": "image", "dtype": "f32", "shape": [-1, 4]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [{"name": "gain", "shape": [4], "frozen": true, "init": "uniform",
              "low": -1.0, "high": 1.0, "seed": 3},
             {"name": "w", "shape": [4, 3], "frozen": false, "init": "normal",
              "mean": 0.0, "std": 0.5, "seed": 7},
             {"name": "b", "shape": [3], "frozen": false, "init": "zeros"}],
  "optimizer": {"kind": "sgd", "lr": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                "weight_decay": 0.0, "momentum": 0.0, "clip_norm": 0.0,
                "schedule": "constant", "warmup_steps": 0, "min_lr": 0.0},
  "programs": {
    "forward": {"values": [)" +
         values + R"(], "inputs": [0, 1], "ops": [)" + ops + R"(],
      "outputs": [{"name": "loss", "value": 8}, {"name": "logits", "value": 7}]},
    "gradients": {"values": [)" +
         values + R"(, {"dtype": "f32", "shape": []}, {"dtype": "f32", "shape": [-1, 3]},
      {"dtype": "f32", "shape": [4, 3]}, {"dtype": "f32", "shape": [3]})" +
         extraGradientValues + R"(], "inputs": [0, 1], "ops": [)" + ops + R"(,
      {"op": "arith.constant", "results": [9], "operands": [], "attrs": {"value": 1.0}},
      {"op": "pe.cross_entropy_grad", "results": [10], "operands": [7, 1, 9], "attrs": {}},
      {"op": "pe.linear_grad_weight", "results": [11], "operands": [6, 10], "attrs": {}},
      {"op": "pe.sum_to", "results": [12], "operands": [10], "attrs": {}})" +
         extraGradientOp + R"(],
      "outputs": [{"name": "loss", "value": 8}, {"grad": "w", "value": 11},
                  {"grad": "b", "value": 12}]}}})";
}

// `text` with every occurrence of `from` replaced by `to` (at least one).
std::string replacedAll(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' to replace";
  for (; at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::vector<uint8_t> libraryBytes(const char *path) {
  const std::string bytes = readFile(path);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

class PackageKernels : public ::testing::Test {
protected:
  void SetUp() override {
    if (!kHostTriple)
      GTEST_SKIP() << "no compiled kernels on this architecture";
    ::unsetenv(kLoadedMarker);
  }

  // Writes a "cpu" package of `manifest` around `library`.
  std::string write(const std::string &manifest, const std::vector<uint8_t> &library,
                    const std::string &triple = kHostTriple) {
    std::string path = dir.file("p" + std::to_string(count++) + ".pkg");
    writeSafetensors(path,
                     {{kKernelSection, DType::U8, {int64_t(library.size())}, library.data()}},
                     {{"format", "stringc-package"},
                      {"version", "2"},
                      {"target", "cpu"},
                      {"manifest", manifest},
                      {"kernels_triple", triple},
                      {"kernels_cpu", "generic"},
                      {"kernels_features", ""},
                      {"kernels_checksum", kernelChecksum(library.data(), library.size())}});
    return path;
  }
  std::string write(const std::string &manifest) {
    return write(manifest, libraryBytes(STRINGRT_TEST_KERNELS));
  }

  static bool loadedMarker() { return std::getenv(kLoadedMarker) != nullptr; }

  // A batch of 3 with negative inputs (relu matters).
  std::map<std::string, HostTensor> batch() {
    return {{"image", HostTensor(image.data(), {3, 4})}, {"label", HostTensor(label.data(), {3})}};
  }

  TempDir dir;
  int count = 0;
  std::vector<float> image = {0.5f, -1.0f, 2.0f, -0.25f, -3.0f, 1.5f, 0.0f, 4.0f,
                              1.0f, 1.0f,  -2.0f, 0.75f};
  std::vector<int32_t> label = {2, 0, 1};
};

::testing::AssertionResult loadFails(const std::string &path, const std::string &fragment) {
  return test::failsWith([&] { Package::load(path); }, path, {fragment});
}

TEST_F(PackageKernels, CompiledKernelsRunAsTheFastOnes) {
  Package package = Package::load(write(manifestText()));
  ASSERT_TRUE(package.hasKernels());
  Model compiled(package);
  ASSERT_EQ(compiled.kernels(), KernelSet::Compiled);
  Model fast(package, KernelSet::Fast);
  compiled.initParameters();
  fast.initParameters();
  auto a = compiled.run("forward", batch());
  auto b = fast.run("forward", batch());
  EXPECT_EQ(a.at("logits").values, b.at("logits").values);
  EXPECT_EQ(a.at("loss").values, b.at("loss").values);
  float lossA = 0, lossB = 0;
  std::vector<float> gradA, gradB;
  compiled.gradients(batch(), lossA, gradA);
  fast.gradients(batch(), lossB, gradB);
  EXPECT_EQ(lossA, lossB);
  EXPECT_EQ(gradA, gradB);
}

TEST_F(PackageKernels, FastAndReferenceKernelsNeverLoadTheLibrary) {
  // The library's initialiser sets the marker: nothing of it may run.
  Package package = Package::load(write(manifestText()));
  for (KernelSet kernels : {KernelSet::Fast, KernelSet::Reference}) {
    Model model(package, kernels);
    model.initParameters();
    model.run("forward", batch());
    EXPECT_EQ(model.kernelLibrary(), nullptr);
  }
  EXPECT_FALSE(package.kernelLibraryLoaded());
  EXPECT_FALSE(loadedMarker());
  Model compiled(package, KernelSet::Compiled);
  EXPECT_TRUE(package.kernelLibraryLoaded());
  EXPECT_TRUE(loadedMarker());
}

TEST_F(PackageKernels, ALibraryExportingAnythingElseIsRefused) {
  std::string path = write(manifestText(), libraryBytes(STRINGRT_TEST_KERNELS_EXTRA_EXPORT));
  EXPECT_TRUE(loadFails(path, "the kernel library exports \"stringc_k2_" + kReluDigest +
                                  "_relu\", which no op of "
                              "the manifest names"));
  EXPECT_FALSE(loadedMarker());
}

TEST_F(PackageKernels, AKernelResolvingOutsideTheLibraryIsRefused) {
  // kRelu is an absolute symbol: dlsym gives an address in no
  // object (it could as well be the C library's).
  Package package =
      Package::load(write(manifestText(), libraryBytes(STRINGRT_TEST_KERNELS_ABSOLUTE_RELU)));
  EXPECT_TRUE(test::failsWith([&] { Model model(package, KernelSet::Compiled); }, package.path(),
                              {"kernel \"" + kRelu + "\" resolves to 0x10, in no loaded "
                               "object, outside the kernel library"}));
}

TEST_F(PackageKernels, OnlyGeneratedKernelSymbolsOfTheLibrary) {
  // Another library's function (the C library's), and a kernel this
  // library does not have.
  EXPECT_TRUE(loadFails(write(replacedAll(manifestText(), kRelu, "malloc")),
                        "ops[3] (pe.relu).kernels[0]: kernel \"malloc\" is not a generated "
                        "kernel's symbol (\"stringc_k<N>_<digest>_relu\")"));
  const std::string k7 = "stringc_k7_" + kReluDigest + "_relu";
  EXPECT_TRUE(loadFails(write(replacedAll(manifestText(), kRelu, k7)),
                        "ops[3] (pe.relu): the kernel library has no kernel \"" + k7 + "\""));
}

TEST_F(PackageKernels, SwappedKernelsAreRefused) {
  std::string manifest = replacedAll(manifestText(), kRelu, "stringc_kX");
  manifest = replacedAll(manifest, kMul, kRelu);
  manifest = replacedAll(manifest, "stringc_kX", kMul);
  EXPECT_TRUE(loadFails(write(manifest), "manifest.programs.forward.ops[3] (pe.relu).kernels[0]: "
                                         "kernel \"" + kMul + "\" is a \"mul\" kernel, but "
                                         "pe.relu runs a \"relu\" kernel here"));
}

TEST_F(PackageKernels, EnlargedRangesAreRefused) {
  EXPECT_TRUE(loadFails(write(replacedAll(manifestText(), "\"" + kRelu + "\", \"range\": -1",
                                          "\"" + kRelu + "\", \"range\": 1000")),
                        "ops[3] (pe.relu).kernels[0].range: 1000, but the \"relu\" kernel of "
                        "pe.relu with these shapes runs over -1 (the batch)"));
}

TEST_F(PackageKernels, AKernelRunsOnlyTheOpsItWasBuiltFor) {
  // The relu kernel (rows of 4) named by a relu of rows of 3.
  const std::string manifest = manifestText(
      R"(, {"dtype": "f32", "shape": [-1, 3]})",
      R"(, {"op": "pe.relu", "results": [13], "operands": [10], "attrs": {},
            "kernels": [{"symbol": ")" + kRelu + R"(", "range": -1, "grain": 1}]})");
  EXPECT_TRUE(loadFails(write(manifest),
                        "manifest.programs.gradients.ops[11] (pe.relu).kernels[0]: kernel \"" +
                            kRelu + "\" was generated for buffers of other sizes than the value "
                            "table gives this op (digest " + kReluDigest + ", the value table's " +
                            kernelSizeDigest({{-1, 3}, {-1, 3}}) + ")"));
}

TEST_F(PackageKernels, AValueTableEditedToOtherSizesIsRefused) {
  // Rows of 8 everywhere: inputs, values and parameters agree, so only the
  // kernels' digests tell that the kernels were built for rows of 4.
  std::string manifest = replacedAll(manifestText(), "[-1, 4]", "[-1, 8]");
  manifest = replacedAll(manifest, "\"shape\": [4]", "\"shape\": [8]");
  manifest = replacedAll(manifest, "[4, 3]", "[8, 3]");
  EXPECT_TRUE(loadFails(write(manifest),
                        "manifest.programs.forward.ops[3] (pe.relu).kernels[0]: kernel \"" +
                            kRelu + "\" was generated for buffers of other sizes than the value "
                            "table gives this op (digest " + kReluDigest + ", the value table's " +
                            kernelSizeDigest({{-1, 8}, {-1, 8}}) + ")"));
}

// The digests TestKernels.c's symbols carry are kernelSizeDigest's: relu of
// [B, 4] to [B, 4], mul of [B, 4] and [4] to [B, 4]. They also pin the
// digest, which is part of the package format.
TEST_F(PackageKernels, TheTestKernelsCarryTheirBuffersDigests) {
  EXPECT_EQ(kernelSizeDigest({{-1, 4}, {-1, 4}}), kReluDigest);
  EXPECT_EQ(kernelSizeDigest({{-1, 4}, {4}, {-1, 4}}), "1bd2da8c19f92d81");
  EXPECT_EQ(kMul, "stringc_k1_1bd2da8c19f92d81_mul");
  // Every buffer counts, in order, and a static size differs from a
  // batched one.
  EXPECT_NE(kernelSizeDigest({{-1, 4}, {4}, {-1, 4}}), kernelSizeDigest({{4}, {-1, 4}, {-1, 4}}));
  EXPECT_NE(kernelSizeDigest({{-1, 4}}), kernelSizeDigest({{4}}));
  EXPECT_NE(kernelSizeDigest({{-1, 4}}), kernelSizeDigest({{-1, 4}, {}}));
}

TEST_F(PackageKernels, KernelsOfAnOpWithoutGeneratedKernelsAreRefused) {
  const std::string manifest = replacedAll(
      manifestText(), R"("operands": [6, 3, 4], "attrs": {}})",
      R"("operands": [6, 3, 4], "attrs": {}, "kernels": [{"symbol": ")" + kMul +
          R"(", "range": -1, "grain": 1}]})");
  EXPECT_TRUE(loadFails(write(manifest), "ops[5] (pe.linear): names a compiled kernel, but "
                                         "stringc generates none for pe.linear"));
}

TEST_F(PackageKernels, TheRecordedTargetMustBeTheLibrarys) {
  EXPECT_TRUE(loadFails(write(manifestText(), libraryBytes(STRINGRT_TEST_KERNELS), kOtherTriple),
                        "but the package records target \"" + std::string(kOtherTriple) + "\""));
}

TEST_F(PackageKernels, KernelsForAnotherMachineAreNeverLoaded) {
  // A library for the other architecture: the package runs on the fast
  // kernels, and --kernels compiled says why it cannot.
  std::vector<uint8_t> library = libraryBytes(STRINGRT_TEST_KERNELS);
  std::memcpy(library.data() + offsetof(Elf64_Ehdr, e_machine), &kOtherMachine,
              sizeof kOtherMachine);
  Package package = Package::load(write(manifestText(), library, kOtherTriple));
  EXPECT_NE(package.kernelsUnavailable().find("they were compiled for \"" +
                                              std::string(kOtherTriple) + "\""),
            std::string::npos)
      << package.kernelsUnavailable();
  EXPECT_EQ(Model(package).kernels(), KernelSet::Fast);
  EXPECT_TRUE(test::failsWith([&] { Model model(package, KernelSet::Compiled); }, package.path(),
                              {"the package's compiled kernels cannot run here: they were "
                               "compiled for"}));
  EXPECT_FALSE(package.kernelLibraryLoaded());
  EXPECT_FALSE(loadedMarker());
}

// An edited value table: the compiled kernels would read and write past
// the buffers; the op's reference checks refuse it first, with the message
// of the other kernel sets.
TEST_F(PackageKernels, CompiledOpsRunTheirReferenceKernelsChecks) {
  struct Edit {
    std::string from, to, message;
  };
  // Shapes edited to others of the same sizes, so that the kernels' size
  // digests still match (an edit to other sizes is refused at load:
  // AValueTableEditedToOtherSizesIsRefused): the reference checks refuse
  // them before a kernel runs.
  const Edit edits[] = {
      // gain [4] -> [2, 2]: not a suffix of h's shape.
      {R"({"name": "gain", "shape": [4])", R"({"name": "gain", "shape": [2, 2])",
       "mul: shapes [3, 4] and [2, 2]: neither is a trailing suffix of the other"},
      // relu's result [B, 4] -> [B, 2, 2].
      {R"("shape": [4]}, {"dtype": "f32", "shape": [4, 3]}, {"dtype": "f32", "shape": [3]},
    {"dtype": "f32", "shape": [-1, 4]})",
       R"("shape": [4]}, {"dtype": "f32", "shape": [4, 3]}, {"dtype": "f32", "shape": [3]},
    {"dtype": "f32", "shape": [-1, 2, 2]})",
       "relu: result: expected shape [3, 4], got [3, 2, 2]"},
  };
  for (const Edit &edit : edits) {
    std::string manifest = replacedAll(manifestText(), edit.from, edit.to);
    if (edit.to.find("\"gain\"") != std::string::npos)
      manifest = replacedAll(manifest, R"({"dtype": "f32", "shape": [4]}, {"dtype": "f32", "shape": [4, 3]})",
                             R"({"dtype": "f32", "shape": [2, 2]}, {"dtype": "f32", "shape": [4, 3]})");
    Package package = Package::load(write(manifest));
    for (KernelSet kernels : {KernelSet::Compiled, KernelSet::Fast}) {
      Model model(package, kernels);
      model.initParameters();
      EXPECT_TRUE(test::failsWith([&] { model.run("forward", batch()); }, package.path(),
                                  {edit.message}))
          << kernelSetName(kernels);
    }
  }
}

} // namespace
} // namespace stringrt
