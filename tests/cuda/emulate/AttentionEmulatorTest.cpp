// The generated attention kernels run on the CPU: the cases of
// runtime/tests/cuda/AttentionCases.h (the same as on a GPU) against the
// reference kernels, on kernels that host_kernels.py rebuilt for the host
// from stringc's NVVM (the library named by STRINGC_EMULATED_KERNELS).
//
// The emulation: a launch runs its blocks one after another on blockDim.x OS
// threads (one per CUDA thread), with a std::barrier for bar.sync and
// between blocks, so a block's shared memory (the module's globals) is its
// own while it runs. This checks the kernels' indexing, masking, tiling,
// online softmax and barrier placement (a barrier not reached by every
// thread deadlocks, and the test times out) without a GPU. It does not
// check what only hardware shows: warp scheduling, the memory model beyond
// barriers, libdevice's exp/log (the host's are used), launch limits.
#include "AttentionCases.h"

#include <barrier>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <list>
#include <thread>

namespace {
thread_local int threadX, blockX, blockY, blockZ;
int gridX, gridY, gridZ, blockDimX;
std::barrier<> *blockBarrier;
} // namespace

// What host_kernels.py turns the NVVM special registers, bar.sync and the
// libdevice calls into.
extern "C" {
int emu_tid_x() { return threadX; }
int emu_tid_y() { return 0; }
int emu_tid_z() { return 0; }
int emu_ctaid_x() { return blockX; }
int emu_ctaid_y() { return blockY; }
int emu_ctaid_z() { return blockZ; }
int emu_nctaid_x() { return gridX; }
int emu_nctaid_y() { return gridY; }
int emu_nctaid_z() { return gridZ; }
int emu_ntid_x() { return blockDimX; }
int emu_ntid_y() { return 1; }
int emu_ntid_z() { return 1; }
void emu_barrier() { blockBarrier->arrive_and_wait(); }
float __nv_expf(float x) { return std::exp(x); }
float __nv_logf(float x) { return std::log(x); }
}

namespace stringrt::cuda {
namespace {

using namespace attention_cases;

class EmulatedAttention : public ::testing::Test, public Backend {
protected:
  void SetUp() override {
    const char *path = std::getenv("STRINGC_EMULATED_KERNELS");
    if (!path || !*path)
      GTEST_SKIP() << "STRINGC_EMULATED_KERNELS does not name the host build of the kernels";
    library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << dlerror();
  }
  void TearDown() override {
    if (library)
      dlclose(library);
  }

  uint64_t put(const std::vector<float> &values) override {
    buffers.push_back(values);
    return uint64_t(buffers.back().data());
  }
  std::vector<float> get(uint64_t address, size_t n) override {
    const float *p = reinterpret_cast<const float *>(address);
    return std::vector<float>(p, p + n);
  }
  void launch(const std::string &kernel, const std::vector<KernelArg> &args,
              const std::array<int64_t, 3> *grid) override {
    using Packed = void (*)(const uint64_t *);
    auto entry = reinterpret_cast<Packed>(dlsym(library, (kernel + "_packed").c_str()));
    ASSERT_NE(entry, nullptr) << "no kernel " << kernel << " in the host library";
    std::vector<uint64_t> slots;
    for (const KernelArg &a : args) {
      uint64_t slot = 0;
      if (a.kind == CudaParamKind::Ptr)
        slot = a.ptr;
      else if (a.kind == CudaParamKind::I64)
        std::memcpy(&slot, &a.i64, 8);
      else
        std::memcpy(&slot, &a.f32, 4);
      slots.push_back(slot);
    }
    // The attention kernels' blocks (explicit grids) and the skip gathers'
    // (grid-stride over n, the first i64, 256 threads).
    int64_t threads = grid ? rowsPerBlock(kernel.find("_d64") != std::string::npos ? 64 : 16)
                           : 256;
    int64_t blocks[3] = {1, 1, 1};
    if (grid) {
      for (int d = 0; d < 3; ++d)
        blocks[d] = (*grid)[d];
    } else {
      const KernelArg *n = nullptr;
      for (const KernelArg &a : args)
        if (!n && a.kind == CudaParamKind::I64)
          n = &a;
      ASSERT_NE(n, nullptr);
      blocks[0] = std::min<int64_t>((n->i64 + 255) / 256, 65536);
    }
    ASSERT_TRUE(blocks[0] < (int64_t(1) << 31) && blocks[1] <= 65535 && blocks[2] <= 65535);
    gridX = int(blocks[0]);
    gridY = int(blocks[1]);
    gridZ = int(blocks[2]);
    blockDimX = int(threads);
    std::barrier<> barrier(threads);
    blockBarrier = &barrier;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadX = t;
        for (int z = 0; z < gridZ; ++z)
          for (int y = 0; y < gridY; ++y)
            for (int x = 0; x < gridX; ++x) {
              blockX = x;
              blockY = y;
              blockZ = z;
              entry(slots.data());
              barrier.arrive_and_wait(); // the block is done before the next starts
            }
      });
    for (std::thread &thread : pool)
      thread.join();
  }

  void run(bool (*pick)(const Case &)) {
    int ran = 0;
    for (const Case &c : allCases()) {
      if (!pick(c))
        continue;
      for (bool backward : {false, true}) {
        buffers.clear();
        runCase(*this, c, backward, rng);
        if (HasFatalFailure())
          return;
      }
      ++ran;
    }
    EXPECT_GT(ran, 0);
  }

  void *library = nullptr;
  std::list<std::vector<float>> buffers;
  std::mt19937 rng{11};
};

bool plain(const Case &c) { return !c.rope && !c.rel && c.mask != Mask::Skip; }
bool relative(const Case &c) { return c.rel; }
bool rope(const Case &c) { return c.rope; }
bool skip(const Case &c) { return c.mask == Mask::Skip; }

TEST_F(EmulatedAttention, PlainForwardAndBackward) { run(plain); }
TEST_F(EmulatedAttention, RopeForwardAndBackward) { run(rope); }
TEST_F(EmulatedAttention, RelativeForwardAndBackward) { run(relative); }
TEST_F(EmulatedAttention, SkipGathers) { run(skip); }

} // namespace
} // namespace stringrt::cuda
