// The CUDA emulator's own checks, through the driver and cuBLAS API it
// exports, on the kernels of selftest_kernels.mlir (STRINGRT_EMULATED_KERNELS
// names their host build): barriers, every shuffle mode, mma.sync's fragment
// layout against a plain matrix product, ldmatrix's fragments, cp.async's
// groups, bf16 rounding, what hardware would
// hang on (reported as launch failures), stream capture and its refusals,
// and cuBLAS's column-major GEMM.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

#define CU_OK(call) ASSERT_EQ((call), CUDA_SUCCESS)

class Emulator : public ::testing::Test {
protected:
  void SetUp() override {
    CU_OK(cuInit(0));
    CU_OK(cuDevicePrimaryCtxRetain(&context, 0));
    CU_OK(cuCtxSetCurrent(context));
  }
  void TearDown() override {
    for (CUdeviceptr p : buffers)
      cuMemFree(p);
    cuDevicePrimaryCtxRelease(0);
  }

  // A module whose image names `kernel` as a PTX entry with `params` .u64
  // parameters, as the runtime hands over a package's PTX.
  CUfunction function(const std::string &kernel, int params) {
    std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry " + kernel +
                      "(\n";
    for (int i = 0; i < params; ++i)
      ptx += "  .param .u64 " + kernel + "_param_" + std::to_string(i) +
             (i + 1 < params ? ",\n" : "\n");
    ptx += ")\n{\n  ret;\n}\n";
    CUmodule module = nullptr;
    EXPECT_EQ(cuModuleLoadDataEx(&module, ptx.c_str(), 0, nullptr, nullptr), CUDA_SUCCESS);
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, module, kernel.c_str()), CUDA_SUCCESS);
    return f;
  }

  template <typename T> CUdeviceptr upload(const std::vector<T> &values) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc(&p, values.size() * sizeof(T)), CUDA_SUCCESS);
    buffers.push_back(p);
    EXPECT_EQ(cuMemcpyHtoD(p, values.data(), values.size() * sizeof(T)), CUDA_SUCCESS);
    return p;
  }
  template <typename T> std::vector<T> download(CUdeviceptr p, size_t n) {
    std::vector<T> values(n);
    EXPECT_EQ(cuMemcpyDtoH(values.data(), p, n * sizeof(T)), CUDA_SUCCESS);
    return values;
  }

  CUresult launch(CUfunction f, unsigned grid, unsigned block, std::vector<void *> args,
                  CUstream stream = nullptr) {
    return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, args.data(), nullptr);
  }

  CUcontext context = nullptr;
  std::vector<CUdeviceptr> buffers;
};

TEST_F(Emulator, DeviceLooksLikeOneSm90Gpu) {
  int count = 0, major = 0, minor = 0;
  CU_OK(cuDeviceGetCount(&count));
  EXPECT_EQ(count, 1);
  char name[128] = {};
  CU_OK(cuDeviceGetName(name, sizeof name, 0));
  EXPECT_STREQ(name, "stringrt CUDA emulator (host CPU)");
  CU_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  CU_OK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
  EXPECT_EQ(major * 10 + minor, 90);
  size_t free = 0, total = 0;
  CU_OK(cuMemGetInfo(&free, &total));
  EXPECT_GT(total, size_t(0));
  EXPECT_LE(free, total);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, total + 1), CUDA_ERROR_OUT_OF_MEMORY);
}

TEST_F(Emulator, BarrierSeparatesWritesFromReads) {
  CUfunction f = function("emu_test_barrier", 2);
  const unsigned threads = 256;
  CUdeviceptr out = upload(std::vector<float>(threads, -1.0f));
  int64_t n = threads;
  // Two blocks: the second sees the shared memory the first left, rewritten.
  CU_OK(launch(f, 2, threads, {&out, &n}));
  std::vector<float> got = download<float>(out, threads);
  for (unsigned t = 0; t < threads; ++t)
    EXPECT_EQ(got[t], float((t + 1) % threads)) << "thread " << t;
}

TEST_F(Emulator, UnwrittenMemoryReadsAsNaN) {
  // Fresh device memory, and shared memory a thread reads before its owner
  // wrote it (no barrier), are NaN rather than zeros or old values.
  CUdeviceptr fresh = 0;
  CU_OK(cuMemAlloc(&fresh, 64));
  buffers.push_back(fresh);
  EXPECT_TRUE(std::isnan(download<float>(fresh, 16)[15]));
  CUfunction f = function("emu_test_missing_barrier", 2);
  const unsigned threads = 64;
  CUdeviceptr out = upload(std::vector<float>(threads, 0.0f));
  int64_t n = threads;
  for (unsigned blocks : {1u, 2u}) { // block 1 runs its threads in reverse order
    CU_OK(launch(f, blocks, threads, {&out, &n}));
    std::vector<float> got = download<float>(out, threads);
    int nans = 0;
    for (float x : got)
      nans += std::isnan(x);
    EXPECT_GT(nans, 0) << blocks << " blocks: the missing barrier went unnoticed";
  }
}

TEST_F(Emulator, ShufflesFollowThePtxSemantics) {
  CUfunction f = function("emu_test_shuffle", 2);
  const unsigned threads = 64; // two warps
  CUdeviceptr out = upload(std::vector<float>(4 * threads, -1.0f));
  int64_t n = threads;
  CU_OK(launch(f, 1, threads, {&out, &n}));
  std::vector<float> got = download<float>(out, 4 * threads);
  for (unsigned t = 0; t < threads; ++t) {
    unsigned lane = t % 32, base = t - lane;
    EXPECT_EQ(got[4 * t + 0], float(base + (lane ^ 1))) << "bfly, thread " << t;
    EXPECT_EQ(got[4 * t + 1], float(lane == 0 ? t : t - 1)) << "up, thread " << t;
    EXPECT_EQ(got[4 * t + 2], lane + 2 <= 31 ? float(t + 2) : float(t) + 1000.0f)
        << "down (value and predicate), thread " << t;
    EXPECT_EQ(got[4 * t + 3], float(base + (lane & 24) + 5)) << "idx, thread " << t;
  }
}

uint16_t bf16Bits(float x) { // exact for the values used (bf16-representable)
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t(bits >> 16);
}

TEST_F(Emulator, MmaMatchesAMatrixProduct) {
  // A 16x16, B 16x8 of small multiples of 1/4 (exact in bf16, products and
  // sums exact in f32), C 16x8.
  std::mt19937 random(7);
  std::uniform_int_distribution<int> small(-8, 8);
  float A[16][16], B[16][8], C[16][8];
  for (auto &row : A)
    for (float &x : row)
      x = small(random) / 4.0f;
  for (auto &row : B)
    for (float &x : row)
      x = small(random) / 4.0f;
  for (auto &row : C)
    for (float &x : row)
      x = small(random);
  // The fragments, written out from the PTX ISA's tables for
  // mma.m16n8k16 .bf16: a lane's register r holds two elements, the
  // lower-indexed one in the low half.
  std::vector<uint32_t> a(32 * 4), b(32 * 2);
  std::vector<float> c(32 * 4);
  for (int lane = 0; lane < 32; ++lane) {
    int groupID = lane >> 2, threadID_in_group = lane % 4;
    for (int i = 0; i < 8; ++i) {
      int row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
      int col = (i < 4) ? threadID_in_group * 2 + (i & 1) : threadID_in_group * 2 + (i & 1) + 8;
      a[4 * lane + i / 2] |= uint32_t(bf16Bits(A[row][col])) << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      int row = (i < 2) ? threadID_in_group * 2 + (i & 1) : threadID_in_group * 2 + (i & 1) + 8;
      b[2 * lane + i / 2] |= uint32_t(bf16Bits(B[row][groupID])) << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i)
      c[4 * lane + i] = C[i < 2 ? groupID : groupID + 8][threadID_in_group * 2 + (i & 1)];
  }
  CUfunction f = function("emu_test_mma", 4);
  CUdeviceptr d = upload(std::vector<float>(32 * 4, NAN)), da = upload(a), db = upload(b),
              dc = upload(c);
  CU_OK(launch(f, 1, 32, {&d, &da, &db, &dc}));
  std::vector<float> got = download<float>(d, 32 * 4);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      int row = (lane >> 2) + (i < 2 ? 0 : 8), col = (lane % 4) * 2 + (i & 1);
      float want = C[row][col];
      for (int k = 0; k < 16; ++k)
        want += A[row][k] * B[k][col];
      EXPECT_EQ(got[4 * lane + i], want) << "D[" << row << "][" << col << "], lane " << lane;
    }
}

// ldmatrix.sync.aligned.m8n8 .b16 (PTX ISA, "Warp-level matrix load
// instruction: ldmatrix"): lane l gives row l of a 32 x 8 tile (rows 8 m ..
// 8 m + 7 are matrix m); register m of lane l holds elements (l / 4, 2 (l %
// 4)) and the next column of matrix m, or with .trans (2 (l % 4), l / 4)
// and the next row, the lower one in the low half.
TEST_F(Emulator, LdmatrixLoadsTheFragmentsOfThePtxIsa) {
  std::vector<uint16_t> tile(256);
  for (int i = 0; i < 256; ++i)
    tile[size_t(i)] = uint16_t(0x100 + i);
  auto at = [&](int m, int row, int col) { return uint32_t(tile[size_t((8 * m + row) * 8 + col)]); };
  CUfunction f = function("emu_test_ldmatrix", 2);
  CUdeviceptr out = upload(std::vector<uint32_t>(32 * 11, 0)), in = upload(tile);
  CU_OK(launch(f, 1, 32, {&out, &in}));
  std::vector<uint32_t> got = download<uint32_t>(out, 32 * 11);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, pair = 2 * (lane % 4);
    const uint32_t *r = &got[size_t(11 * lane)];
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(r[m], at(m, g, pair) | at(m, g, pair + 1) << 16) << "x4, lane " << lane;
      EXPECT_EQ(r[4 + m], at(m, pair, g) | at(m, pair + 1, g) << 16) << "x4.trans, lane " << lane;
    }
    EXPECT_EQ(r[8], r[0]) << "x2, lane " << lane;
    EXPECT_EQ(r[9], r[1]) << "x2, lane " << lane;
    EXPECT_EQ(r[10], r[0]) << "x1, lane " << lane;
  }
}

// cp.async copies land when the thread waits for their group: after
// wait_group 1 the older group is in shared memory and the newer one is not
// (the poisoned bytes show: stale data), after wait_group 0 both are; a
// thread that exits without waiting fails the launch.
TEST_F(Emulator, CpAsyncCopiesAtTheWaitForTheirGroup) {
  std::vector<uint32_t> values(256);
  for (uint32_t i = 0; i < 256; ++i)
    values[i] = 1000 + i;
  CUfunction f = function("emu_test_cp_async", 3);
  CUdeviceptr out = upload(std::vector<uint32_t>(32 * 12, 0)), in = upload(values);
  int64_t skipWait = 0;
  CU_OK(launch(f, 1, 32, {&out, &in, &skipWait}));
  std::vector<uint32_t> got = download<uint32_t>(out, 32 * 12);
  for (int t = 0; t < 32; ++t)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(got[size_t(12 * t + j)], values[size_t(4 * t + j)]) << "group 1, thread " << t;
      EXPECT_EQ(got[size_t(12 * t + 4 + j)], 0xFFFFFFFFu) << "group 2 before its wait, thread "
                                                          << t;
      EXPECT_EQ(got[size_t(12 * t + 8 + j)], values[size_t(128 + 4 * t + j)])
          << "group 2 after its wait, thread " << t;
    }
  skipWait = 1;
  testing::internal::CaptureStderr();
  CU_OK(launch(f, 1, 32, {&out, &in, &skipWait}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "exited with cp.async copies it never waited for"),
            std::string::npos);
}

TEST_F(Emulator, Bf16ConversionRoundsToNearestEven) {
  const std::vector<float> x = {1.0f,
                                1.0f + 1.0f / 256,     // a tie: down to even
                                1.0f + 3.0f / 256,     // a tie: up to even
                                1.0f + 1.0f / 256 + 1.0f / 65536, // above the tie: up
                                -2.5f, 3.4028235e38f, INFINITY, NAN};
  const std::vector<uint16_t> want = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x7F80, 0x7F80};
  CUfunction f = function("emu_test_bf16", 3);
  CUdeviceptr bits = upload(std::vector<uint16_t>(x.size(), 0)), dx = upload(x);
  int64_t n = int64_t(x.size());
  CU_OK(launch(f, 1, 32, {&bits, &dx, &n}));
  std::vector<uint16_t> got = download<uint16_t>(bits, x.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "x = " << x[i];
  EXPECT_EQ(got.back() & 0x7F80, 0x7F80) << "NaN keeps its exponent";
  EXPECT_NE(got.back() & 0x007F, 0) << "NaN stays NaN";
}

TEST_F(Emulator, BarrierSomeThreadsExitBeforeIsAnError) {
  CUfunction f = function("emu_test_exit_before_barrier", 2);
  CUdeviceptr out = upload(std::vector<float>(32, 0.0f));
  int64_t n = 16;
  // As on a GPU, the failure shows at the next synchronisation.
  CU_OK(launch(f, 1, 32, {&out, &n}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
  n = 32; // every thread reaches it: fine
  CU_OK(launch(f, 1, 32, {&out, &n}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(Emulator, WritingPastAnAllocationFaultsNamingTheKernel) {
  // Each allocation ends at a PROT_NONE page: 256 threads storing into a
  // buffer of 4 floats run past it.
  CUfunction f = function("emu_test_barrier", 2);
  CUdeviceptr small = upload(std::vector<float>(4, 0.0f));
  int64_t n = 256;
  // As on a GPU, the launch fails at the next synchronisation; the emulator
  // says where, and (unlike a GPU's context) goes on working.
  testing::internal::CaptureStderr();
  CU_OK(launch(f, 1, 256, {&small, &n}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "kernel emu_test_barrier, block (0, 0, 0) faulted: a memory access outside "
                "every device allocation"),
            std::string::npos);
  n = 4;
  CU_OK(launch(f, 1, 4, {&small, &n}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(Emulator, MisalignedAccessesFaultAsOnAGpu) {
  CUfunction f = function("emu_test_misaligned", 3);
  CUdeviceptr out = upload(std::vector<int32_t>(1, 0));
  CUdeviceptr x = upload(std::vector<int32_t>{0x11111111, 0x22222222});
  int64_t offset = 4;
  CU_OK(launch(f, 1, 1, {&out, &x, &offset}));
  EXPECT_EQ(download<int32_t>(out, 1)[0], 0x22222222);
  offset = 2;
  testing::internal::CaptureStderr();
  CU_OK(launch(f, 1, 1, {&out, &x, &offset}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("misaligned access"), std::string::npos);
}

TEST_F(Emulator, DeadlockIsReported) {
  CUfunction f = function("emu_test_deadlock", 2);
  CUdeviceptr out = upload(std::vector<float>(32, 0.0f));
  int64_t n = 16;
  CU_OK(launch(f, 1, 32, {&out, &n}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
}

TEST_F(Emulator, WarpCollectivesTheLanesCannotAllReachAreErrors) {
  CUfunction f = function("emu_test_divergent_warp", 3);
  CUdeviceptr out = upload(std::vector<float>(32, 0.0f));
  int64_t n = 16, mode = 0; // lanes 16..31 meet lane 0 at the other shuffle
  testing::internal::CaptureStderr();
  CU_OK(launch(f, 1, 32, {&out, &n, &mode}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "thread (16, 0, 0): shfl.sync (mask 0xffff0001) meets lane 0 at another warp "
                "collective (mask 0xffffffff): divergent warp collectives"),
            std::string::npos);
  mode = 1; // lanes 0..15 exit before the others' shuffle
  testing::internal::CaptureStderr();
  CU_OK(launch(f, 1, 32, {&out, &n, &mode}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "thread (16, 0, 0): shfl.sync waits for lane 0, which has exited"),
            std::string::npos);
  n = 0; // every lane at the full-mask shuffle
  CU_OK(launch(f, 1, 32, {&out, &n, &mode}));
  std::vector<float> got = download<float>(out, 32);
  for (unsigned t = 0; t < 32; ++t)
    EXPECT_EQ(got[t], float(t ^ 1)) << "thread " << t;
}

// Dynamic shared memory past 48 KiB: refused until the function opts in
// (cuFuncSetAttribute, within the device's 227 KiB), then launched with
// what the launch asks for, at most what the function allows.
TEST_F(Emulator, DynamicSharedMemoryNeedsTheFunctionsOptIn) {
  CUfunction f = function("emu_test_dynamic_shared", 2);
  const unsigned threads = 128;
  CUdeviceptr out = upload(std::vector<float>(threads, -1.0f));
  int64_t n = threads;
  void *args[] = {&out, &n};
  const unsigned bytes = (64 << 10) + threads * 4;
  int optin = 0;
  CU_OK(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
  EXPECT_EQ(optin, 227 << 10);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, bytes, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin + 1),
            CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)));
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, bytes + 16, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuLaunchKernel(f, 2, 1, 1, threads, 1, 1, bytes, nullptr, args, nullptr));
  std::vector<float> got = download<float>(out, threads);
  for (unsigned t = 0; t < threads; ++t)
    EXPECT_EQ(got[t], float((t + 1) % threads) + float(t)) << "thread " << t;
}

TEST_F(Emulator, LaunchLimitsAndMissingKernels) {
  CUfunction f = function("emu_test_barrier", 2);
  CUdeviceptr out = upload(std::vector<float>(2048, 0.0f));
  int64_t n = 1;
  void *args[] = {&out, &n};
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(f, 1, 65536, 1, 32, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  // An image without the entry, and an entry without a host build.
  CUmodule module = nullptr;
  const char *ptx = ".visible .entry no_host_build(\n .param .u64 p\n)\n{\n ret;\n}\n";
  CU_OK(cuModuleLoadDataEx(&module, ptx, 0, nullptr, nullptr));
  CUfunction missing = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&missing, module, "emu_test_barrier"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetFunction(&missing, module, "no_host_build"), CUDA_ERROR_NOT_FOUND);
  // A PTX whose parameters differ from the host build's (stale).
  const char *stale = ".visible .entry emu_test_barrier(\n .param .f32 p\n)\n{\n ret;\n}\n";
  CU_OK(cuModuleLoadDataEx(&module, stale, 0, nullptr, nullptr));
  EXPECT_EQ(cuModuleGetFunction(&missing, module, "emu_test_barrier"), CUDA_ERROR_INVALID_IMAGE);
}

TEST_F(Emulator, AsynchronousWorkShowsOnlyAfterSynchronisation) {
  // Work on a non-blocking stream runs when something waits for it: a
  // synchronous copy (legacy stream) does not, so a missing
  // cuStreamSynchronize shows as stale data, as it can on a GPU.
  CUfunction f = function("emu_test_barrier", 2);
  CUstream stream = nullptr;
  CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr out = upload(std::vector<float>(32, -1.0f));
  int64_t n = 32;
  CU_OK(launch(f, 1, 32, {&out, &n}, stream));
  EXPECT_EQ(download<float>(out, 1)[0], -1.0f) << "not synchronised yet";
  CU_OK(cuStreamSynchronize(stream));
  EXPECT_EQ(download<float>(out, 1)[0], 1.0f);
  // Through an event: a second stream's work after the first stream's.
  CUstream second = nullptr;
  CU_OK(cuStreamCreate(&second, CU_STREAM_NON_BLOCKING));
  CUevent done = nullptr;
  CU_OK(cuEventCreate(&done, 0));
  CU_OK(cuMemsetD32Async(out, 0x40400000u, 1, stream)); // 3.0f
  CU_OK(cuEventRecord(done, stream));
  CU_OK(cuStreamWaitEvent(second, done, 0));
  float host = 0;
  void *pinned = nullptr;
  CU_OK(cuMemHostAlloc(&pinned, 4, 0));
  CU_OK(cuMemcpyDtoHAsync(pinned, out, 4, second));
  CU_OK(cuStreamSynchronize(second)); // runs stream's memset first (the event)
  std::memcpy(&host, pinned, 4);
  EXPECT_EQ(host, 3.0f);
  CU_OK(cuMemFreeHost(pinned));
  CU_OK(cuEventDestroy(done));
  CU_OK(cuStreamDestroy(second));
  CU_OK(cuStreamDestroy(stream));
}

TEST_F(Emulator, CaptureRecordsAndReplaysWithTheCapturedArguments) {
  CUfunction f = function("emu_test_barrier", 2);
  CUstream stream = nullptr;
  CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr out = upload(std::vector<float>(64, -1.0f));
  CUdeviceptr flag = upload(std::vector<float>(4, 0.0f));
  int64_t n = 64;
  CU_OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CU_OK(cuMemsetD32Async(flag, 0x3F800000u, 4, stream)); // 1.0f
  CU_OK(launch(f, 1, 64, {&out, &n}, stream));
  CUdeviceptr recorded = out;
  out = 0; // changed after the launch: the graph keeps the copy
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream, &graph));
  EXPECT_EQ(download<float>(recorded, 1)[0], -1.0f) << "captured work must not run";
  EXPECT_EQ(download<float>(flag, 1)[0], 0.0f);
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, graph, 0));
  CU_OK(cuGraphLaunch(exec, stream));
  CU_OK(cuStreamSynchronize(stream));
  EXPECT_EQ(download<float>(recorded, 64)[63], 0.0f);
  EXPECT_EQ(download<float>(flag, 4)[3], 1.0f);
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuStreamDestroy(stream));
}

TEST_F(Emulator, CaptureRefusesWhatCudaRefuses) {
  CUstream stream = nullptr;
  CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
      << "the legacy stream cannot capture";
  float host[4] = {};
  CUdeviceptr buffer = upload(std::vector<float>(4, 0.0f));
  struct Refused {
    const char *what;
    std::function<CUresult()> call;
  };
  std::vector<Refused> refused = {
      {"cuMemAlloc", [&] { CUdeviceptr p; return cuMemAlloc(&p, 16); }},
      {"cuMemcpyHtoD", [&] { return cuMemcpyHtoD(buffer, host, 16); }},
      {"cuMemcpyDtoH", [&] { return cuMemcpyDtoH(host, buffer, 16); }},
      {"cuStreamSynchronize", [&] { return cuStreamSynchronize(stream); }},
      {"cuCtxSynchronize", [&] { return cuCtxSynchronize(); }},
  };
  for (const Refused &r : refused) {
    CU_OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    EXPECT_EQ(r.call(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) << r.what;
    CUgraph graph = nullptr;
    EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        << r.what;
    EXPECT_EQ(graph, nullptr);
  }
  // Relaxed mode allows the allocation.
  CU_OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_SUCCESS);
  buffers.push_back(p);
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream, &graph));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuStreamDestroy(stream));
}

TEST_F(Emulator, ForkedStreamsMustJoinTheCapture) {
  CUstream main = nullptr, side = nullptr;
  CU_OK(cuStreamCreate(&main, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  CUevent fork = nullptr, join = nullptr;
  CU_OK(cuEventCreate(&fork, 0));
  CU_OK(cuEventCreate(&join, 0));
  CUdeviceptr buffer = upload(std::vector<float>(4, 0.0f));
  for (bool joined : {true, false}) {
    CU_OK(cuStreamBeginCapture(main, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CU_OK(cuEventRecord(fork, main));
    CU_OK(cuStreamWaitEvent(side, fork, 0));
    CU_OK(cuMemsetD32Async(buffer, 0x40000000u, 4, side)); // 2.0f
    if (joined) {
      CU_OK(cuEventRecord(join, side));
      CU_OK(cuStreamWaitEvent(main, join, 0));
    }
    CUgraph graph = nullptr;
    EXPECT_EQ(cuStreamEndCapture(main, &graph),
              joined ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    if (graph) {
      CUgraphExec exec = nullptr;
      CU_OK(cuGraphInstantiate(&exec, graph, 0));
      CU_OK(cuGraphLaunch(exec, main));
      CU_OK(cuStreamSynchronize(main)); // a synchronous copy would not wait for it
      EXPECT_EQ(download<float>(buffer, 1)[0], 2.0f);
      CU_OK(cuGraphExecDestroy(exec));
      CU_OK(cuGraphDestroy(graph));
    }
  }
  CU_OK(cuEventDestroy(fork));
  CU_OK(cuEventDestroy(join));
  CU_OK(cuStreamDestroy(main));
  CU_OK(cuStreamDestroy(side));
}

// What the GPU ranks' overlapped all-reduce does (runtime/src/cuda/
// DeviceRankStep.cpp): one event recorded on the main stream again and
// again, each time waited for by a side stream that then runs a host
// function, and the main stream joining the side stream at the end, with
// nothing after the join. Host function k sees what the main stream wrote
// before fork k (cell k), they run in order, and a synchronisation of the
// main stream waits for them all (the join), eagerly and in a captured
// graph's replay.
struct SeenValues {
  const float *x;
  std::vector<float> seen;
};
void seeValue(void *data) {
  auto *values = static_cast<SeenValues *>(data);
  values->seen.push_back(values->x[values->seen.size() % 3]);
}

TEST_F(Emulator, ForksOfOneEventAgainAndAgainOrderTheSideStreamsHostFunctions) {
  CUstream main = nullptr, side = nullptr;
  CU_OK(cuStreamCreate(&main, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  CUevent fork = nullptr, join = nullptr;
  CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr x = upload(std::vector<float>(3, 0.0f));
  SeenValues values{reinterpret_cast<const float *>(x), {}};
  auto enqueue = [&](uint32_t plus) {
    uint32_t bits[3] = {0x3F800000u, 0x40000000u, 0x40400000u}; // 1, 2, 3
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(cuMemsetD32Async(x + 4 * k, bits[k] + plus, 1, main), CUDA_SUCCESS);
      ASSERT_EQ(cuEventRecord(fork, main), CUDA_SUCCESS);
      ASSERT_EQ(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
      ASSERT_EQ(cuLaunchHostFunc(side, seeValue, &values), CUDA_SUCCESS);
    }
    ASSERT_EQ(cuEventRecord(join, side), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamWaitEvent(main, join, 0), CUDA_SUCCESS);
  };
  enqueue(0);
  CU_OK(cuStreamSynchronize(main)); // the join: the side stream's functions ran
  EXPECT_EQ(values.seen, (std::vector<float>{1, 2, 3}));
  values.seen.clear();
  CU_OK(cuStreamBeginCapture(main, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  enqueue(0x00400000u); // 1.5, 3, 4 (the top bit of the mantissa added)
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(main, &graph));
  EXPECT_TRUE(values.seen.empty()) << "captured work must not run";
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, graph, 0));
  for (int replay = 1; replay <= 2; ++replay) {
    CU_OK(cuGraphLaunch(exec, main));
    CU_OK(cuStreamSynchronize(main));
    EXPECT_EQ(values.seen.size(), size_t(3 * replay));
  }
  EXPECT_EQ(values.seen, (std::vector<float>{1.5f, 3, 4, 1.5f, 3, 4}));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuEventDestroy(fork));
  CU_OK(cuEventDestroy(join));
  CU_OK(cuStreamDestroy(main));
  CU_OK(cuStreamDestroy(side));
}

// C = alpha op(A) op(B) + beta C, column-major, on the host in double.
std::vector<float> hostGemm(bool ta, bool tb, int m, int n, int k, float alpha,
                            const std::vector<float> &A, int lda, const std::vector<float> &B,
                            int ldb, float beta, std::vector<float> C, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int p = 0; p < k; ++p)
        sum += double(ta ? A[p + i * lda] : A[i + p * lda]) *
               double(tb ? B[j + p * ldb] : B[p + j * ldb]);
      float &c = C[i + j * ldc];
      c = float(alpha * sum + (beta == 0.0f ? 0.0 : double(beta) * c));
    }
  return C;
}

TEST_F(Emulator, CublasSgemmIsColumnMajorWithLeadingDimensions) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  std::mt19937 random(3);
  std::uniform_real_distribution<float> uniform(-1, 1);
  const int m = 5, n = 4, k = 3, ld = 7; // leading dimensions larger than the rows
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 0.5f}) {
        std::vector<float> A(ld * 7), B(ld * 7), C(ld * n);
        for (float &x : A)
          x = uniform(random);
        for (float &x : B)
          x = uniform(random);
        for (float &x : C)
          x = beta == 0.0f ? NAN : uniform(random); // beta 0 never reads C
        std::vector<float> want = hostGemm(ta, tb, m, n, k, 1.5f, A, ld, B, ld, beta, C, ld);
        CUdeviceptr dA = upload(A), dB = upload(B), dC = upload(C);
        float alpha = 1.5f;
        ASSERT_EQ(cublasSgemm(handle, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                              tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                              reinterpret_cast<const float *>(dA), ld,
                              reinterpret_cast<const float *>(dB), ld, &beta,
                              reinterpret_cast<float *>(dC), ld),
                  CUBLAS_STATUS_SUCCESS);
        std::vector<float> got = download<float>(dC, C.size());
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < ld; ++i) {
            float w = want[i + j * ld], g = got[i + j * ld];
            if (i >= m) // rows past m are untouched
              EXPECT_TRUE((std::isnan(w) && std::isnan(g)) || w == g);
            else
              EXPECT_NEAR(g, w, 1e-5) << "ta " << ta << " tb " << tb << " beta " << beta;
          }
      }
  // A matrix reaching past its allocation is refused, not read.
  CUdeviceptr small = upload(std::vector<float>(4, 0.0f));
  float alpha = 1.0f, beta = 0.0f;
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &alpha,
                        reinterpret_cast<const float *>(small), 4,
                        reinterpret_cast<const float *>(small), 4, &beta,
                        reinterpret_cast<float *>(small), 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &alpha, nullptr, 2, nullptr, 4,
                        &beta, nullptr, 4),
            CUBLAS_STATUS_INVALID_VALUE)
      << "lda < m";
  ASSERT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST_F(Emulator, CublasTf32RoundsTheInputs) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  // 1 + 2^-12 is not a TF32 value (10-bit mantissa): it rounds to 1.
  std::vector<float> A = {1.0f + 1.0f / 4096}, B = {1.0f};
  CUdeviceptr dA = upload(A), dB = upload(B), dC = upload(std::vector<float>(1, 0.0f));
  float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha,
                          reinterpret_cast<const float *>(dA), 1,
                          reinterpret_cast<const float *>(dB), 1, &beta,
                          reinterpret_cast<float *>(dC), 1),
              CUBLAS_STATUS_SUCCESS);
    return download<float>(dC, 1)[0];
  };
  EXPECT_EQ(run(), A[0]);
  ASSERT_EQ(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(run(), 1.0f);
  ASSERT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

// cublasGemmBatchedEx: each triple of the device pointer arrays is one
// GEMM (f32, and bf16 A and B exact in f32 with a bf16 C), the arrays read
// when the call runs (a capture replays with their contents of then), an
// array outside an allocation refused at the call, and the types cublasGemmEx
// refuses refused.
TEST_F(Emulator, CublasGemmBatchedExRunsEachTripleOfItsPointerArrays) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-1, 1);
  const int m = 3, n = 4, k = 5, count = 3;
  std::vector<std::vector<float>> A(count), B(count);
  std::vector<CUdeviceptr> dA, dB, dC;
  for (int i = 0; i < count; ++i) {
    A[i].resize(m * k);
    B[i].resize(k * n);
    for (float &x : A[i])
      x = uniform(random);
    for (float &x : B[i])
      x = uniform(random);
    dA.push_back(upload(A[i]));
    dB.push_back(upload(B[i]));
    dC.push_back(upload(std::vector<float>(m * n, NAN)));
  }
  auto pointers = [&](const std::vector<CUdeviceptr> &p) {
    return upload(std::vector<uint64_t>(p.begin(), p.end()));
  };
  CUdeviceptr arrayA = pointers(dA), arrayB = pointers(dB), arrayC = pointers(dC);
  float alpha = 1.0f, beta = 0.0f;
  auto batched = [&](cudaDataType ab, cudaDataType c, CUdeviceptr a, CUdeviceptr b,
                     CUdeviceptr cs, int batches, cublasComputeType_t compute) {
    return cublasGemmBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                               reinterpret_cast<const void *const *>(a), ab, m,
                               reinterpret_cast<const void *const *>(b), ab, k, &beta,
                               reinterpret_cast<void *const *>(cs), c, m, batches, compute,
                               CUBLAS_GEMM_DEFAULT);
  };
  ASSERT_EQ(batched(CUDA_R_32F, CUDA_R_32F, arrayA, arrayB, arrayC, count, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_SUCCESS);
  for (int i = 0; i < count; ++i) {
    std::vector<float> want =
        hostGemm(false, false, m, n, k, 1.0f, A[i], m, B[i], k, 0.0f,
                 std::vector<float>(m * n, 0.0f), m);
    std::vector<float> got = download<float>(dC[i], size_t(m * n));
    for (int e = 0; e < m * n; ++e)
      EXPECT_NEAR(got[e], want[e], 1e-5) << "GEMM " << i << " element " << e;
  }
  // Swapping two C pointers in the array swaps the results: the pointers
  // are what each GEMM writes.
  std::vector<uint64_t> swapped = {dC[1], dC[0], dC[2]};
  ASSERT_EQ(cuMemcpyHtoD(arrayC, swapped.data(), swapped.size() * 8), CUDA_SUCCESS);
  std::vector<float> before0 = download<float>(dC[0], size_t(m * n));
  ASSERT_EQ(batched(CUDA_R_32F, CUDA_R_32F, arrayA, arrayB, arrayC, count, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download<float>(dC[1], size_t(m * n)), before0);
  // bf16 A and B (1 + 2^-7 squared, exact in f32) into a bf16 C.
  std::vector<uint16_t> one(size_t(m * k), 0x3f81), other(size_t(k * n), 0x3f81);
  CUdeviceptr hA = upload(one), hB = upload(other), hC = upload(std::vector<uint16_t>(m * n, 0));
  CUdeviceptr hArrayA = pointers({hA}), hArrayB = pointers({hB}), hArrayC = pointers({hC});
  ASSERT_EQ(batched(CUDA_R_16BF, CUDA_R_16BF, hArrayA, hArrayB, hArrayC, 1, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_SUCCESS);
  // 5 (1 + 2^-6 + 2^-14) = 5.0784..., exact in f32, just above the midpoint
  // 5.078125 of the bf16 neighbours 5.0625 and 5.09375: 5.09375 (0x40a3).
  EXPECT_EQ(download<uint16_t>(hC, 1)[0], 0x40a3);
  EXPECT_EQ(batched(CUDA_R_16BF, CUDA_R_16BF, hArrayA, hArrayB, hArrayC, 1,
                    CUBLAS_COMPUTE_32F_FAST_TF32),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(batched(CUDA_R_32F, CUDA_R_16BF, arrayA, arrayB, arrayC, count, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // An array of 3 pointers read as 4: past its allocation, refused.
  EXPECT_EQ(batched(CUDA_R_32F, CUDA_R_32F, arrayA, arrayB, arrayC, count + 1,
                    CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

// cuBLASLt's bf16 layouts: bf16 A and B with a bf16 or f32 D run (products
// exact in f32: bf16 widens exactly), and what cuBLASLt has no algorithm for
// is refused by the heuristic: A and B of different types, bf16 D from f32
// inputs, bf16 data with a TF32 compute type, a bias of another type than D.
TEST_F(Emulator, CublasLtTakesBf16LayoutsAndRefusesMixedOnes) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  // 1 x 1 x 2: (1 + 2^-7) (1 + 2^-7) + 1 * 2^-16 = 1 + 2^-6 + 2^-14 + 2^-16,
  // exact in f32; rounded to bf16 on output: 1 + 2^-6.
  const uint16_t a[2] = {0x3f81, 0x3f80}, b[2] = {0x3f81, 0x3780};
  CUdeviceptr dA = upload(std::vector<uint16_t>(a, a + 2)), dB = upload(std::vector<uint16_t>(b, b + 2));
  CUdeviceptr dF = upload(std::vector<float>(4, 0.0f)), dH = upload(std::vector<uint16_t>(8, 0));
  auto matmul = [&](cudaDataType ab, cudaDataType bType, cudaDataType d, cublasComputeType_t compute,
                    CUdeviceptr out, cudaDataType biasType = CUDA_R_32F, bool bias = false) {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    if (bias) {
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const void *pointer = reinterpret_cast<const void *>(dF + 8);
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer, sizeof pointer);
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                                     sizeof biasType);
    }
    cublasLtMatrixLayoutCreate(&la, ab, 1, 2, 1);
    cublasLtMatrixLayoutCreate(&lb, bType, 2, 1, 2);
    cublasLtMatrixLayoutCreate(&ld, d, 1, 1, 1);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, preference, 1,
                                                           &result, &found);
    if (status == CUBLAS_STATUS_SUCCESS) {
      float alpha = 1.0f, beta = 0.0f;
      EXPECT_EQ(cublasLtMatmul(lt, desc, &alpha, reinterpret_cast<const void *>(dA), la,
                               reinterpret_cast<const void *>(dB), lb, &beta,
                               reinterpret_cast<const void *>(out), ld,
                               reinterpret_cast<void *>(out), ld, &result.algo, nullptr, 0, nullptr),
                CUBLAS_STATUS_SUCCESS);
      int32_t id = -1;
      size_t written = 0;
      EXPECT_EQ(cublasLtMatmulAlgoConfigGetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                     sizeof id, &written),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(written, sizeof id);
    }
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    return status;
  };
  EXPECT_EQ(matmul(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, dF),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download<float>(dF, 1)[0], 1.0f + std::ldexp(1.0f, -6) + std::ldexp(1.0f, -14) +
                                           std::ldexp(1.0f, -16));
  EXPECT_EQ(matmul(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, dH),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download<uint16_t>(dH, 1)[0], 0x3f82); // 1 + 2^-6 in bf16
  EXPECT_EQ(matmul(CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, dF),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(matmul(CUDA_R_32F, CUDA_R_32F, CUDA_R_16BF, CUBLAS_COMPUTE_32F, dH),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(matmul(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, dF),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(matmul(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, dH, CUDA_R_32F, true),
            CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
}

// cuBLASLt's bias-gradient epilogues beside the product: BGRADA writes the
// sums of op(A) over k (D's m rows of them), BGRADB those of op(B) (D's n
// columns), in D's type, each against a host sum (quarters: exact in f32);
// a bias gradient of another type than D, or not 4-byte aligned, has no
// algorithm.
TEST_F(Emulator, CublasLtBiasGradientEpiloguesSumAnOperandOverK) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const int m = 3, n = 5, k = 7;
  // A stored m x k (op N), B stored n x k (op T): op(B) is k x n.
  std::vector<float> A(m * k), B(n * k);
  for (size_t i = 0; i < A.size(); ++i)
    A[i] = float(int(i * 7 % 11) - 5) * 0.25f;
  for (size_t i = 0; i < B.size(); ++i)
    B[i] = float(int(i * 5 % 13) - 6) * 0.25f;
  CUdeviceptr dA = upload(A), dB = upload(B), dD = upload(std::vector<float>(m * n, 0.0f));
  CUdeviceptr dBias = upload(std::vector<float>(8, -1.0f));
  auto matmul = [&](cublasLtEpilogue_t epilogue, cudaDataType biasType, CUdeviceptr bias) {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    cublasOperation_t opA = CUBLAS_OP_N, opB = CUBLAS_OP_T;
    void *pointer = reinterpret_cast<void *>(bias);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                   sizeof epilogue);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                                   sizeof pointer);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                                   sizeof biasType);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, k, n);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, preference,
                                                           1, &result, &found);
    if (status == CUBLAS_STATUS_SUCCESS) {
      float alpha = 1.0f, beta = 0.0f;
      EXPECT_EQ(cublasLtMatmul(lt, desc, &alpha, reinterpret_cast<const void *>(dA), la,
                               reinterpret_cast<const void *>(dB), lb, &beta,
                               reinterpret_cast<const void *>(dD), ld,
                               reinterpret_cast<void *>(dD), ld, &result.algo, nullptr, 0,
                               nullptr),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    }
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    return status;
  };
  std::vector<float> product =
      hostGemm(false, true, m, n, k, 1.0f, A, m, B, n, 0.0f, std::vector<float>(m * n, 0.0f), m);
  ASSERT_EQ(matmul(CUBLASLT_EPILOGUE_BGRADA, CUDA_R_32F, dBias), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download<float>(dD, size_t(m * n)), product);
  std::vector<float> got = download<float>(dBias, 8);
  for (int i = 0; i < m; ++i) {
    float want = 0.0f;
    for (int p = 0; p < k; ++p)
      want += A[size_t(i + p * m)];
    EXPECT_EQ(got[size_t(i)], want) << "row " << i;
  }
  EXPECT_EQ(got[size_t(m)], -1.0f); // m elements written, no more
  ASSERT_EQ(matmul(CUBLASLT_EPILOGUE_BGRADB, CUDA_R_32F, dBias), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download<float>(dD, size_t(m * n)), product);
  got = download<float>(dBias, 8);
  for (int j = 0; j < n; ++j) {
    float want = 0.0f;
    for (int p = 0; p < k; ++p)
      want += B[size_t(j + p * n)]; // op(B)[p][j]
    EXPECT_EQ(got[size_t(j)], want) << "column " << j;
  }
  EXPECT_EQ(got[size_t(n)], -1.0f);
  // No algorithm: a bias gradient of bf16 beside an f32 D, or at 2 bytes.
  EXPECT_EQ(matmul(CUBLASLT_EPILOGUE_BGRADA, CUDA_R_16BF, dBias), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(matmul(CUBLASLT_EPILOGUE_BGRADB, CUDA_R_32F, dBias + 2), CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
}

} // namespace
