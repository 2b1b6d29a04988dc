// Runs a launch of a host-built kernel (Emulator.h): blocks one after
// another, the CUDA threads of a block as fibers on this OS thread, switched
// round-robin. A fiber runs until it finishes or waits: at bar.sync
// (emu_barrier) until every thread of the block has arrived, at a warp
// shuffle, mma.sync or ldmatrix until every lane of the mask has. A
// thread's cp.async copies are queued and done when it waits for their group
// (cp.async.wait_group), so a missing wait reads stale shared memory. What
// hardware would
// hang on or leave undefined is an error naming the kernel: a barrier some
// threads exit without reaching, threads at two different barriers, lanes at
// different warp collectives, a shuffle reading a lane outside its mask, no
// thread able to run (deadlock).
#include "Emulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <unistd.h>

namespace stringrt::emulator {
namespace {

// ---- Context switch (x86-64 System V) ----
// emu_switch(save, load): saves the callee-saved registers and the stack
// pointer into *save, then resumes the context whose stack pointer is
// `load`. The SSE and x87 control words are not switched (ldmxcsr and fldcw
// were most of a switch's time): runBlock sets the defaults once for all
// the fibers of a block, and the kernels never change them.
extern "C" void emu_switch(void **save, void *load);
asm(R"(
  .text
  .p2align 4
  .type emu_switch,@function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");

constexpr size_t kStackBytes = size_t(64) << 10; // per CUDA thread
constexpr size_t kGuardBytes = size_t(4) << 10;  // PROT_NONE below each stack
// Each stack's top is moved up by (index % 16) * 256 bytes into a page of its
// own above it: the tops of the stacks, where the fibers switch, would
// otherwise all share the same few cache sets (stacks 68 KiB apart), and a
// switch would miss the cache.
constexpr size_t kColourBytes = size_t(4) << 10;
constexpr size_t kSlotBytes = kGuardBytes + kStackBytes + kColourBytes;
constexpr unsigned kWarp = 32;

enum class State { Ready, AtBarrier, AtWarp, Done };
enum class Collective { Shuffle, Mma, Ldmatrix };

// One cp.async copy: `bytes` from `src` to the shared `dst`, the bytes past
// `srcBytes` zero-filled (cp.async's src-size).
struct AsyncCopy {
  void *dst = nullptr;
  const void *src = nullptr;
  uint32_t bytes = 0, srcBytes = 0;
};

struct Thread {
  void *sp = nullptr;
  std::array<unsigned, 3> tid{};
  unsigned linear = 0;
  State state = State::Ready;
  // The warp collective this lane waits at, its operands and results.
  Collective collective = Collective::Shuffle;
  uint32_t mask = 0;
  uint32_t mode = 0, value = 0, b = 0, c = 0;
  uint32_t mmaA[4]{}, mmaB[2]{};
  float mmaC[4]{};
  uint32_t result = 0;
  bool pred = false;
  float mmaD[4]{};
  // ldmatrix: the row address this lane gives, the matrices (1, 2, 4),
  // transposed or not, and the lane's registers.
  const char *rowAddress = nullptr;
  uint32_t matrices = 0;
  bool transposed = false;
  uint32_t fragments[4]{};
  // cp.async: copies issued since the last commit_group, then the committed
  // groups, oldest first.
  // (A vector, not a std::deque, which allocates when constructed: a
  // launch makes a Thread for each CUDA thread.)
  std::vector<AsyncCopy> uncommitted;
  std::vector<std::vector<AsyncCopy>> groups;

  // A fresh thread `linear` of a block: every field as constructed, the
  // copy queues emptied in place, their memory kept for the next block.
  void reset(unsigned linearIndex, const std::array<unsigned, 3> &index) {
    sp = nullptr;
    tid = index;
    linear = linearIndex;
    state = State::Ready;
    collective = Collective::Shuffle;
    mask = mode = value = b = c = 0;
    std::fill(std::begin(mmaA), std::end(mmaA), 0u);
    std::fill(std::begin(mmaB), std::end(mmaB), 0u);
    std::fill(std::begin(mmaC), std::end(mmaC), 0.0f);
    result = 0;
    pred = false;
    std::fill(std::begin(mmaD), std::end(mmaD), 0.0f);
    rowAddress = nullptr;
    matrices = 0;
    transposed = false;
    std::fill(std::begin(fragments), std::end(fragments), 0u);
    uncommitted.clear();
    groups.clear();
  }
};

// Stacks for up to 1024 fibers, mapped once and reused (at least
// kStackBytes each).
struct StackPool {
  char *base = nullptr;
  size_t count = 0;
  char *top(size_t index) {
    if (index >= count) {
      if (base)
        munmap(base, count * kSlotBytes);
      count = 1024;
      base = static_cast<char *>(mmap(nullptr, count * kSlotBytes,
                                      PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                                      0));
      if (base == MAP_FAILED) {
        base = nullptr;
        count = 0;
        return nullptr;
      }
      for (size_t i = 0; i < count; ++i)
        mprotect(base + i * kSlotBytes, kGuardBytes, PROT_NONE);
    }
    return base + index * kSlotBytes + kGuardBytes + kStackBytes + (index % 16) * 256;
  }
};

// Which lanes of a warp wait at a warp collective and which have exited, as
// the threads' states say (kept with them), so that an arriving lane checks
// the others in a few bit operations: `group`, lanes at the collective
// (kind, mask), all with the same operands' shape; lanes at a collective
// outside `group` are checked one by one, as is any arrival where a check
// may fail (arriveAtWarpCollective).
struct WarpLanes {
  uint32_t atWarp = 0, done = 0, group = 0;
  Collective kind = Collective::Shuffle;
  uint32_t mask = 0;
};

struct Block {
  const HostKernel *kernel = nullptr;
  const uint64_t *slots = nullptr;
  LaunchDims dims;
  std::array<unsigned, 3> ctaid{};
  std::vector<Thread> threads;
  std::vector<WarpLanes> warps;
  bool reverse = false; // the threads in the reverse order (runKernel)
  void *schedulerSp = nullptr;
  void *straightSp = nullptr; // straightMain's fiber
  unsigned atBarrier = 0, exited = 0;
  void *barrierSite = nullptr;
  std::string error;
};

// The block being run and the fiber running (this OS thread). Initial-exec
// TLS: the kernels read them at every special register and collective, and
// the default model of a shared library calls __tls_get_addr each time.
__attribute__((tls_model("initial-exec"))) thread_local Block *currentBlock = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local Thread *self = nullptr;
thread_local StackPool stacks;

std::string where(const Block &block, const Thread &thread) {
  return fmt::format("kernel {}, block ({}, {}, {}), thread ({}, {}, {})", block.kernel->name,
                     block.ctaid[0], block.ctaid[1], block.ctaid[2], thread.tid[0], thread.tid[1],
                     thread.tid[2]);
}

// Back to the scheduler; returns when this fiber is resumed.
void yieldToScheduler() { emu_switch(&self->sp, currentBlock->schedulerSp); }

// Stops the block: the fiber never resumes, the launch fails with `why`.
[[noreturn]] void failBlock(const std::string &why) {
  Block &block = *currentBlock;
  if (block.error.empty())
    block.error = fmt::format("{}: {}", where(block, *self), why);
  self->state = State::Done;
  yieldToScheduler();
  __builtin_unreachable();
}

// The calling thread has returned from the kernel: it is done, unless it
// leaves others waiting for it (then the block fails).
void exitThread() {
  Block &block = *currentBlock;
  // A thread leaving while others wait at a barrier: they would wait for it
  // forever (or, on hardware, undefined).
  if (block.atBarrier > 0)
    failBlock(fmt::format("exited while {} threads wait at a barrier (bar.sync not reached by "
                          "every thread)",
                          block.atBarrier));
  if (!self->uncommitted.empty() || !self->groups.empty())
    failBlock("exited with cp.async copies it never waited for (cp.async.wait_group); their "
              "data is never known to be in shared memory");
  ++block.exited;
  self->state = State::Done;
  WarpLanes &lanes = block.warps[self->linear / kWarp];
  lanes.done |= 1u << (self->linear % kWarp);
  // A lane of this warp waiting for this one at a warp collective?
  const size_t warpBase = self->linear - self->linear % kWarp;
  const size_t warpEnd = lanes.atWarp == 0 ? warpBase
                                           : std::min(block.threads.size(), warpBase + kWarp);
  for (size_t lane = warpBase; lane < warpEnd; ++lane)
    if (const Thread &t = block.threads[lane];
        t.state == State::AtWarp && (t.mask >> (self->linear % kWarp)) & 1u)
      failBlock(fmt::format("exited while lane {} waits for it at a warp collective (mask "
                            "{:#010x})",
                            t.linear % kWarp, t.mask));
}

// A CUDA thread's fiber.
[[noreturn]] void fiberMain() {
  currentBlock->kernel->packed(currentBlock->slots);
  exitThread();
  yieldToScheduler();
  __builtin_unreachable();
}

// A kernel that never waits for another thread (no bar.sync and no warp
// collective: HostKernel::waits) runs the block's threads on one fiber, one
// after another, each to its end: in the order the scheduler would run
// their fibers (runBlock), each to its end as it would, with one switch for
// the block instead of two per thread.
[[noreturn]] void straightMain() {
  Block &block = *currentBlock;
  const size_t threads = block.threads.size();
  for (size_t k = 0; k < threads; ++k) {
    self = &block.threads[block.reverse ? threads - 1 - k : k];
    block.kernel->packed(block.slots);
    exitThread();
  }
  yieldToScheduler();
  __builtin_unreachable();
}

extern "C" void emu_fiber_entry() { fiberMain(); }
extern "C" void emu_straight_entry() { straightMain(); }

// A fiber's first stack pointer on the stack ending at `top`, to start at
// `entry`: the initial frame emu_switch pops (six registers and the "return
// address" `entry` starts at); `top` is 16-byte aligned and the entry sees
// rsp = top - 8, as after a call.
void *fiberStart(char *top, void (*entry)()) {
  auto *sp = reinterpret_cast<uint64_t *>(top);
  *--sp = 0;                                                // the entry's return slot
  *--sp = reinterpret_cast<uint64_t>(entry);                // emu_switch's ret
  for (int i = 0; i < 6; ++i)
    *--sp = 0;                                              // rbp, rbx, r12..r15
  return sp;
}

// All lanes of `mask` in the caller's warp have arrived at the same
// collective: compute every lane's result and wake them. Returns why it
// cannot ("" when done).
std::string completeShuffle(Block &block, unsigned warpBase, uint32_t mask) {
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    if (!((mask >> lane) & 1u))
      continue;
    Thread &t = block.threads[warpBase + lane];
    uint32_t cval = t.c & 0x1f, segmask = (t.c >> 8) & 0x1f, bval = t.b & 0x1f;
    uint32_t maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask;
    uint32_t j = lane;
    bool inRange = false;
    switch (t.mode) {
    case 0: j = lane - bval; inRange = int(j) >= int(maxLane); break; // up
    case 1: j = lane + bval; inRange = j <= maxLane; break;          // down
    case 2: j = lane ^ bval; inRange = j <= maxLane; break;          // bfly
    case 3: j = minLane | (bval & ~segmask); inRange = j <= maxLane; break; // idx
    }
    if (!inRange)
      j = lane;
    if (!((mask >> j) & 1u) || warpBase + j >= block.threads.size())
      return fmt::format("shfl.sync of lane {} reads lane {}, which is not in the mask "
                         "{:#010x} (undefined on hardware)",
                         lane, j, mask);
    t.pred = inRange;
    t.result = block.threads[warpBase + j].value;
  }
  for (unsigned lane = 0; lane < kWarp; ++lane)
    if ((mask >> lane) & 1u)
      block.threads[warpBase + lane].state = State::Ready;
  return "";
}

float bf16ToFloat(uint32_t half) {
  uint32_t bits = half << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// D += A B, each element's sum over k = 0 .. 15 in that order, in double
// (a product of bf16 values is exact in double): a row's eight columns side
// by side, as vectors where the host has AVX2.
__attribute__((target_clones("avx2", "default"))) void
mmaAccumulate(const float (&A)[16][16], const float (&B)[16][8], double (&D)[16][8]) {
  for (unsigned row = 0; row < 16; ++row)
    for (unsigned k = 0; k < 16; ++k) {
      const double a = A[row][k];
      for (unsigned col = 0; col < 8; ++col)
        D[row][col] += a * double(B[k][col]);
    }
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, with the fragment
// layout of the PTX ISA ("Matrix Fragments for mma.m16n8k16"): groupID =
// lane >> 2, tig = lane % 4; the low 16 bits of a register hold the
// lower-indexed element. Products of bf16 are exact in f32; the sum over k
// is formed in double and rounded once (hardware: f32 or wider).
void completeMma(Block &block, unsigned warpBase) {
  float A[16][16], B[16][8];
  double D[16][8];
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    const Thread &t = block.threads[warpBase + lane];
    unsigned group = lane >> 2, tig = lane % 4;
    for (unsigned i = 0; i < 8; ++i) {
      uint32_t half = (t.mmaA[i / 2] >> (16 * (i & 1))) & 0xffffu;
      unsigned row = group + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0);
      unsigned col = 2 * tig + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = bf16ToFloat(half);
    }
    for (unsigned i = 0; i < 4; ++i) {
      uint32_t half = (t.mmaB[i / 2] >> (16 * (i & 1))) & 0xffffu;
      unsigned k = 2 * tig + (i & 1) + (i >= 2 ? 8 : 0);
      B[k][group] = bf16ToFloat(half);
    }
    for (unsigned i = 0; i < 4; ++i)
      D[group + (i >= 2 ? 8 : 0)][2 * tig + (i & 1)] = t.mmaC[i];
  }
  mmaAccumulate(A, B, D);
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    Thread &t = block.threads[warpBase + lane];
    unsigned group = lane >> 2, tig = lane % 4;
    for (unsigned i = 0; i < 4; ++i)
      t.mmaD[i] = float(D[group + (i >= 2 ? 8 : 0)][2 * tig + (i & 1)]);
    t.state = State::Ready;
  }
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].b16 (PTX ISA, "Warp-level
// matrix load instruction: ldmatrix"): lanes 8 m .. 8 m + 7 give the
// addresses of rows 0..7 of matrix m (16 bytes each, 16-byte aligned); lane
// l receives in register m the elements (row l / 4, columns 2 (l % 4) and
// the next) of matrix m, the lower column in the low half; with .trans, the
// elements (rows 2 (l % 4) and the next, column l / 4).
std::string completeLdmatrix(Block &block, unsigned warpBase) {
  const Thread &first = block.threads[warpBase];
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    const Thread &t = block.threads[warpBase + lane];
    if (t.matrices != first.matrices || t.transposed != first.transposed)
      return fmt::format("ldmatrix of lane {} (x{}{}) meets lane 0's (x{}{}): divergent shapes",
                         lane, t.matrices, t.transposed ? ".trans" : "", first.matrices,
                         first.transposed ? ".trans" : "");
    if (lane < 8 * first.matrices && reinterpret_cast<uintptr_t>(t.rowAddress) % 16 != 0)
      return fmt::format("ldmatrix: lane {} gives the row address {}, not 16-byte aligned",
                         lane, static_cast<const void *>(t.rowAddress));
  }
  auto element = [&](unsigned m, unsigned row, unsigned col) {
    uint16_t half;
    std::memcpy(&half, block.threads[warpBase + 8 * m + row].rowAddress + 2 * col, 2);
    return uint32_t(half);
  };
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    Thread &t = block.threads[warpBase + lane];
    const unsigned g = lane / 4, pair = 2 * (lane % 4);
    for (unsigned m = 0; m < first.matrices; ++m)
      t.fragments[m] = first.transposed
                           ? element(m, pair, g) | (element(m, pair + 1, g) << 16)
                           : element(m, g, pair) | (element(m, g, pair + 1) << 16);
    t.state = State::Ready;
  }
  return "";
}

// The calling lane arrives at a warp collective (its operands already in
// *self); returns once every lane of the mask has arrived and the results
// are in.
void arriveAtWarpCollective(Collective kind, uint32_t mask) {
  Block &block = *currentBlock;
  unsigned lane = self->linear % kWarp, warpBase = self->linear - lane;
  const char *name = kind == Collective::Mma        ? "mma.sync"
                     : kind == Collective::Ldmatrix ? "ldmatrix.sync"
                                                    : "shfl.sync";
  if (!((mask >> lane) & 1u))
    failBlock(fmt::format("{} with mask {:#010x}, which does not include the calling lane {}",
                          name, mask, lane));
  self->collective = kind;
  self->mask = mask;
  self->state = State::AtWarp;
  WarpLanes &lanes = block.warps[warpBase / kWarp];
  const uint32_t selfBit = 1u << lane;
  const size_t inBlock = block.threads.size() - warpBase;
  const uint32_t present = inBlock >= kWarp ? 0xffffffffu : (1u << inBlock) - 1;
  const uint32_t waiting = mask & lanes.atWarp;
  const bool sameShape = lanes.group == 0 || (lanes.kind == kind && lanes.mask == mask);
  // The checks below cannot fail: every lane of the mask is in the block,
  // none has exited, and those at a collective are at this one.
  const bool checked = (mask & ~present) == 0 && (mask & lanes.done) == 0 &&
                       (waiting & ~lanes.group) == 0 && (waiting == 0 || sameShape);
  bool all = true;
  for (unsigned other = 0; !checked && other < kWarp; ++other) {
    if (!((mask >> other) & 1u))
      continue;
    if (warpBase + other >= block.threads.size())
      failBlock(fmt::format("{} with mask {:#010x} names lane {}, which the block (of {} "
                            "threads) does not have",
                            name, mask, other, block.threads.size()));
    const Thread &t = block.threads[warpBase + other];
    if (t.state == State::Done)
      failBlock(fmt::format("{} waits for lane {}, which has exited", name, other));
    if (t.state == State::AtWarp && (t.collective != kind || t.mask != mask))
      failBlock(fmt::format("{} (mask {:#010x}) meets lane {} at another warp collective (mask "
                            "{:#010x}): divergent warp collectives",
                            name, mask, other, t.mask));
    if (t.state != State::AtWarp)
      all = false;
  }
  lanes.atWarp |= selfBit;
  if (sameShape) {
    lanes.group |= selfBit;
    lanes.kind = kind;
    lanes.mask = mask;
  }
  if (checked)
    all = (lanes.atWarp & mask) == mask;
  if (all) {
    // Every lane of the mask goes on (once computed: else the block fails).
    lanes.atWarp &= ~mask;
    lanes.group &= ~mask;
    if (kind == Collective::Mma) {
      completeMma(block, warpBase);
    } else if (kind == Collective::Ldmatrix) {
      if (std::string error = completeLdmatrix(block, warpBase); !error.empty())
        failBlock(error);
    } else if (std::string error = completeShuffle(block, warpBase, mask); !error.empty()) {
      failBlock(error);
    }
    return;
  }
  yieldToScheduler();
}

std::string describeStates(const Block &block) {
  unsigned barrier = 0, warp = 0, done = 0;
  for (const Thread &t : block.threads) {
    barrier += t.state == State::AtBarrier;
    warp += t.state == State::AtWarp;
    done += t.state == State::Done;
  }
  return fmt::format("{} threads wait at a barrier, {} at a warp collective, {} have exited",
                     barrier, warp, done);
}

// A kernel touching memory outside every allocation (each ends at a
// PROT_NONE page) or overflowing its fiber's stack faults: say which kernel
// and block, then go back to the block's runner (runBlock), which fails the
// launch as a GPU would: CUDA_ERROR_ILLEGAL_ADDRESS (or _MISALIGNED_ADDRESS)
// from the synchronisation that ran it, and the process goes on. A fault
// outside a kernel's fibers kills the process as it would have.
thread_local char faultMessage[512];
thread_local sigjmp_buf *faultRecovery = nullptr; // set while a block runs
constexpr int kFaulted = 1, kMisaligned = 2;      // sigsetjmp's return values

void onFault(int signal, siginfo_t *info, void *) {
  ssize_t ignored = write(2, faultMessage, std::strlen(faultMessage));
  // host_kernels.py sends a misaligned access to address 16.
  const bool misaligned = info && info->si_addr == reinterpret_cast<void *>(16);
  if (misaligned) {
    const char *text = "stringrt CUDA emulator: it was a misaligned access (an address "
                       "not a multiple of its size: CUDA_ERROR_MISALIGNED_ADDRESS on a "
                       "GPU)\n";
    ignored = write(2, text, std::strlen(text));
  }
  (void)ignored;
  if (sigjmp_buf *recovery = faultRecovery) {
    faultRecovery = nullptr;
    siglongjmp(*recovery, misaligned ? kMisaligned : kFaulted);
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

struct FaultReporter {
  struct sigaction previousSegv {}, previousBus {};
  stack_t previousStack{};
  FaultReporter() {
    // The signal stack, allocated once per OS thread (not cleared each launch).
    constexpr size_t kAltStackBytes = size_t(64) << 10;
    thread_local std::unique_ptr<char[]> altStack(new char[kAltStackBytes]);
    stack_t stack{};
    stack.ss_sp = altStack.get();
    stack.ss_size = kAltStackBytes;
    sigaltstack(&stack, &previousStack);
    struct sigaction action {};
    action.sa_sigaction = onFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previousSegv);
    sigaction(SIGBUS, &action, &previousBus);
  }
  ~FaultReporter() {
    sigaction(SIGSEGV, &previousSegv, nullptr);
    sigaction(SIGBUS, &previousBus, nullptr);
    sigaltstack(&previousStack, nullptr);
  }
};

} // namespace

// ---- What host_kernels.py maps the NVVM intrinsics to ----
extern "C" {
__attribute__((visibility("default"))) int emu_tid_x() { return int(self->tid[0]); }
__attribute__((visibility("default"))) int emu_tid_y() { return int(self->tid[1]); }
__attribute__((visibility("default"))) int emu_tid_z() { return int(self->tid[2]); }
__attribute__((visibility("default"))) int emu_ctaid_x() { return int(currentBlock->ctaid[0]); }
__attribute__((visibility("default"))) int emu_ctaid_y() { return int(currentBlock->ctaid[1]); }
__attribute__((visibility("default"))) int emu_ctaid_z() { return int(currentBlock->ctaid[2]); }
__attribute__((visibility("default"))) int emu_ntid_x() { return int(currentBlock->dims.block[0]); }
__attribute__((visibility("default"))) int emu_ntid_y() { return int(currentBlock->dims.block[1]); }
__attribute__((visibility("default"))) int emu_ntid_z() { return int(currentBlock->dims.block[2]); }
__attribute__((visibility("default"))) int emu_nctaid_x() { return int(currentBlock->dims.grid[0]); }
__attribute__((visibility("default"))) int emu_nctaid_y() { return int(currentBlock->dims.grid[1]); }
__attribute__((visibility("default"))) int emu_nctaid_z() { return int(currentBlock->dims.grid[2]); }
__attribute__((visibility("default"))) int emu_laneid() { return int(self->linear % kWarp); }
__attribute__((visibility("default"))) int emu_warpsize() { return int(kWarp); }

// bar.sync 0: every thread of the block arrives, at the same barrier.
__attribute__((visibility("default"))) void emu_barrier() {
  Block &block = *currentBlock;
  void *site = __builtin_return_address(0);
  if (block.exited > 0)
    failBlock(fmt::format("reached a barrier that {} threads of the block exited without "
                          "reaching (bar.sync in divergent code)",
                          block.exited));
  if (block.atBarrier == 0)
    block.barrierSite = site;
  else if (block.barrierSite != site)
    failBlock("reached a different barrier than the threads waiting (divergent bar.sync)");
  self->state = State::AtBarrier;
  if (++block.atBarrier == block.threads.size()) {
    block.atBarrier = 0;
    for (Thread &t : block.threads)
      t.state = State::Ready;
    return;
  }
  yieldToScheduler();
}

// shfl.sync.{up,down,bfly,idx}.b32 (mode 0..3) with the PTX ISA's
// clamp/segment semantics; *pred: whether the source lane was in range.
__attribute__((visibility("default"))) uint32_t emu_shfl(uint32_t mode, uint32_t mask,
                                                         uint32_t value, uint32_t b, uint32_t c,
                                                         uint8_t *pred) {
  self->mode = mode;
  self->value = value;
  self->b = b;
  self->c = c;
  arriveAtWarpCollective(Collective::Shuffle, mask);
  *pred = self->pred ? 1 : 0;
  return self->result;
}

__attribute__((visibility("default"))) void emu_mma_m16n8k16_bf16(const uint32_t *a,
                                                                  const uint32_t *b,
                                                                  const float *c, float *d) {
  std::memcpy(self->mmaA, a, sizeof self->mmaA);
  std::memcpy(self->mmaB, b, sizeof self->mmaB);
  std::memcpy(self->mmaC, c, sizeof self->mmaC);
  arriveAtWarpCollective(Collective::Mma, 0xffffffffu);
  std::memcpy(d, self->mmaD, sizeof self->mmaD);
}

// ldmatrix.sync.aligned.m8n8.x`matrices`[.trans].b16 from the row address
// `row` (a shared-memory pointer); the lane's `matrices` registers into out.
__attribute__((visibility("default"))) void emu_ldmatrix(uint32_t matrices, uint32_t transposed,
                                                         const char *row, uint32_t *out) {
  self->matrices = matrices;
  self->transposed = transposed != 0;
  self->rowAddress = row;
  arriveAtWarpCollective(Collective::Ldmatrix, 0xffffffffu);
  std::memcpy(out, self->fragments, 4 * matrices);
}

// cp.async.{ca,cg}.shared.global [dst], [src], bytes[, srcBytes]: queued
// until the thread waits for its group.
__attribute__((visibility("default"))) void emu_cp_async(void *dst, const void *src,
                                                         uint32_t bytes, uint32_t srcBytes) {
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(src) % bytes != 0)
    failBlock(fmt::format("cp.async of {} bytes from {} to {}: not aligned to its size", bytes,
                          src, dst));
  self->uncommitted.push_back({dst, src, bytes, std::min(srcBytes, bytes)});
}

// cp.async.commit_group: the copies issued since the last one form a group.
__attribute__((visibility("default"))) void emu_cp_async_commit() {
  self->groups.push_back(std::move(self->uncommitted));
  self->uncommitted.clear();
}

// cp.async.wait_group n: the copies of every group but the newest n are
// done now, in order (this is when the emulator makes them; cp.async.wait_all
// is commit_group, then wait_group 0).
__attribute__((visibility("default"))) void emu_cp_async_wait(uint32_t pending) {
  while (self->groups.size() > pending) {
    for (const AsyncCopy &copy : self->groups.front()) {
      std::memcpy(copy.dst, copy.src, copy.srcBytes);
      std::memset(static_cast<char *>(copy.dst) + copy.srcBytes, 0, copy.bytes - copy.srcBytes);
    }
    self->groups.erase(self->groups.begin());
  }
}
}

namespace {

// Runs the started fibers of `block` until every thread is done, one fails
// the block, or none can go on (a deadlock); a fault comes back here
// (onFault).
CUresult runBlock(Block &block) {
  sigjmp_buf recovery;
  // Nothing set after this line is read after a fault's siglongjmp.
  if (int fault = sigsetjmp(recovery, 1); fault != 0)
    return fault == kMisaligned ? CUDA_ERROR_MISALIGNED_ADDRESS : CUDA_ERROR_ILLEGAL_ADDRESS;
  faultRecovery = &recovery;
  const size_t threads = block.threads.size();
  const bool reverse = block.reverse;
  size_t done = 0;
  if (block.straightSp) {
    // Every thread runs to its end, or one fails the block.
    self = &block.threads[0];
    emu_switch(&block.schedulerSp, block.straightSp);
    done = threads;
    if (block.error.empty() && block.exited != threads)
      block.error = fmt::format("kernel {}, block ({}, {}, {}): a thread waited for others (at "
                                "a barrier or warp collective), but the kernel's host build "
                                "says it never does (waits=0 in {})",
                                block.kernel->name, block.ctaid[0], block.ctaid[1],
                                block.ctaid[2], block.kernel->library);
  }
  while (done < threads && block.error.empty()) {
    bool ran = false;
    for (size_t k = 0; k < threads; ++k) {
      Thread &t = block.threads[reverse ? threads - 1 - k : k];
      if (t.state != State::Ready)
        continue;
      self = &t;
      emu_switch(&block.schedulerSp, t.sp);
      ran = true;
      if (!block.error.empty())
        break;
    }
    // Every thread that is done has exited (exitThread), or failed the block.
    done = block.exited;
    if (!ran && done < threads && block.error.empty())
      block.error = fmt::format("kernel {}, block ({}, {}, {}): deadlock: no thread can go on ({})",
                                block.kernel->name, block.ctaid[0], block.ctaid[1],
                                block.ctaid[2], describeStates(block));
  }
  faultRecovery = nullptr;
  if (block.error.empty())
    return CUDA_SUCCESS;
  report(block.error);
  return CUDA_ERROR_LAUNCH_FAILED;
}

} // namespace

CUresult runKernel(const HostKernel &kernel, const LaunchDims &dims,
                   const std::vector<uint64_t> &slots) {
  size_t threads = size_t(dims.block[0]) * dims.block[1] * dims.block[2];
  Block block;
  block.kernel = &kernel;
  block.slots = slots.data();
  block.dims = dims;
  block.threads.resize(threads);
  block.warps.resize((threads + kWarp - 1) / kWarp);
  if (!stacks.top(threads - 1)) {
    report(fmt::format("kernel {}: cannot map the fibers' stacks", kernel.name));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  FaultReporter faults;
  Block *outerBlock = currentBlock;
  Thread *outerSelf = self;
  currentBlock = &block;
  // The fibers run with the default SSE and x87 control words (emu_switch
  // does not switch them); the caller's come back after the launch.
  uint32_t callerMxcsr;
  uint16_t callerFpuControl;
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(callerMxcsr), "=m"(callerFpuControl));
  const uint32_t defaultMxcsr = 0x1F80;
  const uint16_t defaultFpuControl = 0x037F;
  asm volatile("ldmxcsr %0\n\tfldcw %1" : : "m"(defaultMxcsr), "m"(defaultFpuControl));
  CUresult result = CUDA_SUCCESS;
  for (unsigned z = 0; z < dims.grid[2] && result == CUDA_SUCCESS; ++z)
    for (unsigned y = 0; y < dims.grid[1] && result == CUDA_SUCCESS; ++y)
      for (unsigned x = 0; x < dims.grid[0] && result == CUDA_SUCCESS; ++x) {
        block.ctaid = {x, y, z};
        std::snprintf(faultMessage, sizeof faultMessage,
                      "stringrt CUDA emulator: kernel %s, block (%u, %u, %u) faulted: a memory "
                      "access outside every device allocation, or a fiber stack overflow; the "
                      "launch fails\n",
                      kernel.name.c_str(), x, y, z);
        block.atBarrier = block.exited = 0;
        block.barrierSite = nullptr;
        std::fill(block.warps.begin(), block.warps.end(), WarpLanes());
        for (size_t i = 0; i < threads; ++i) {
          Thread &t = block.threads[i];
          t.reset(unsigned(i),
                  {unsigned(i % dims.block[0]), unsigned(i / dims.block[0] % dims.block[1]),
                   unsigned(i / (size_t(dims.block[0]) * dims.block[1]))});
          if (kernel.waits)
            t.sp = fiberStart(stacks.top(i), &emu_fiber_entry);
        }
        block.straightSp =
            kernel.waits ? nullptr : fiberStart(stacks.top(0), &emu_straight_entry);
        // Uninitialised shared memory is garbage on hardware, and the
        // previous block's values would hide a missing barrier: NaN.
        for (const HostKernel::Region &region : kernel.sharedRegions)
          std::memset(region.address, 0xFF, region.bytes);
        // Odd blocks run their threads in the reverse order, so that a read
        // of another thread's write without a barrier between them shows
        // whichever thread comes first.
        block.reverse = (x + y + z) % 2 == 1;
        result = runBlock(block);
      }
  asm volatile("ldmxcsr %0\n\tfldcw %1" : : "m"(callerMxcsr), "m"(callerFpuControl));
  currentBlock = outerBlock;
  self = outerSelf;
  return result;
}

} // namespace stringrt::emulator
