// The executor of one program of a package on one kernel set (KernelSet.h,
// docs/package.md). Private to the runtime; Model drives it.
//
// Construction checks the program's structure (value ids in range and each
// defined exactly once before use, every op known with its operand and result
// counts, parameters known with their types) and computes, once, after which
// op each value is last used, and resolves each op to its adapter in the
// kernel set's table (the reference table; for KernelSet::Fast, that table
// with the adapters of ExecutorFastOps.cpp in place of the reference ones for
// the ops that have a fast kernel). run() then binds the inputs and the
// parameters (views, no copy), gives every op result a buffer of its
// value-table shape (the batch size substituted for -1), calls the op's
// adapter, which reads the attributes and calls its kernel, and frees each
// value right after its last use, so the peak memory is the largest live set
// rather than the whole value table.
//
// When the program has an arena plan (docs/package.md, "The arena plan";
// ArenaPlan.h), construction checks it against this liveness analysis and
// runs place every planned result in the program's arena for the batch size
// (one allocation per batch size, kept across runs) at its slot's offset;
// results outside the plan, and programs without one, use the pool below.
//
// Freed buffers go to a BufferPool (one per Model, shared by its programs and
// kept across runs), which hands them to later results of the same byte
// size: a training step in the steady state allocates no value storage. A
// result buffer is NOT zeroed - recycled ones hold whatever their last value
// left - so every adapter must write every element of every result. All the
// kernels do (LayerKernels.h, PositionKernels.h, FastKernels.h: "every
// output fully overwritten"; accumulating kernels sum into their own
// zeroed scratch or zero the output themselves), and arith.constant fills
// its result.
#pragma once

#include "execution/ArenaPlan.h"
#include "format/OpAttrs.h"
#include "stringrt/DType.h"
#include "stringrt/DropoutMask.h"
#include "stringrt/HostTensor.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/KernelSet.h"
#include "stringrt/Manifest.h"
#include "stringrt/OpProfile.h"
#include "stringrt/OpSchema.h"
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/reference/Tensor.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stringrt::detail {

// One value during a run: owned storage (an op result), or a borrowed view
// (a program input, a parameter slice).
struct ExecValue {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  const void *view = nullptr; // borrowed data; null for owned values
  float *arena = nullptr;      // storage in the run's arena (an arena-planned f32 result)
  bool live = false;

  int64_t numel() const { return ref::shapeNumel(shape); }
  int64_t ownedBytes() const {
    if (arena)
      return numel() * static_cast<int64_t>(sizeof(float));
    return static_cast<int64_t>(f32.size() * sizeof(float) + i32.size() * sizeof(int32_t));
  }
  // Drops the value and frees its memory.
  void release();
};

// Value storage recycled across ops and runs, keyed by byte size (f32 and
// i32 buffers kept apart). take*() returns a buffer of exactly n elements: a
// recycled one when the pool holds one of that size (its contents stale),
// else a new one (zero-filled by std::vector; only a pool miss pays that).
// give() takes a buffer back (empty ones are dropped). endRun() bounds the
// memory held between runs: the budget is the largest run total (every
// owned value of a run together) reported so far, and buffers are dropped,
// least recently given first, until the pool holds no more than that - so
// buffers of a batch size no longer used age out. Thread-safe.
class BufferPool {
public:
  std::vector<float> takeF32(size_t n);
  std::vector<int32_t> takeI32(size_t n);
  void give(std::vector<float> &&buffer);
  void give(std::vector<int32_t> &&buffer);
  void endRun(int64_t runTotalBytes);

  // What the pool holds now, and the bytes it has newly allocated so far.
  int64_t heldBytes() const;
  size_t heldBuffers() const;
  int64_t allocatedBytes() const;
  // Frees every held buffer (the budget stays).
  void clear();
  // For tests: every buffer handed out is first filled with NaN (f32) or
  // INT32_MIN (i32), so that a kernel relying on zeroed results shows.
  void setPoison(bool poison);
  bool poison() const;

private:
  template <typename T> struct Slot {
    std::vector<T> buffer;
    uint64_t tick = 0; // when it was given back
  };
  template <typename T> using Shelf = std::unordered_map<size_t, std::vector<Slot<T>>>;

  template <typename T> std::vector<T> take(Shelf<T> &shelf, size_t n, T poisonValue);
  template <typename T> void put(Shelf<T> &shelf, std::vector<T> &&buffer);
  // Drops the least recently given buffer; false when the pool is empty.
  bool dropOldest();

  mutable std::mutex mutex_;
  Shelf<float> f32_;
  Shelf<int32_t> i32_;
  uint64_t tick_ = 0;
  int64_t held_ = 0, budget_ = 0, allocated_ = 0;
  size_t count_ = 0;
  bool poison_ = false;
};

// What an adapter sees of the op it runs: the op (attributes), its operands
// (read-only) and its results (allocated with their shapes; the adapter fills
// them through the kernel). Adapters read attributes through the generated
// accessors (format/OpAttrs.h: `attrs::LayerNorm{c.op()}.epsilon()`), which
// hold the ODS defaults, so no adapter writes a default of its own.
class OpContext {
public:
  OpContext(const ProgramOp &op, std::vector<ExecValue> &values, const StepKey &key = {})
      : op_(op), values_(values), key_(key) {}

  const ProgramOp &op() const { return op_; }
  size_t numOperands() const { return op_.operands.size(); }
  size_t numResults() const { return op_.results.size(); }

  // Operand k as an f32 / i32 view; throws Error if it has the other type.
  ref::TensorRef<const float> in(size_t k) const;
  ref::TensorRef<const int32_t> inI32(size_t k) const;
  // Operand k when the op has it (optional trailing operands), else nullopt.
  ref::OptionalInput<float> optIn(size_t k) const;
  // Result k as an f32 / i32 view.
  ref::TensorRef<float> out(size_t k) const;
  ref::TensorRef<int32_t> outI32(size_t k) const;
  DType resultType(size_t k) const;
  DType operandType(size_t k) const;

  // Throws an Error about this op.
  [[noreturn]] void fail(const std::string &message) const;
  // The run's training step, for the masks of pe.dropout.
  const StepKey &stepKey() const { return key_; }

private:
  const ExecValue &operand(size_t k) const;
  ExecValue &result(size_t k) const;

  const ProgramOp &op_;
  std::vector<ExecValue> &values_;
  StepKey key_;
};

using OpAdapter = void (*)(const OpContext &);

// An op the executor runs: its adapter and, for the ops stringc generates
// kernels for, `check`: the argument checks of the op's reference kernel
// alone (shapes, attributes, index operands; reference/KernelChecks.h), which
// the executor runs before it calls a compiled kernel (a generated kernel
// checks nothing). Operand and result counts are the op's schema's
// (stringrt/OpSchema.h, generated from the dialect's ODS).
struct OpSpec {
  OpAdapter run = nullptr;
  OpAdapter check = nullptr;
};

// A kernel set's adapters, indexed by op: a misspelt op is a compile error.
class OpTable {
public:
  OpSpec &operator[](OpCode code) { return specs_[static_cast<size_t>(code)]; }
  // Null when the set has no adapter for the op (pe.get_param, which the
  // executor binds to the parameters itself).
  const OpSpec *find(OpCode code) const {
    const OpSpec &spec = specs_[static_cast<size_t>(code)];
    return spec.run ? &spec : nullptr;
  }

private:
  std::array<OpSpec, kOpCodeCount> specs_{};
};

// The ops of the op library (runtime/src/ops, OpLibrary.h), each with its
// fast adapter where it has one and the set is not Reference; throws Error
// for an op the table already has.
void addLibraryOps(OpTable &table, KernelSet kernels);

// pe.attention's and pe.attention_grad's `mask` and `skip_base` (required
// with mask skip, absent otherwise); throw Error for anything else. These
// four are the attention op's (ops/layer/Attention.cpp); the fused attention
// ops' adapters (the op library's ops/fused/) read their attributes with
// them.
ref::AttentionMask attentionMask(const OpContext &c);
int64_t attentionSkipBase(const OpContext &c, ref::AttentionMask mask);
// The forward attention ops' optional second result, the log-sum-exp
// [B, heads, T] (present in @gradients, where pe-autodiff asks for it).
ref::OptionalOutput<float> attentionLse(const OpContext &c);
// The gradient ops' saved forward operands y (at `yIndex`, the shape of q)
// and lse (at yIndex + 1, [B, heads, T]). The CPU kernels recompute the
// softmax instead of reading them (as cheap for them), so only their shapes
// are checked.
void checkAttentionSaved(const OpContext &c, size_t yIndex);

// One call of a compiled kernel (KernelSet::Compiled; ProgramKernel).
struct CompiledCall {
  KernelFunction function = nullptr;
  int64_t range = 1; // -1: the batch size
  int64_t grain = 1;
};

// Runs an op on its compiled kernels (ExecutorCompiledOps.cpp): first its
// reference kernel's argument checks (`check`: shapes, attributes, ids and
// labels against their tables, with the reference kernels' messages), then
// the data pointers of its operands and results in one array, each
// kernel's range split over the thread pool (parallelFor, at least `grain`
// iterations a chunk), one kernel after the other.
void runCompiledKernels(const OpContext &c, OpAdapter check, const std::vector<CompiledCall> &calls,
                        std::optional<int64_t> batch);

// Every op but pe.get_param (which the executor binds to the parameters), with
// the adapters of the given kernel set (Compiled: Fast's).
const OpTable &opTable(KernelSet kernels = KernelSet::Reference);

// Where a parameter lives in the flat buffer.
struct ParamLocation {
  std::string name;
  int64_t offset = 0;
  std::vector<int64_t> shape;
};

// Memory accounting of one run (bytes of owned values; views are free).
struct RunStats {
  int64_t peakBytes = 0;      // the largest total of live owned values
  int64_t totalBytes = 0;     // every owned value together (what no freeing would hold)
  int64_t allocatedBytes = 0; // what the pool newly allocated (0: all recycled)
};

class Executor {
public:
  // `name` is the program's name for messages; the ops run on `kernels`.
  // Throws Error for a malformed program (see above) or a get_param of an
  // unknown parameter / another type. KernelSet::Compiled needs `library`,
  // which must outlive the executor: ops that name kernels run on them.
  Executor(const Program &program, std::string name, const std::vector<ParamLocation> &params,
           KernelSet kernels = KernelSet::Reference, const KernelLibrary *library = nullptr);

  // Runs the program. `inputs` are in program-input order and already checked
  // against the value table by the caller (dtype and shape, batch
  // substituted); `batch` is the batch size (nullopt: no input has one, and
  // then no value may have one); `params` is the flat parameter buffer.
  // Returns the outputs in program order (i32 outputs converted to f32).
  // Result buffers come from `pool` and go back to it (the outputs are
  // copies); without one, from a pool of this run alone. `key` is the
  // training step the masks of pe.dropout are drawn for.
  std::vector<ref::Tensor<float>> run(const std::vector<HostTensor> &inputs,
                                      std::optional<int64_t> batch, const float *params,
                                      RunStats *stats = nullptr, BufferPool *pool = nullptr,
                                      const StepKey &key = {}) const;

  const Program &program() const { return program_; }
  const std::string &name() const { return name_; }
  KernelSet kernels() const { return kernels_; }
  // Values freed right after op i (its operands' and unused results' last use).
  const std::vector<std::vector<ValueId>> &freeAfter() const { return freeAfter_; }
  // Whether runs place op results in the program's arena plan (checked at
  // construction) rather than in buffers of the pool: true by default when
  // the program has a plan; setUseArena(false) selects the pool (for
  // comparisons); setUseArena(true) on a program without a plan throws.
  bool usesArena() const { return useArena_; }
  void setUseArena(bool use);
  // The most bytes of op results a run at `batch` holds at once: the arena
  // at that batch (and the results outside it) with the plan, the peak of
  // the live results without (saturating at INT64_MAX).
  int64_t runBytes(int64_t batch) const;
  // Every op of later runs adds its wall time to `profile` (OpProfile.h);
  // null (the default) stops timing. The profile must outlive the runs.
  void setProfile(OpProfile *profile) { profile_ = profile; }

private:
  struct Step {
    const OpSpec *spec = nullptr; // null for pe.get_param
    int64_t paramOffset = 0;      // pe.get_param
    std::vector<CompiledCall> compiled; // KernelSet::Compiled: run these instead
  };

  const Program &program_;
  std::string name_;
  KernelSet kernels_;
  std::vector<Step> steps_;
  std::vector<std::vector<ValueId>> freeAfter_;
  std::vector<bool> inArena_; // per value: placed by the arena plan
  // The plan's slots at 4 bytes an element (f32ArenaSlots), as runs lay them out.
  std::vector<std::pair<int64_t, int64_t>> arenaSlots_;
  std::vector<bool> outputUsedLater_; // per output: a later output is the same value
  std::vector<bool> ownedResult_;     // per value: an op result with storage (not a view)
  bool useArena_ = false;
  mutable ArenaCache arenas_;
  OpProfile *profile_ = nullptr;
};

// `shape` with every -1 replaced by the batch size; throws Error (naming
// `what`) if it has a -1 and there is no batch.
std::vector<int64_t> resolveShape(const std::vector<int64_t> &shape, std::optional<int64_t> batch,
                                  const std::string &what);

// "f32" / "i32" (the manifest spelling) for messages.
const char *valueTypeName(DType dtype);

} // namespace stringrt::detail
