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
  return std::string(R"({
  "model": "tiny",
  "inputs": [{"name": "image", "dtype": "f32", "shape": [-1, 4]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [{"name": "w", "shape": [4, 3], "frozen": false, "init": "zeros"},
             {"name": "b", "shape": [3], "frozen": false, "init": "zeros"}],
  "optimizer": {"kind": "adamw", "lr": 0.002, "beta1": 0.9, "beta2": 0.999,
                "eps": 1e-8, "weight_decay": 0.05, "momentum": 0.0,
                "clip_norm": 1.0, "schedule": "constant",
                "warmup_steps": 0, "min_lr": 0.0},
  "programs": {"forward": )") +
         linearForwardProgram(4, 3) + R"(, "gradients": )" + linearGradientsProgram(4, 3) + "}}";
}

// A kernel "k" for pe.sum_to (gradients op 7) with its PTX entry point.
const char *kPtx = ".version 8.0\n.target sm_90\n.visible .entry k(\n.param .u64 k_param_0\n)\n{\nret;\n}\n";

std::string section(const std::string &kernelFields = "") {
  std::string fields = kernelFields.empty()
                           ? R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 7}])"
                           : kernelFields;
  return R"({"arch": "sm_90", "kernels": [{)" + fields + R"(}],
    "coverage": {"ops": 5, "with_kernel": 1, "without_kernel": {"forward": ["pe.linear"]}}})";
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

TEST_F(CudaSectionTest, RejectsUsesThatDoNotMatchTheManifest) {
  // gradients op 2 is pe.linear, not pe.sum_to.
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 2}])")),
                 "implements pe.sum_to but gradients op 2 is pe.linear");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "gradients", "op": 99}])")),
                 "a use's op must be an integer in [0, 7]");
  expectRejected(write(section(R"("name": "k", "op": "pe.sum_to", "params": ["ptr", "i64"],
         "grid": "elements", "block": [256, 1], "ptx": "ptx.k", "cubin": "cubin.k",
         "uses": [{"program": "eval", "op": 0}])")),
                 "unknown program \"eval\"");
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

} // namespace
} // namespace stringrt::test
