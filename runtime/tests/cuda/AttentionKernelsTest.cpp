// The attention kernels (compiler/lib/CudaGen/AttentionKernels.cpp) on the GPU
// against the reference kernels: every case of AttentionCases.h, forward and
// backward, launched as the op lowerings launch them. The kernels come from
// the package of tests/cuda/kernels.pe compiled with --gpu-all-kernels
// (STRINGRT_CUDA_TEST_PACKAGE); the tests skip without it or without a GPU.
#include "AttentionCases.h"
#include "GpuKernelSession.h"

#include "stringrt/Package.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

namespace stringrt::cuda {
namespace {

using namespace attention_cases;

class GpuAttention : public ::testing::Test, public Backend, protected GpuKernelSession {
protected:
  void SetUp() override {
    if (std::string why = open(size_t(64) << 20); !why.empty())
      GTEST_SKIP() << why;
  }

  uint64_t put(const std::vector<float> &values) override {
    return GpuKernelSession::put(values);
  }
  std::vector<float> get(uint64_t address, size_t n) override {
    return GpuKernelSession::get(address, n);
  }
  uint64_t putBf16(const std::vector<float> &values) override {
    std::vector<uint16_t> halves;
    for (float x : values)
      halves.push_back(toBf16(x));
    return putBytes(halves);
  }
  std::vector<float> getBf16(uint64_t address, size_t n) override {
    device->synchronize("test");
    std::vector<float> values;
    for (uint16_t h : arena->downloadVector<uint16_t>(offsets.at(address), n))
      values.push_back(fromBf16(h));
    return values;
  }
  void launch(const std::string &kernel, const std::vector<KernelArg> &args,
              const std::array<int64_t, 3> *grid) override {
    kernels->launch(kernel, args, kernel, grid);
  }
  void run(bool backward, bool (*pick)(const Case &),
           const std::vector<Case> &cases = allCases()) {
    int ran = 0;
    for (const Case &c : cases) {
      if (!pick(c))
        continue;
      clearBuffers(); // a case's buffers start at the arena's start
      runCase(*this, c, backward, rng);
      if (HasFatalFailure())
        return;
      ++ran;
    }
    EXPECT_GT(ran, 0);
  }
};

bool plain(const Case &c) { return !c.rope && !c.rel && c.mask != Mask::Skip; }
bool relative(const Case &c) { return c.rel; }
bool rope(const Case &c) { return c.rope; }
bool skip(const Case &c) { return c.mask == Mask::Skip; }

TEST_F(GpuAttention, ForwardMatchesReference) { run(false, plain); }
TEST_F(GpuAttention, BackwardMatchesReference) { run(true, plain); }
TEST_F(GpuAttention, RopeForwardMatchesReference) { run(false, rope); }
TEST_F(GpuAttention, RopeBackwardMatchesReference) { run(true, rope); }
TEST_F(GpuAttention, RelativeForwardMatchesReference) { run(false, relative); }
TEST_F(GpuAttention, RelativeBackwardMatchesReference) { run(true, relative); }
// The batch x head rows kernels that vit_generators' steps launch.
TEST_F(GpuAttention, RelativeRowsForwardMatchesReference) {
  run(false, relative, relRowsCases());
}
TEST_F(GpuAttention, RelativeRowsBackwardMatchesReference) {
  run(true, relative, relRowsCases());
}
// The tensor-core kernels (--gpu-precision=bf16), in the test package when
// it was compiled with that precision (as the build and gpu_packages.sh do).
bool any(const Case &) { return true; }
TEST_F(GpuAttention, Bf16ForwardMatchesReference) {
  ASSERT_NE(package->cuda()->find("pe_attention_mma_d16"), nullptr)
      << "the test package has no tensor-core kernels: compile tests/cuda/kernels.pe with "
         "--gpu-all-kernels --gpu-precision=bf16";
  run(false, any, bf16Cases());
}
TEST_F(GpuAttention, Bf16BackwardMatchesReference) {
  ASSERT_NE(package->cuda()->find("pe_attention_mma_grad_dq_d16"), nullptr)
      << "the test package has no tensor-core kernels: compile tests/cuda/kernels.pe with "
         "--gpu-all-kernels --gpu-precision=bf16";
  run(true, any, bf16Cases());
}
// Their variants reading and writing the activations in bf16 (a bf16
// package's storage).
TEST_F(GpuAttention, Bf16StorageForwardMatchesReference) {
  ASSERT_NE(package->cuda()->find("pe_attention_mma_d16__bbbb"), nullptr)
      << "the test package has no bf16-storage attention kernels: compile tests/cuda/kernels.pe "
         "with --gpu-all-kernels --gpu-precision=bf16";
  run(false, any, bf16StorageCases());
}
TEST_F(GpuAttention, Bf16StorageBackwardMatchesReference) {
  ASSERT_NE(package->cuda()->find("pe_attention_mma_grad_dq_d16__bbbbb"), nullptr)
      << "the test package has no bf16-storage attention kernels: compile tests/cuda/kernels.pe "
         "with --gpu-all-kernels --gpu-precision=bf16";
  run(true, any, bf16StorageCases());
}
// Head dim 128: tiles in dynamic shared memory (the f32 kernels' 53-66 KiB,
// the tensor-core kernels' 68-87 KiB), the functions opted in at load.
TEST_F(GpuAttention, HeadDim128MatchesReference) {
  run(false, any, headDim128Cases(false));
  run(true, any, headDim128Cases(false));
}
TEST_F(GpuAttention, Bf16HeadDim128MatchesReference) {
  ASSERT_NE(package->cuda()->find("pe_attention_mma_d128"), nullptr)
      << "the test package has no tensor-core kernels: compile tests/cuda/kernels.pe with "
         "--gpu-all-kernels --gpu-precision=bf16";
  run(false, any, headDim128Cases(true));
  run(true, any, headDim128Cases(true));
  run(false, any, headDim128Cases(true, true));
  run(true, any, headDim128Cases(true, true));
}

// Variants with some activations in f32 and some in bf16 (vit_cayley's).
TEST_F(GpuAttention, Bf16MixedStorageMatchesReference) {
  ASSERT_NE(package->cuda()->find("pe_attention_mma_grad_dq_d16__ffffb"), nullptr)
      << "the test package has no mixed-storage attention kernels: compile tests/cuda/kernels.pe "
         "with the --gpu-kernel options of tests/cuda/CMakeLists.txt";
  run(false, any, bf16MixedStorageCases());
  run(true, any, bf16MixedStorageCases());
}

TEST_F(GpuAttention, SkipGathersMatchReference) {
  run(false, skip);
  run(true, skip);
}

// A launch whose argument list does not match the kernel is refused with the
// kernel's name (the lowering and these tests must agree with the kernels).
TEST_F(GpuAttention, WrongArgumentsAreRefused) {
  std::array<int64_t, 3> grid = {1, 1, 1};
  try {
    kernels->launch("pe_attention_d16", {KernelArg::integer(1)}, "bad launch", &grid);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("pe_attention_d16"), std::string::npos)
        << error.what();
  }
}

} // namespace
} // namespace stringrt::cuda
