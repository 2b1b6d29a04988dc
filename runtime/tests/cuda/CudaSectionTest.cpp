// The `cuda` section of a package (CudaSection.h): loading and validation.
// No GPU needed. A package compiled by stringc is checked by
// CompiledPackageTest.cpp; these cover the validation rules one by one.
#include "TestFiles.h"
#include "TestPackages.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"

#include <gtest/gtest.h>

namespace stringrt::test {
namespace {

std::string manifest() {
  return tinyLinearManifest(linearForwardProgram(4, 3));
}

// A kernel "k" for pe.sum_to (gradients op 7) with its PTX entry point.
const char *kPtx = ".version 8.0\n.target sm_90\n.visible .entry k(\n.param .u64 k_param_0\n)\n{\nret;\n}\n";

// gradients op 7 (pe.sum_to: operand value 7, result value 9) launches "k".
const char *kSteps = R"({"forward": [], "gradients": [{"op": 7, "scratch": [],
    "launches": [{"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [3, 0]}]}]}]})";

std::string section(const std::string &kernelFields = "", const std::string &steps = kSteps,
                    const std::string &constants = "[]") {
  std::string fields = kernelFields.empty()
                           ? R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 7}])"
                           : kernelFields;
  return R"({"arch": "sm_90", "precision": "fp32", "kernels": [{)" + fields + R"(}],
    "coverage": {"ops": 5, "with_kernel": 1, "without_kernel": {"forward": ["pe.linear"]}},
    "steps": )" + steps + R"(, "constants": )" + constants + "}";
}

// The section with gradients op 7's entry replaced by `entry` (JSON object).
std::string withStep(const std::string &entry) {
  return section("", R"({"forward": [], "gradients": [)" + entry + "]}");
}

// The default kernel as a kernel of grid rule `grid` with params `params`.
std::string kernelWith(const std::string &params, const std::string &grid) {
  return R"("name": "k", "op": "pe.sum_to", "params": )" + params + R"(, "grid": ")" + grid +
         R"(", "block": [128, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 7}])";
}

class CudaSectionTest : public ::testing::Test {
protected:
  std::string write(const std::string &cudaJson, bool withCubin = true,
                    const std::string &ptx = kPtx) {
    std::string path = dir.file("model.pkg");
    std::string cubin = "not really a cubin";
    std::vector<TensorView> tensors = {
        {"ptx.k", DType::U8, {int64_t(ptx.size())}, ptx.data()}};
    if (withCubin)
      tensors.push_back({"cubin.k", DType::U8, {int64_t(cubin.size())}, cubin.data()});
    writeSafetensors(path, tensors,
                     {{"format", "stringc-package"},
                      {"version", "1"},
                      {"target", "cuda"},
                      {"manifest", manifest()},
                      {"cuda", cudaJson}});
    return path;
  }
  void expectRejected(const std::string &path, const std::string &fragment) {
    EXPECT_TRUE(failsWith([&] { Package::load(path); }, path, {fragment}));
  }
  TempDir dir;
};

TEST_F(CudaSectionTest, LoadsKernelTable) {
  Package package = Package::load(write(section()));
  ASSERT_NE(package.cuda(), nullptr);
  const CudaSection &cuda = *package.cuda();
  EXPECT_EQ(package.target(), "cuda");
  EXPECT_EQ(cuda.arch, "sm_90");
  ASSERT_EQ(cuda.kernels.size(), 1u);
  const CudaKernel &k = cuda.kernels[0];
  EXPECT_EQ(k.name, "k");
  EXPECT_EQ(k.op, "pe.sum_to");
  EXPECT_EQ(k.params, (std::vector<CudaParamKind>{CudaParamKind::Ptr, CudaParamKind::Ptr,
                                                  CudaParamKind::I64}));
  EXPECT_EQ(k.grid, CudaGridRule::Elements);
  EXPECT_EQ(k.blockX, 256);
  EXPECT_EQ(k.ptx, kPtx);
  EXPECT_EQ(std::string(k.cubin.begin(), k.cubin.end()), "not really a cubin");
  ASSERT_EQ(k.uses.size(), 1u);
  EXPECT_EQ(k.uses[0].program, "gradients");
  EXPECT_EQ(k.uses[0].op, 7);
  EXPECT_EQ(cuda.ops, 5);
  EXPECT_EQ(cuda.opsWithKernel, 1);
  ASSERT_EQ(cuda.opsWithoutKernel.size(), 1u);
  EXPECT_EQ(cuda.opsWithoutKernel[0].second, std::vector<std::string>{"pe.linear"});
  EXPECT_NE(cuda.find("k"), nullptr);
  EXPECT_EQ(cuda.find("other"), nullptr);
  // The manifest is the CPU package's: its programs still load.
  EXPECT_EQ(package.manifest().gradients.ops.size(), 8u);
  // The step program.
  ASSERT_NE(cuda.stepsOf("forward"), nullptr);
  EXPECT_TRUE(cuda.stepsOf("forward")->ops.empty());
  const CudaProgramSteps *gradients = cuda.stepsOf("gradients");
  ASSERT_NE(gradients, nullptr);
  ASSERT_EQ(gradients->ops.size(), 1u);
  const CudaOpSteps &op = gradients->ops[0];
  EXPECT_EQ(op.op, 7);
  EXPECT_TRUE(op.scratchBytes.empty());
  ASSERT_EQ(op.launches.size(), 1u);
  const CudaLaunch &launch = op.launches[0];
  EXPECT_EQ(launch.kernel, 0);
  EXPECT_FALSE(launch.gemm);
  EXPECT_FALSE(launch.grid);
  ASSERT_EQ(launch.args.size(), 3u);
  EXPECT_EQ(launch.args[0].kind, CudaArgKind::Result);
  EXPECT_EQ(launch.args[1].kind, CudaArgKind::Operand);
  EXPECT_EQ(launch.args[2].kind, CudaArgKind::I64);
  EXPECT_EQ(launch.args[2].integer.at(5), 15);
}

TEST_F(CudaSectionTest, LoadsGemmsExplicitGridsAndScratch) {
  // A GEMM for pe.linear (forward op 2) and an explicit-grid kernel with a
  // scratch buffer for pe.sum_to.
  std::string steps = R"({"forward": [{"op": 2, "scratch": [], "launches": [{"gemm": {
      "a": {"operand": 0}, "b": {"operand": 1}, "c": {"result": 0},
      "m": [1, 0], "n": [0, 3], "k": [0, 4], "count": [0, 1],
      "stride_a": [0, 0], "stride_b": [0, 0], "stride_c": [0, 0],
      "trans_a": false, "trans_b": true, "alpha": 0.5, "beta": 1}}]}],
    "gradients": [{"op": 7, "scratch": [[12, 256]], "launches": [
      {"kernel": "k", "args": [{"scratch": 0}, {"operand": 0}, {"i64": [1, 0]}, {"f32": 0.25}],
       "grid": [[0, 1], [0, 64], [0, 1]]}]}]})";
  Package package = Package::load(
      write(section(kernelWith(R"(["ptr", "ptr", "i64", "f32"])", "explicit"), steps)));
  const CudaSection &cuda = *package.cuda();
  EXPECT_EQ(cuda.kernels[0].grid, CudaGridRule::Explicit);
  const CudaLaunch &gemm = cuda.stepsOf("forward")->ops[0].launches[0];
  ASSERT_TRUE(gemm.gemm);
  EXPECT_EQ(gemm.kernel, -1);
  EXPECT_EQ(gemm.gemm->m.at(7), 7);
  EXPECT_EQ(gemm.gemm->n.at(7), 3);
  EXPECT_TRUE(gemm.gemm->transB);
  EXPECT_FALSE(gemm.gemm->transA);
  EXPECT_EQ(gemm.gemm->alpha, 0.5f);
  EXPECT_EQ(gemm.gemm->beta, 1.0f);
  EXPECT_EQ(gemm.gemm->c.kind, CudaArgKind::Result);
  const CudaOpSteps &sum = cuda.stepsOf("gradients")->ops[0];
  ASSERT_EQ(sum.scratchBytes.size(), 1u);
  EXPECT_EQ(sum.scratchBytes[0].at(2), 280);
  ASSERT_TRUE(sum.launches[0].grid);
  EXPECT_EQ((*sum.launches[0].grid)[1].at(9), 64);
  EXPECT_EQ(sum.launches[0].args[3].real, 0.25f);
}

TEST_F(CudaSectionTest, CpuPackagesHaveNoSection) {
  std::string path = dir.file("cpu.pkg");
  writePackageFile(path, manifest());
  EXPECT_EQ(Package::load(path).cuda(), nullptr);
}

TEST_F(CudaSectionTest, RejectsMalformedSections) {
  expectRejected(write("{"), "the cuda section is not valid JSON");
  expectRejected(write(R"({"arch": "sm_90", "kernels": []})"), "missing key \"coverage\"");
  std::string arch = section();
  arch.replace(arch.find("sm_90"), 5, "gfx90a");
  expectRejected(write(arch), "is not a GPU architecture");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64", "f64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k", "uses": [])")),
                 "unknown param kind \"f64\"");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "diagonal", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k", "uses": [])")),
                 "unknown grid rule \"diagonal\"");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "elements", "block": [64, 64], "ptx": "ptx.k", "cubin": "cubin.k", "uses": [])")),
                 "at most 1024 threads");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "rows", "block": [64, 4], "ptx": "ptx.k", "cubin": "cubin.k", "uses": [])")),
                 "one warp per row");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k", "uses": [])")),
                 "needs 1 i64 and a pointer parameter");
}

// "dynamic_shared" (optional): the bytes of dynamic shared memory a block of
// the kernel is launched with, past static shared memory's 48 KiB and at
// most kMaxDynamicSharedBytes; absent, 0.
TEST_F(CudaSectionTest, ReadsDynamicSharedMemory) {
  auto withShared = [](const std::string &bytes) {
    return section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "ptr", "i64"],
         "grid": "elements", "block": [256, 1], "dynamic_shared": )" + bytes + R"(,
         "ptx": "ptx.k", "cubin": "cubin.k", "uses": [{"program": "gradients", "op": 7}])");
  };
  EXPECT_EQ(Package::load(write(section())).cuda()->kernels[0].dynamicShared, 0);
  EXPECT_EQ(Package::load(write(withShared("70000"))).cuda()->kernels[0].dynamicShared, 70000);
  EXPECT_EQ(Package::load(write(withShared(std::to_string(kMaxDynamicSharedBytes))))
                .cuda()->kernels[0].dynamicShared,
            kMaxDynamicSharedBytes);
  expectRejected(write(withShared("49152")), "dynamic_shared");
  expectRejected(write(withShared(std::to_string(kMaxDynamicSharedBytes + 1))), "dynamic_shared");
  expectRejected(write(withShared("\"lots\"")), "dynamic_shared");
}

// "precision" (stringc --gpu-precision) is fp32 or bf16; anything else is refused.
TEST_F(CudaSectionTest, ReadsThePrecision) {
  std::string bf16 = section();
  bf16.replace(bf16.find("\"fp32\""), 6, "\"bf16\"");
  const Package package = Package::load(write(bf16));
  ASSERT_NE(package.cuda(), nullptr);
  EXPECT_EQ(package.cuda()->precision, "bf16");
  EXPECT_EQ(Package::load(write(section())).cuda()->precision, "fp32");
  std::string fp16 = section();
  fp16.replace(fp16.find("\"fp32\""), 6, "\"fp16\"");
  expectRejected(write(fp16), "cuda.precision \"fp16\" is not a GPU precision (fp32 or bf16)");
  std::string missing = section();
  missing.erase(missing.find("\"precision\": \"fp32\", "), 21);
  expectRejected(write(missing), "missing key \"precision\"");
}

TEST_F(CudaSectionTest, RejectsUsesThatDoNotMatchTheManifest) {
  // gradients op 2 (pe.linear) has no steps launching k.
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 2}])")),
                 "kernel \"k\" is used by gradients op 2, whose steps do not launch it");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 99}])")),
                 "a use's op must be an integer in [0, 7]");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "eval", "op": 0}])")),
                 "unknown program \"eval\"");
  // The runtime's own uses ("optimizer", "data") take op -1 only.
  expectRejected(write(section(R"("name": "k", "op": "pe.dataset", "params": ["ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "data", "op": 0}])")),
                 "a runtime use's op must be an integer in [-1, -1]");
}

TEST_F(CudaSectionTest, RejectsCorruptSteps) {
  const std::string where = "cuda.steps.gradients op 7 (pe.sum_to)";
  expectRejected(write(R"({"arch": "sm_90", "kernels": [],
    "coverage": {"ops": 0, "with_kernel": 0, "without_kernel": {}}})"),
                 "missing key \"steps\"");
  expectRejected(write(section("", R"({"forward": []})")), "cuda.steps: missing key \"gradients\"");
  auto step = [](const std::string &op, const std::string &launches,
                 const std::string &scratch = "[]") {
    return R"({"op": )" + op + R"(, "scratch": )" + scratch + R"(, "launches": )" + launches + "}";
  };
  const std::string good =
      R"([{"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [3, 0]}]}])";
  // Op indices: in range, not free, increasing.
  expectRejected(write(withStep(step("99", good))), "cuda.steps.gradients[0].op must be an integer in [0, 7]");
  expectRejected(write(withStep(step("0", good))),
                 "cuda.steps.gradients op 0 (pe.get_param): the op needs no device work");
  expectRejected(write(withStep(step("7", good) + "," + step("6", good))),
                 "op 6 is not after op 7");
  expectRejected(write(withStep(step("7", "[]"))), where + ": no launches");
  // Kernels and their arguments.
  expectRejected(write(withStep(step("7", R"([{"kernel": "nope", "args": []}])"))),
                 "kernel \"nope\" is not in cuda.kernels");
  expectRejected(write(withStep(step("7", R"([{"kernel": "k", "args": [{"result": 0}]}])"))),
                 "kernel k takes 3 arguments, got 1");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"f32": 1}, {"operand": 0}, {"i64": [0, 3]}]}])"))),
      where + " launch 0.args[0]: kernel k parameter 0 is ptr");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"result": 0}, {"operand": 1}, {"i64": [0, 3]}]}])"))),
      "(operand of pe.sum_to) must be an integer in [0, 0]");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"result": 1}, {"operand": 0}, {"i64": [0, 3]}]}])"))),
      "(result of pe.sum_to) must be an integer in [0, 0]");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"scratch": 0}, {"operand": 0}, {"i64": [0, 3]}]}])"))),
      "the op (pe.sum_to) has no scratch buffer");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"pointer": 0}, {"operand": 0}, {"i64": [0, 3]}]}])"))),
      "unknown argument kind \"pointer\"");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": 3}]}])"))),
      "args[2].i64 must be [per_batch, constant]");
  expectRejected(write(withStep(step("7", good, "[[0, -4]]"))), "scratch[0][1] must be an integer in [0,");
  // Sizes per batch element within 2^31: times any batch, they fit an int64_t.
  expectRejected(write(withStep(step("7", good, "[[2147483649, 0]]"))),
                 "scratch[0][0] must be an integer in [0, 2147483648]");
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [-4611686018427387904, 3]}]}])"))),
      "args[2].i64[0] must be an integer in [-2147483648, 2147483648]");
  // Grids: only for kernels of rule explicit, and then required.
  expectRejected(
      write(withStep(step("7", R"([{"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [0, 3]}], "grid": [[0, 1], [0, 1], [0, 1]]}])"))),
      "kernel k (grid rule elements) takes no grid");
  expectRejected(write(section(kernelWith(R"(["ptr", "ptr", "i64"])", "explicit"))),
                 "kernel k (grid rule explicit) needs a grid");
  // GEMMs: every field, pointer operands.
  const std::string gemm = R"("a": {"operand": 0}, "b": {"operand": 0}, "c": {"result": 0},
      "m": [1, 0], "n": [0, 3], "k": [0, 4], "count": [0, 1], "stride_a": [0, 0],
      "stride_b": [0, 0], "stride_c": [0, 0], "trans_a": false, "trans_b": false, "alpha": 1)";
  expectRejected(write(withStep(step("7", "[" + std::string(R"({"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [0, 3]}]}, {"gemm": {)") + gemm + "}}]"))),
                 where + " launch 1.gemm: missing key \"beta\"");
  std::string badPointer = gemm;
  badPointer.replace(badPointer.find(R"({"operand": 0})"), 14, R"({"i64": [0, 1]})");
  expectRejected(write(withStep(step("7", "[" + std::string(R"({"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [0, 3]}]}, {"gemm": {)") + badPointer + R"(, "beta": 0}}])"))),
                 "gemm.a must be an operand, result, scratch buffer or constant");
  std::string badFlag = gemm;
  badFlag.replace(badFlag.find(R"("trans_a": false)"), 16, R"("trans_a": 0)");
  expectRejected(write(withStep(step("7", "[" + std::string(R"({"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [0, 3]}]}, {"gemm": {)") + badFlag + R"(, "beta": 0}}])"))),
                 "gemm.trans_a must be true or false");
}

// {"step_key": true}: a pointer argument of a kernel (the step's key of
// random masks), never a GEMM's matrix; the writer gives it back.
TEST_F(CudaSectionTest, ReadsTheStepKeyArgument) {
  const std::string kernel = kernelWith(R"(["ptr", "ptr", "ptr", "i64"])", "elements");
  auto steps = [](const std::string &keyArg) {
    return R"({"forward": [], "gradients": [{"op": 7, "scratch": [], "launches": [
      {"kernel": "k", "args": [{"result": 0}, {"operand": 0}, )" +
           keyArg + R"(, {"i64": [3, 0]}]}]}]})";
  };
  Package package = Package::load(write(section(kernel, steps(R"({"step_key": true})"))));
  const CudaSection &cuda = *package.cuda();
  const CudaLaunch &launch = cuda.stepsOf("gradients")->ops[0].launches[0];
  EXPECT_EQ(launch.args[2].kind, CudaArgKind::StepKey);
  EXPECT_TRUE(launch.args[2].isPointer());
  EXPECT_TRUE(cuda.usesStepKey());
  EXPECT_NE(writeCudaSectionJson(cuda).find(R"({"step_key":true})"), std::string::npos)
      << writeCudaSectionJson(cuda);
  EXPECT_FALSE(Package::load(write(section())).cuda()->usesStepKey());

  expectRejected(write(section(kernel, steps(R"({"step_key": false})"))),
                 "args[2].step_key must be true");
  expectRejected(write(section(kernel, steps(R"({"step_key": 1})"))),
                 "args[2].step_key must be true");
  expectRejected(write(section("", R"({"forward": [], "gradients": [{"op": 7, "scratch": [],
      "launches": [{"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [3, 0]}]},
      {"gemm": {"a": {"step_key": true}, "b": {"operand": 0}, "c": {"result": 0},
      "m": [1, 0], "n": [0, 3], "k": [0, 4], "count": [0, 1], "stride_a": [0, 0],
      "stride_b": [0, 0], "stride_c": [0, 0], "trans_a": false, "trans_b": false, "alpha": 1,
      "beta": 0}}]}]})")),
                 "gemm.a must be an operand, result, scratch buffer or constant");
}

// {"tickets": true}: a pointer argument of a kernel launched on an explicit
// grid whose x is fixed (the counters are indexed by blockIdx.x; the device
// model holds as many as the largest such x); the writer gives it back.
TEST_F(CudaSectionTest, ReadsTheTicketsArgument) {
  const std::string kernel = kernelWith(R"(["ptr", "ptr", "ptr", "i64"])", "explicit");
  auto steps = [](const std::string &ticketsArg, const std::string &gridX) {
    return R"({"forward": [], "gradients": [{"op": 7, "scratch": [], "launches": [
      {"kernel": "k", "args": [{"result": 0}, {"operand": 0}, )" +
           ticketsArg + R"(, {"i64": [3, 0]}], "grid": [)" + gridX + R"(, [2, 0], [0, 1]]}]}]})";
  };
  Package package =
      Package::load(write(section(kernel, steps(R"({"tickets": true})", "[0, 5]"))));
  const CudaSection &cuda = *package.cuda();
  const CudaLaunch &launch = cuda.stepsOf("gradients")->ops[0].launches[0];
  EXPECT_EQ(launch.args[2].kind, CudaArgKind::Tickets);
  EXPECT_TRUE(launch.args[2].isPointer());
  EXPECT_EQ(cuda.ticketWords(), 5);
  EXPECT_NE(writeCudaSectionJson(cuda).find(R"({"tickets":true})"), std::string::npos)
      << writeCudaSectionJson(cuda);
  EXPECT_EQ(Package::load(write(section())).cuda()->ticketWords(), 0);

  expectRejected(write(section(kernel, steps(R"({"tickets": false})", "[0, 5]"))),
                 "args[2].tickets must be true");
  expectRejected(write(section(kernel, steps(R"({"tickets": true})", "[1, 5]"))),
                 "a launch taking tickets needs an explicit grid whose x is fixed");
  expectRejected(write(section(kernel, steps(R"({"tickets": true})", "[0, 1048577]"))),
                 "a launch taking tickets needs an explicit grid whose x is fixed and at most "
                 "1048576");
}

// A kernel k (ptr, ptr, ptr, i64) for gradients op 7 reading two constant
// arrays through `args` 1 and 2.
std::string constantsKernel() { return kernelWith(R"(["ptr", "ptr", "ptr", "i64"])", "elements"); }
std::string constantSteps(const std::string &first, const std::string &second) {
  return R"({"forward": [], "gradients": [{"op": 7, "scratch": [], "launches": [
      {"kernel": "k", "args": [{"result": 0}, )" + first + ", " + second +
         R"(, {"i64": [3, 0]}]}]}]})";
}
const char *kTwoConstants =
    R"([{"type": "i32", "values": [4, -1, 2147483647]}, {"type": "f32", "values": [0.5, -3]}])";

TEST_F(CudaSectionTest, LoadsConstantArrays) {
  Package package = Package::load(
      write(section(constantsKernel(), constantSteps(R"({"constant": 0})", R"({"constant": 1})"),
                    kTwoConstants)));
  const CudaSection &cuda = *package.cuda();
  ASSERT_EQ(cuda.constants.size(), 2u);
  EXPECT_EQ(cuda.constants[0].dtype, DType::I32);
  EXPECT_EQ(cuda.constants[0].i32, (std::vector<int32_t>{4, -1, 2147483647}));
  EXPECT_EQ(cuda.constants[0].size(), 3u);
  EXPECT_EQ(cuda.constants[1].dtype, DType::F32);
  EXPECT_EQ(cuda.constants[1].f32, (std::vector<float>{0.5f, -3.0f}));
  EXPECT_EQ(cuda.constants[1].data(), static_cast<const void *>(cuda.constants[1].f32.data()));
  const CudaLaunch &launch = cuda.stepsOf("gradients")->ops[0].launches[0];
  EXPECT_EQ(launch.args[1].kind, CudaArgKind::Constant);
  EXPECT_EQ(launch.args[1].index, 0);
  EXPECT_TRUE(launch.args[1].isPointer());
  EXPECT_EQ(launch.args[2].index, 1);
  // The section of a package without index tables has none.
  EXPECT_TRUE(Package::load(write(section())).cuda()->constants.empty());
}

TEST_F(CudaSectionTest, RejectsCorruptConstants) {
  const std::string both = constantSteps(R"({"constant": 0})", R"({"constant": 1})");
  auto withConstants = [&](const std::string &constants, const std::string &steps) {
    return write(section(constantsKernel(), steps, constants));
  };
  std::string noKey = section();
  noKey.erase(noKey.rfind(R"(, "constants")"));
  expectRejected(write(noKey + "}"), "the cuda section: missing key \"constants\"");
  expectRejected(withConstants(R"({"type": "i32"})", both), "cuda.constants must be an array");
  expectRejected(withConstants(R"([{"type": "i64", "values": [1]}, {"type": "f32", "values": [1]}])", both),
                 "cuda.constants[0].type must be \"i32\" or \"f32\", got \"i64\"");
  expectRejected(withConstants(R"([{"type": "i32", "values": []}, {"type": "f32", "values": [1]}])", both),
                 "cuda.constants[0].values must hold 1 to 67108864 values, got 0");
  expectRejected(withConstants(R"([{"type": "i32", "values": [1]}, {"type": "f32"}])", both),
                 "cuda.constants[1]: missing key \"values\"");
  expectRejected(
      withConstants(R"([{"type": "i32", "values": [1], "count": 1}, {"type": "f32", "values": [1]}])", both),
      "cuda.constants[0]: unknown key \"count\"");
  expectRejected(withConstants(R"([{"type": "i32", "values": [0, 2147483648]}, {"type": "f32", "values": [1]}])", both),
                 "cuda.constants[0].values[1] must be an integer in [-2147483648, 2147483647]");
  expectRejected(withConstants(R"([{"type": "i32", "values": [1.5]}, {"type": "f32", "values": [1]}])", both),
                 "cuda.constants[0].values[0] must be an integer");
  expectRejected(withConstants(R"([{"type": "i32", "values": [1]}, {"type": "f32", "values": [1, 1e39]}])", both),
                 "cuda.constants[1].values[1] must be a finite f32");
  expectRejected(withConstants(R"([{"type": "i32", "values": [1]}, {"type": "f32", "values": ["x"]}])", both),
                 "cuda.constants[1].values[0] must be a number");
  // Arguments: in range, and every array read.
  expectRejected(withConstants(kTwoConstants, constantSteps(R"({"constant": 0})", R"({"constant": 2})")),
                 "cuda.steps.gradients op 7 (pe.sum_to) launch 0.args[2] (constant of "
                 "cuda.constants) must be an integer in [0, 1]");
  expectRejected(withConstants("[]", both),
                 "launch 0.args[1]: the package has no constant arrays (cuda.constants is empty)");
  expectRejected(withConstants(kTwoConstants, constantSteps(R"({"constant": 0})", R"({"constant": 0})")),
                 "cuda.constants[1] is read by no launch");
  expectRejected(withConstants(kTwoConstants, constantSteps(R"({"constant": 0})", R"({"i64": [0, 1]})")),
                 "launch 0.args[2]: kernel k parameter 2 is ptr");
  // A GEMM reads constants but never writes one.
  const std::string gemm = R"({"forward": [], "gradients": [{"op": 7, "scratch": [], "launches": [{"gemm": {
      "a": {"constant": 0}, "b": {"constant": 1}, "c": {"constant": 1},
      "m": [0, 1], "n": [0, 1], "k": [0, 1], "count": [0, 1], "stride_a": [0, 0],
      "stride_b": [0, 0], "stride_c": [0, 0], "trans_a": false, "trans_b": false,
      "alpha": 1, "beta": 0}}, {"kernel": "k", "args": [{"result": 0}, {"constant": 0}, {"constant": 1}, {"i64": [3, 0]}]}]}]})";
  expectRejected(withConstants(kTwoConstants, gemm), "launch 0.gemm.c: a GEMM cannot write a constant array");
}

TEST_F(CudaSectionTest, RejectsMissingOrStrayBinaries) {
  expectRejected(write(section(), /*withCubin=*/false), "kernel \"k\" has no tensor \"cubin.k\"");
  expectRejected(write(section(), true, ".version 8.0\n.visible .entry other(\n)\n{\n}\n"),
                 "its PTX has no entry point k");
  // A tensor no kernel owns.
  std::string path = dir.file("stray.pkg");
  std::string ptx = kPtx, cubin = "c", stray = "x";
  writeSafetensors(path,
                   {{"ptx.k", DType::U8, {int64_t(ptx.size())}, ptx.data()},
                    {"cubin.k", DType::U8, {1}, cubin.data()},
                    {"extra", DType::U8, {1}, stray.data()}},
                   {{"format", "stringc-package"},
                    {"version", "1"},
                    {"target", "cuda"},
                    {"manifest", manifest()},
                    {"cuda", section()}});
  expectRejected(path, "tensor \"extra\" belongs to no kernel");
  // The cuda key belongs to cuda packages only.
  std::string cpu = dir.file("cpu.pkg");
  writePackageFile(cpu, manifest(), {{"cuda", section()}});
  expectRejected(cpu, "unknown metadata key \"cuda\"");
}


// A GEMM with a bias epilogue (gradients op 7, after a launch of "k") and
// the kernel table `kernels` (k first); the package carries pe_add_bias's
// binaries when the table names it.
class CudaSectionEpilogueTest : public CudaSectionTest {
protected:
  static std::string biasKernel(const std::string &params = R"(["ptr", "ptr", "i64", "i64"])") {
    return R"({"name": "pe_add_bias", "op": "pe.linear", "params": )" + params +
           R"(, "grid": "elements", "block": [256, 1], "ptx": "ptx.pe_add_bias",
           "cubin": "cubin.pe_add_bias", "uses": [{"program": "gradients", "op": 7}]})";
  }
  static std::string gemm(const std::string &extra, const std::string &beta = "0",
                          const std::string &count = "[0, 1]") {
    return R"({"gemm": {"a": {"operand": 0}, "b": {"operand": 0}, "c": {"result": 0},
      "m": [0, 1], "n": [0, 3], "k": [0, 1], "count": )" + count + R"(, "stride_a": [0, 0],
      "stride_b": [0, 0], "stride_c": [0, 3], "trans_a": false, "trans_b": false,
      "alpha": 1, "beta": )" + beta + extra + "}}";
  }
  std::string writeEpilogue(const std::string &gemmJson, bool withBiasKernel = true,
                            const std::string &biasParams = R"(["ptr", "ptr", "i64", "i64"])",
                            const std::string &valueDTypes = "") {
    std::string kernels = R"([{"name": "k", "op": "pe.sum_to", "params": ["ptr", "ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 7}]})" +
                          (withBiasKernel ? "," + biasKernel(biasParams) : "") + "]";
    std::string cuda = R"({"arch": "sm_90", "precision": "bf16", "kernels": )" + kernels + R"(,
      "coverage": {"ops": 5, "with_kernel": 1, "without_kernel": {"forward": ["pe.linear"]}},
      "steps": {"forward": [], "gradients": [{"op": 7, "scratch": [], "launches": [
        {"kernel": "k", "args": [{"result": 0}, {"operand": 0}, {"i64": [3, 0]}]}, )" +
                       gemmJson + R"(]}]}, "constants": [])" + valueDTypes + "}";
    std::string path = dir.file("epilogue.pkg");
    std::string ptx = kPtx, biasPtx = ".version 8.0\n.target sm_90\n.visible .entry "
                                      "pe_add_bias(\n.param .u64 p\n)\n{\nret;\n}\n";
    std::string cubin = "c";
    std::vector<TensorView> tensors = {{"ptx.k", DType::U8, {int64_t(ptx.size())}, ptx.data()},
                                       {"cubin.k", DType::U8, {1}, cubin.data()}};
    if (withBiasKernel) {
      tensors.push_back(
          {"ptx.pe_add_bias", DType::U8, {int64_t(biasPtx.size())}, biasPtx.data()});
      tensors.push_back({"cubin.pe_add_bias", DType::U8, {1}, cubin.data()});
    }
    writeSafetensors(path, tensors,
                     {{"format", "stringc-package"},
                      {"version", "1"},
                      {"target", "cuda"},
                      {"manifest", manifest()},
                      {"cuda", cuda}});
    return path;
  }
};

TEST_F(CudaSectionEpilogueTest, ReadsABiasEpilogue) {
  Package package = Package::load(writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 0})")));
  const CudaLaunch &launch = package.cuda()->stepsOf("gradients")->ops[0].launches[1];
  ASSERT_TRUE(launch.gemm);
  EXPECT_EQ(launch.gemm->epilogue, CudaGemmEpilogue::Bias);
  EXPECT_EQ(launch.gemm->bias.kind, CudaArgKind::Operand);
  EXPECT_EQ(launch.gemm->bias.index, 0);
  // Without the keys: no epilogue.
  Package plain = Package::load(writeEpilogue(gemm(""), /*withBiasKernel=*/false));
  EXPECT_EQ(plain.cuda()->stepsOf("gradients")->ops[0].launches[1].gemm->epilogue,
            CudaGemmEpilogue::None);
}

TEST_F(CudaSectionEpilogueTest, RejectsCorruptEpilogues) {
  const std::string where = "cuda.steps.gradients op 7 (pe.sum_to) launch 1.gemm";
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "gelu", "bias": {"operand": 0})")),
                 where + ".epilogue must be \"bias\" or \"bias_grad\", got \"gelu\"");
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": 1, "bias": {"operand": 0})")),
                 where + ".epilogue must be a string");
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "bias")")), where + ": missing key \"bias\"");
  expectRejected(writeEpilogue(gemm(R"(, "bias": {"operand": 0})")), where + ": unknown key \"bias\"");
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"i64": [0, 1]})")),
                 where + ".bias must be an operand, result, scratch buffer or constant");
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 3})")),
                 "(operand of pe.sum_to) must be an integer in [0, 0]");
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 0})", "1")),
                 where + ": a bias epilogue needs count 1, and beta 0 unless an addend is given");
  expectRejected(
      writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 0})", "0", "[1, 0]")),
      where + ": a bias epilogue needs count 1, and beta 0 unless an addend is given");
  // The fallback kernel: present, with its signature.
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 0})"), false),
                 "a GEMM has a bias epilogue but cuda.kernels has no pe_add_bias");
  expectRejected(writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 0})"), true,
                               R"(["ptr", "ptr", "i64"])"),
                 "pe_add_bias (the bias epilogue's fallback) must take (ptr, ptr, i64, i64)");
  // pe_add_bias listed as used by an op whose steps have no bias epilogue.
  expectRejected(writeEpilogue(gemm("")),
                 "kernel \"pe_add_bias\" is used by gradients op 7, whose steps do not launch it");
}

// An addend (CudaGemm::addend): what beta scales in C's place, with or
// without a bias epilogue; read, written back and read again the same.
TEST_F(CudaSectionEpilogueTest, ReadsAnAddend) {
  Package package = Package::load(writeEpilogue(
      gemm(R"(, "epilogue": "bias", "bias": {"operand": 0}, "addend": {"operand": 0})", "1")));
  const CudaGemm &g = *package.cuda()->stepsOf("gradients")->ops[0].launches[1].gemm;
  ASSERT_TRUE(g.addend);
  EXPECT_EQ(g.addend->kind, CudaArgKind::Operand);
  EXPECT_EQ(g.addend->index, 0);
  EXPECT_EQ(g.beta, 1.0f);
  EXPECT_EQ(g.epilogue, CudaGemmEpilogue::Bias);
  std::string json = writeCudaSectionJson(*package.cuda());
  EXPECT_NE(json.find(R"("addend":{"operand":0})"), std::string::npos) << json;
  Package plain = Package::load(writeEpilogue(gemm(""), false));
  EXPECT_FALSE(plain.cuda()->stepsOf("gradients")->ops[0].launches[1].gemm->addend);
}

TEST_F(CudaSectionEpilogueTest, RejectsCorruptAddends) {
  const std::string where = "cuda.steps.gradients op 7 (pe.sum_to) launch 1.gemm";
  expectRejected(writeEpilogue(gemm(R"(, "addend": {"operand": 0})"), false),
                 where + ": an addend needs beta != 0 and count 1");
  expectRejected(writeEpilogue(gemm(R"(, "addend": {"operand": 0})", "1", "[0, 2]"), false),
                 where + ": an addend needs beta != 0 and count 1");
  expectRejected(writeEpilogue(gemm(R"(, "addend": {"f32": 1})", "1"), false),
                 where + ".addend must be an operand, result, scratch buffer or constant");
  expectRejected(writeEpilogue(gemm(R"(, "addend": {"operand": 2})", "1"), false),
                 "(operand of pe.sum_to) must be an integer in [0, 0]");
  // Of C's type: a bf16 addend with an f32 C is refused.
  expectRejected(
      writeEpilogue(gemm(R"(, "addend": {"operand": 0})", "1"), false, {},
                    R"(, "value_dtypes": {"forward": [], "gradients": [[7, "BF16"]]})"),
      "launch 1: GEMM types A BF16, B BF16, C F32, addend BF16 are not a supported combination");
}

// GEMM element types follow the values' storage types (CudaGemm): bf16 A
// and B with an f32 C are a cuBLASLt combination; a bias of another type
// than C, or A and B of different types, are refused.
TEST_F(CudaSectionEpilogueTest, ChecksTheTypesOfBf16Gemms) {
  const std::string bf16 = R"(, "value_dtypes": {"forward": [], "gradients": [[7, "BF16"]]})";
  Package plain = Package::load(writeEpilogue(gemm(""), false, {}, bf16));
  EXPECT_EQ(plain.cuda()->stepsOf("gradients")->dtypeOf(7), DType::BF16);
  expectRejected(
      writeEpilogue(gemm(R"(, "epilogue": "bias", "bias": {"operand": 0})"), true,
                    R"(["ptr", "ptr", "i64", "i64"])", bf16),
      "launch 1: GEMM types A BF16, B BF16, C F32, bias BF16 are not a supported combination");
}

// A bias-gradient epilogue (CudaGemmEpilogue::BiasGrad) on gradients op 6
// (pe.linear_grad_weight: dW = x^T dy), its bias a result of the next
// entry's op (7, pe.sum_to of dy, the fallback): read, written back and read
// again the same; refused where the next entry cannot be its fallback or
// the arguments are not the epilogue's.
TEST_F(CudaSectionTest, ReadsABiasGradientEpilogue) {
  auto steps = [](const std::string &gemmExtra, const std::string &beta = "0",
                  bool withNext = true) {
    std::string gemm = R"({"op": 6, "scratch": [], "launches": [{"gemm": {"a": {"operand": 0},
      "b": {"operand": 1}, "c": {"result": 0}, "m": [0, 4], "n": [0, 3], "k": [1, 0],
      "count": [0, 1], "stride_a": [0, 0], "stride_b": [0, 0], "stride_c": [0, 0],
      "trans_a": true, "trans_b": false, "alpha": 1, "beta": )" +
                       beta + gemmExtra + "}}]}";
    std::string next = R"({"op": 7, "scratch": [], "launches": [{"kernel": "k",
      "args": [{"result": 0}, {"operand": 0}, {"i64": [3, 0]}]}]})";
    return R"({"forward": [], "gradients": [)" + gemm + (withNext ? ", " + next : "") + "]}";
  };
  const std::string epilogue = R"(, "epilogue": "bias_grad", "bias": {"result": 0})";
  Package package = Package::load(write(section("", steps(epilogue))));
  const CudaGemm &g = *package.cuda()->stepsOf("gradients")->ops[0].launches[0].gemm;
  EXPECT_EQ(g.epilogue, CudaGemmEpilogue::BiasGrad);
  EXPECT_EQ(g.bias.kind, CudaArgKind::Result);
  EXPECT_EQ(g.bias.index, 0);
  std::string json = writeCudaSectionJson(*package.cuda());
  EXPECT_NE(json.find(R"("epilogue":"bias_grad","bias":{"result":0})"), std::string::npos)
      << json;
  EXPECT_EQ(Package::load(write(json)).cuda()->stepsOf("gradients")->ops[0].launches[0]
                .gemm->epilogue,
            CudaGemmEpilogue::BiasGrad);

  const std::string where = "cuda.steps.gradients op 6 (pe.linear_grad_weight) launch 0";
  expectRejected(write(section("", steps(R"(, "epilogue": "bias_grad", "bias": {"result": 1})"))),
                 where + ": a bias_grad GEMM: bias result 1 out of range (op 7 (pe.sum_to) "
                         "has 1)");
  expectRejected(write(section("", steps(R"(, "epilogue": "bias_grad", "bias": {"operand": 0})"))),
                 where + ".gemm.bias of a bias_grad epilogue must be {\"result\": k}");
  expectRejected(write(section("", steps(epilogue, "1"))),
                 where + ".gemm: a bias_grad epilogue needs count 1, beta 0 and no addend");
  expectRejected(write(section("", steps(epilogue + R"(, "group": 2)"))),
                 where + ".gemm: a GEMM with a bias_grad epilogue is not grouped");
  // No next entry to fall back to.
  expectRejected(write(section("", steps(epilogue, "0", false))),
                 "is the program's last entry (no next entry to compute the bias gradient of)");
}

// "value_dtypes": which values a bf16 package stores in bf16. Read, written
// back by writeCudaSectionJson and read again the same; absent from a
// section that stores nothing in bf16.
TEST_F(CudaSectionTest, ReadsAndWritesValueDTypes) {
  auto bf16Section = [](const std::string &dtypes, const std::string &precision = "bf16") {
    std::string json = section();
    json.replace(json.find("\"fp32\""), 6, "\"" + precision + "\"");
    json.insert(json.rfind('}'), R"(, "value_dtypes": )" + dtypes);
    return json;
  };
  // gradients: 0 x (input), 2 w and 3 b (parameters), 4 logits, 5 loss
  // (output), 6 a constant, 7 dlogits, 8 dw (output), 9 db (output).
  const std::string valid = R"({"forward": [[2, "BF16"]], "gradients": [[3, "BF16"], [4, "BF16"], [7, "BF16"]]})";
  Package package = Package::load(write(bf16Section(valid)));
  const CudaSection &cuda = *package.cuda();
  EXPECT_TRUE(cuda.storesBf16());
  const CudaProgramSteps &gradients = *cuda.stepsOf("gradients");
  EXPECT_EQ(gradients.valueDTypes,
            (std::vector<std::pair<int64_t, DType>>{{3, DType::BF16}, {4, DType::BF16}, {7, DType::BF16}}));
  EXPECT_EQ(gradients.dtypeOf(7), DType::BF16);
  EXPECT_EQ(gradients.dtypeOf(5), DType::F32);
  EXPECT_EQ(cuda.stepsOf("forward")->dtypeOf(2), DType::BF16);
  // The round trip.
  std::string written = writeCudaSectionJson(cuda);
  EXPECT_NE(written.find(R"("value_dtypes":{"forward":[[2,"BF16"]],"gradients":[[3,"BF16"],[4,"BF16"],[7,"BF16"]]})"),
            std::string::npos)
      << written;
  Package again = Package::load(write(written));
  EXPECT_EQ(again.cuda()->stepsOf("gradients")->valueDTypes, gradients.valueDTypes);
  EXPECT_EQ(again.cuda()->stepsOf("forward")->valueDTypes, cuda.stepsOf("forward")->valueDTypes);
  // Nothing in bf16: no key written (fp32 packages keep their bytes).
  const CudaSection fp32 = *Package::load(write(section())).cuda();
  EXPECT_FALSE(fp32.storesBf16());
  EXPECT_EQ(writeCudaSectionJson(fp32).find("value_dtypes"), std::string::npos);

  // Malformed fields, each refused with what is wrong.
  const std::string at = "cuda.value_dtypes.gradients[0]";
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[7, "F16"]]})")),
                 at + ": dtype \"F16\" is not a storage type of a value (only \"BF16\"");
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[7, "bf16"]]})")),
                 at + ": dtype \"bf16\" is not a storage type");
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[7, 16]]})")),
                 at + "[1] must be a string, got number");
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[7]]})")),
                 at + " must be [value, dtype]");
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[10, "BF16"]]})")),
                 at + "[0] must be an integer in [0, 9]");
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[7, "BF16"], [4, "BF16"]]})")),
                 "cuda.value_dtypes.gradients[1]: value 4 is not after value 7");
  for (const char *value : {"0", "5", "6", "8"}) // input, output, constant, no batch dimension
    expectRejected(write(bf16Section(std::string(R"({"forward": [], "gradients": [[)") + value +
                                     R"(, "BF16"]]})")),
                   at + ": value " + value + " cannot be stored in bf16");
  expectRejected(write(bf16Section(R"({"forward": [], "gradients": [[7, "BF16"]]})", "fp32")),
                 at + ": value 7 is stored in bf16 in a package of precision fp32");
  expectRejected(write(bf16Section(R"({"forward": []})")),
                 "cuda.value_dtypes: missing key \"gradients\"");
  expectRejected(write(bf16Section(R"([])")), "cuda.value_dtypes must be an object");
}

} // namespace
} // namespace stringrt::test
