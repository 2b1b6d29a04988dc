// The launch report's model, part by part (compiler/lib/CudaGen/LaunchModel.h;
// docs/cuda.md, "Launch report"): ptxas -v's output read, occupancy against
// what Nsight Compute reported for our kernels, Little's law, the machines.
#include "LaunchModel.h"

#include <gtest/gtest.h>

using namespace stringc::cudagen;

TEST(LaunchModel, ReadsPtxasVerboseOutput) {
  const char *log = "ptxas info    : 0 bytes gmem\n"
                    "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
                    "ptxas info    : Function properties for a\n"
                    "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
                    "ptxas info    : Used 120 registers, used 1 barriers, 4608 bytes smem\n"
                    "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
                    "ptxas info    : Function properties for b\n"
                    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                    "ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]\n";
  std::optional<KernelResources> a = parsePtxasInfo(log, "a"), b = parsePtxasInfo(log, "b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->registers, 120);
  EXPECT_EQ(a->sharedBytes, 4608);
  EXPECT_EQ(a->spillBytes, 8);
  EXPECT_EQ(b->registers, 10);
  EXPECT_EQ(b->sharedBytes, 0);
  EXPECT_FALSE(parsePtxasInfo(log, "c"));
}

// The resident blocks Nsight Compute reported on H100/H200 (docs/cuda.md):
// the f32 Dh-16 attention, 120 registers x 64 threads: 25% occupancy (16
// warps); the tensor-core attention at Dh 64, 168 registers x 128 threads:
// 3 blocks, 18.75%; with 128 registers: 4 blocks.
TEST(LaunchModel, OccupancyMatchesTheProfiles) {
  GpuMachineModel h100;
  Occupancy f32 = occupancyOf({120, 0, 0}, 64, h100);
  EXPECT_EQ(f32.warpsPerSM, 16);
  EXPECT_STREQ(f32.limit, "registers");
  EXPECT_EQ(occupancyOf({168, 0, 0}, 128, h100).blocksPerSM, 3);
  EXPECT_EQ(occupancyOf({128, 0, 0}, 128, h100).blocksPerSM, 4);
  // Few registers: the warp limit (64) and the block limit (32).
  EXPECT_EQ(occupancyOf({16, 0, 0}, 256, h100).warpsPerSM, 64);
  EXPECT_EQ(occupancyOf({16, 0, 0}, 32, h100).blocksPerSM, 32);
  // Shared memory: 100 KB a block leaves room for 2 in 228 KB.
  Occupancy shared = occupancyOf({32, 100 * 1024, 0}, 128, h100);
  EXPECT_EQ(shared.blocksPerSM, 2);
  EXPECT_STREQ(shared.limit, "shared");
}

LaunchEstimate elementwise(int64_t blocks, int64_t threads, double bytes) {
  LaunchEstimate e;
  e.kernel = "test_kernel";
  e.blocks = blocks;
  e.threadsPerBlock = threads;
  e.bytes = bytes;
  e.readStreams = 2;
  e.growsWithBatch = true;
  return e;
}

// Little's law: pe_add at vit_rope 1024 (12800 blocks of 256, 39 MB: ncu
// measured 14.6 us on an H100) runs at the bandwidth; the same bytes on one
// block of 128 threads (the old single-block column sums) keep 1 KB in
// flight: latency-bound, milliseconds.
TEST(LaunchModel, LittlesLaw) {
  GpuMachineModel h100;
  KernelResources few{16, 0, 0};
  LaunchEstimate wide = elementwise(12800, 256, 39.3e6);
  applyKernelModel(nullptr, wide, 1024, &few, h100);
  EXPECT_STREQ(wide.limit, "memory");
  EXPECT_NEAR(wide.predictedSeconds, 39.3e6 / 3.35e12, 1e-9);
  EXPECT_FALSE(wide.latencyBound(h100));
  EXPECT_GT(14.6e-6 / wide.predictedSeconds, 1 / 2.0);
  EXPECT_LT(14.6e-6 / wide.predictedSeconds, 2.0);

  LaunchEstimate narrow = elementwise(1, 128, 39.3e6);
  applyKernelModel(nullptr, narrow, 1024, &few, h100);
  EXPECT_TRUE(narrow.latencyBound(h100));
  // 4 warps x 2 streams x 128 B in flight over 600 cycles at 1.98 GHz
  EXPECT_NEAR(narrow.predictedSeconds, 39.3e6 / (4 * 2 * 128 / (600 / 1.98e9)), 1e-6);
  // A vectorised elementwise kernel's warp keeps 32 lanes x 8 elements of
  // each stream in flight (bf16: 512 B a stream): four times the bytes.
  LaunchEstimate vector = elementwise(1, 128, 39.3e6);
  vector.bytesInFlightPerWarp = 2 * 32 * 8 * 2;
  applyKernelModel(nullptr, vector, 1024, &few, h100);
  EXPECT_NEAR(vector.predictedSeconds, narrow.predictedSeconds / 4, 1e-6);
  // A scalar kernel's warp keeps 32 lanes x 1 element of each stream's
  // type: two bf16 streams 64 B each, half an f32 stream's 128 B.
  LaunchEstimate scalarBf16 = elementwise(1, 128, 39.3e6);
  scalarBf16.bytesInFlightPerWarp = 2 * 32 * 2;
  applyKernelModel(nullptr, scalarBf16, 1024, &few, h100);
  EXPECT_NEAR(scalarBf16.predictedSeconds, narrow.predictedSeconds * 2, 1e-6);

  // A wrong constant moves it: with a 10x latency the wide launch is no
  // longer at the bandwidth.
  std::string message;
  mlir::FailureOr<GpuMachineModel> slow = gpuMachineByName("h100,latency_ns=3000", message);
  ASSERT_TRUE(succeeded(slow)) << message;
  LaunchEstimate wideSlow = elementwise(12800, 256, 39.3e6);
  applyKernelModel(nullptr, wideSlow, 1024, &few, *slow);
  EXPECT_GT(wideSlow.predictedSeconds, 2 * 14.6e-6);
}

TEST(LaunchModel, MachinesByName) {
  std::string message;
  mlir::FailureOr<GpuMachineModel> h200 = gpuMachineByName("h200", message);
  ASSERT_TRUE(succeeded(h200));
  EXPECT_EQ(h200->bytesPerSecond, 4.8e12);
  EXPECT_EQ(h200->sms, 132);
  mlir::FailureOr<GpuMachineModel> tuned = gpuMachineByName("h100,bandwidth=1e12,min_us=5", message);
  ASSERT_TRUE(succeeded(tuned));
  EXPECT_EQ(tuned->bytesPerSecond, 1e12);
  EXPECT_DOUBLE_EQ(tuned->minLaunchSeconds, 5e-6);
  EXPECT_TRUE(failed(gpuMachineByName("a100", message)));
  EXPECT_NE(message.find("h100 or h200"), std::string::npos);
  EXPECT_TRUE(failed(gpuMachineByName("h100,speed=2", message)));
  EXPECT_TRUE(failed(gpuMachineByName("h100,bandwidth=-1", message)));
}

// cuBLAS from the measured table: the fit's fixed cost per call, then FLOPs.
TEST(LaunchModel, GemmTable) {
  GpuMachineModel h100;
  ExtraTerm tiny = gemmTime(LaunchArithmetic::F32, 1e3, 1e3, h100);
  EXPECT_NEAR(tiny.seconds, 9.5e-6, 1e-7);
  ExtraTerm big = gemmTime(LaunchArithmetic::F32, 24e9, 1e6, h100);
  EXPECT_NEAR(big.seconds, 9.5e-6 + 1e-3, 1e-6);
  EXPECT_LT(gemmTime(LaunchArithmetic::TF32, 24e9, 1e6, h100).seconds, big.seconds);
}
