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
#include <deque>
#include <sys/mman.h>
#include <unistd.h>

namespace stringrt::emulator {
namespace {

// ---- Context switch (x86-64 System V) ----
// emu_switch(save, load): saves the callee-saved registers, the SSE and x87
// control words and the stack pointer into *save, then resumes the context
// whose stack pointer is `load`.
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
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
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
  std::vector<AsyncCopy> uncommitted;
  std::deque<std::vector<AsyncCopy>> groups;
};

// Stacks for up to 1024 fibers, mapped once and reused.
struct StackPool {
  char *base = nullptr;
  size_t count = 0;
  char *top(size_t index) {
    if (index >= count) {
      if (base)
        munmap(base, count * (kStackBytes + kGuardBytes));
      count = 1024;
      base = static_cast<char *>(mmap(nullptr, count * (kStackBytes + kGuardBytes),
                                      PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                                      0));
      if (base == MAP_FAILED) {
        base = nullptr;
        count = 0;
        return nullptr;
      }
      for (size_t i = 0; i < count; ++i)
        mprotect(base + i * (kStackBytes + kGuardBytes), kGuardBytes, PROT_NONE);
    }
    return base + index * (kStackBytes + kGuardBytes) + kGuardBytes + kStackBytes;
  }
};

struct Block {
  const HostKernel *kernel = nullptr;
  const uint64_t *slots = nullptr;
  LaunchDims dims;
  std::array<unsigned, 3> ctaid{};
  std::vector<Thread> threads;
  void *schedulerSp = nullptr;
  unsigned atBarrier = 0, exited = 0;
  void *barrierSite = nullptr;
  std::string error;
};

// The block being run and the fiber running (this OS thread).
thread_local Block *currentBlock = nullptr;
thread_local Thread *self = nullptr;
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

[[noreturn]] void fiberMain() {
  Block &block = *currentBlock;
  block.kernel->packed(block.slots);
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
  // A lane of this warp waiting for this one at a warp collective?
  unsigned warp = self->linear / kWarp;
  for (Thread &t : block.threads)
    if (t.linear / kWarp == warp && t.state == State::AtWarp &&
        (t.mask >> (self->linear % kWarp)) & 1u)
      failBlock(fmt::format("exited while lane {} waits for it at a warp collective (mask "
                            "{:#010x})",
                            t.linear % kWarp, t.mask));
  yieldToScheduler();
  __builtin_unreachable();
}

extern "C" void emu_fiber_entry() { fiberMain(); }

void startFiber(Thread &thread, char *top) {
  // The initial frame emu_switch pops: control words, six registers, and
  // the "return address" fiberMain starts at; `top` is 16-byte aligned and
  // the entry sees rsp = top - 8, as after a call.
  auto *sp = reinterpret_cast<uint64_t *>(top);
  *--sp = 0;                                                // fiberMain's return slot
  *--sp = reinterpret_cast<uint64_t>(&emu_fiber_entry);     // emu_switch's ret
  for (int i = 0; i < 6; ++i)
    *--sp = 0;                                              // rbp, rbx, r12..r15
  *--sp = uint64_t(0x1F80) | (uint64_t(0x037F) << 32);     // mxcsr, x87 control word
  thread.sp = sp;
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
  for (unsigned row = 0; row < 16; ++row)
    for (unsigned col = 0; col < 8; ++col)
      for (unsigned k = 0; k < 16; ++k)
        D[row][col] += double(A[row][k]) * double(B[k][col]);
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
  bool all = true;
  for (unsigned other = 0; other < kWarp; ++other) {
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
  if (all) {
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
  std::vector<char> altStack = std::vector<char>(size_t(64) << 10);
  FaultReporter() {
    stack_t stack{};
    stack.ss_sp = altStack.data();
    stack.ss_size = altStack.size();
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
    self->groups.pop_front();
  }
}
}

namespace {

// Runs the started fibers of `block` until every thread is done, one fails
// the block, or none can go on (a deadlock); a fault comes back here
// (onFault).
CUresult runBlock(Block &block, bool reverse) {
  sigjmp_buf recovery;
  // Nothing set after this line is read after a fault's siglongjmp.
  if (int fault = sigsetjmp(recovery, 1); fault != 0)
    return fault == kMisaligned ? CUDA_ERROR_MISALIGNED_ADDRESS : CUDA_ERROR_ILLEGAL_ADDRESS;
  faultRecovery = &recovery;
  const size_t threads = block.threads.size();
  size_t done = 0;
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
    done = 0;
    for (const Thread &t : block.threads)
      done += t.state == State::Done;
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
  if (!stacks.top(threads - 1)) {
    report(fmt::format("kernel {}: cannot map the fibers' stacks", kernel.name));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  FaultReporter faults;
  Block *outerBlock = currentBlock;
  Thread *outerSelf = self;
  currentBlock = &block;
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
        for (size_t i = 0; i < threads; ++i) {
          Thread &t = block.threads[i];
          t = Thread();
          t.linear = unsigned(i);
          t.tid = {unsigned(i % dims.block[0]), unsigned(i / dims.block[0] % dims.block[1]),
                   unsigned(i / (size_t(dims.block[0]) * dims.block[1]))};
          startFiber(t, stacks.top(i));
        }
        // Uninitialised shared memory is garbage on hardware, and the
        // previous block's values would hide a missing barrier: NaN.
        for (const HostKernel::Region &region : kernel.sharedRegions)
          std::memset(region.address, 0xFF, region.bytes);
        // Odd blocks run their threads in the reverse order, so that a read
        // of another thread's write without a barrier between them shows
        // whichever thread comes first.
        result = runBlock(block, (x + y + z) % 2 == 1);
      }
  currentBlock = outerBlock;
  self = outerSelf;
  return result;
}

} // namespace stringrt::emulator
