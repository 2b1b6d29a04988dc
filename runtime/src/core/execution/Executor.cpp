// The program executor: structure checks and last-use analysis at
// construction, then allocation, dispatch and freeing per run (Executor.h).
#include "execution/Executor.h"

#include "format/CompiledKernelRules.h"
#include "stringrt/Error.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

namespace stringrt::detail {

//===----------------------------------------------------------------------===//
// Values and the op context
//===----------------------------------------------------------------------===//

void ExecValue::release() {
  std::vector<float>().swap(f32);
  std::vector<int32_t>().swap(i32);
  view = nullptr;
  arena = nullptr;
  live = false;
}

//===----------------------------------------------------------------------===//
// The buffer pool
//===----------------------------------------------------------------------===//

template <typename T>
std::vector<T> BufferPool::take(Shelf<T> &shelf, size_t n, T poisonValue) {
  std::vector<T> buffer;
  if (n == 0)
    return buffer;
  const size_t bytes = n * sizeof(T);
  auto it = shelf.find(bytes);
  if (it != shelf.end() && !it->second.empty()) {
    buffer = std::move(it->second.back().buffer); // the most recently given: warmest
    it->second.pop_back();
    held_ -= static_cast<int64_t>(bytes);
    --count_;
  } else {
    buffer.resize(n);
    allocated_ += static_cast<int64_t>(bytes);
  }
  if (poison_)
    std::fill(buffer.begin(), buffer.end(), poisonValue);
  return buffer;
}

template <typename T> void BufferPool::put(Shelf<T> &shelf, std::vector<T> &&buffer) {
  if (buffer.empty())
    return;
  const size_t bytes = buffer.size() * sizeof(T);
  shelf[bytes].push_back({std::move(buffer), ++tick_});
  buffer = std::vector<T>();
  held_ += static_cast<int64_t>(bytes);
  ++count_;
}

std::vector<float> BufferPool::takeF32(size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  return take(f32_, n, std::numeric_limits<float>::quiet_NaN());
}

std::vector<int32_t> BufferPool::takeI32(size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  return take(i32_, n, std::numeric_limits<int32_t>::min());
}

void BufferPool::give(std::vector<float> &&buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  put(f32_, std::move(buffer));
}

void BufferPool::give(std::vector<int32_t> &&buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  put(i32_, std::move(buffer));
}

bool BufferPool::dropOldest() {
  // Each size's slots are in give order, so the oldest is some size's first.
  enum class Kind { None, F32, I32 } kind = Kind::None;
  size_t key = 0;
  uint64_t oldest = 0;
  auto scan = [&](auto &shelf, Kind k) {
    for (auto &[bytes, slots] : shelf)
      if (!slots.empty() && (kind == Kind::None || slots.front().tick < oldest)) {
        kind = k;
        key = bytes;
        oldest = slots.front().tick;
      }
  };
  scan(f32_, Kind::F32);
  scan(i32_, Kind::I32);
  if (kind == Kind::None)
    return false;
  if (kind == Kind::F32)
    f32_[key].erase(f32_[key].begin());
  else
    i32_[key].erase(i32_[key].begin());
  held_ -= static_cast<int64_t>(key);
  --count_;
  return true;
}

void BufferPool::endRun(int64_t runTotalBytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  budget_ = std::max(budget_, runTotalBytes);
  while (held_ > budget_ && dropOldest()) {
  }
}

int64_t BufferPool::heldBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

size_t BufferPool::heldBuffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}

int64_t BufferPool::allocatedBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

void BufferPool::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  f32_.clear();
  i32_.clear();
  held_ = 0;
  count_ = 0;
}

bool BufferPool::poison() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return poison_;
}

void BufferPool::setPoison(bool poison) {
  std::lock_guard<std::mutex> lock(mutex_);
  poison_ = poison;
}

const char *valueTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  default:
    return dtypeName(dtype);
  }
}

std::vector<int64_t> resolveShape(const std::vector<int64_t> &shape, std::optional<int64_t> batch,
                                  const std::string &what) {
  std::vector<int64_t> resolved = shape;
  for (int64_t &d : resolved) {
    if (d != kBatchDim)
      continue;
    if (!batch)
      throw Error(what + " has a batch dimension " + ref::shapeToString(shape) +
                  " but no input gives the batch size");
    d = *batch;
  }
  return resolved;
}

void OpContext::fail(const std::string &message) const { throw Error(op_.op + ": " + message); }

const ExecValue &OpContext::operand(size_t k) const {
  if (k >= op_.operands.size())
    fail("operand #" + std::to_string(k) + " is missing (" +
         std::to_string(op_.operands.size()) + " given)");
  return values_[op_.operands[k]];
}

ExecValue &OpContext::result(size_t k) const {
  if (k >= op_.results.size())
    fail("result #" + std::to_string(k) + " is missing (" + std::to_string(op_.results.size()) +
         " declared)");
  return values_[op_.results[k]];
}

ref::TensorRef<const float> OpContext::in(size_t k) const {
  const ExecValue &v = operand(k);
  if (v.dtype != DType::F32)
    fail("operand #" + std::to_string(k) + " must be f32, got " + valueTypeName(v.dtype));
  const float *data = v.view ? static_cast<const float *>(v.view)
                             : v.arena ? v.arena : v.f32.data();
  return {data, v.shape};
}

ref::TensorRef<const int32_t> OpContext::inI32(size_t k) const {
  const ExecValue &v = operand(k);
  if (v.dtype != DType::I32)
    fail("operand #" + std::to_string(k) + " must be i32, got " + valueTypeName(v.dtype));
  const int32_t *data = v.view ? static_cast<const int32_t *>(v.view) : v.i32.data();
  return {data, v.shape};
}

ref::OptionalInput<float> OpContext::optIn(size_t k) const {
  if (k >= op_.operands.size())
    return std::nullopt;
  return in(k);
}

ref::TensorRef<float> OpContext::out(size_t k) const {
  ExecValue &v = result(k);
  if (v.dtype != DType::F32)
    fail("result #" + std::to_string(k) + " must be f32, the value table says " +
         valueTypeName(v.dtype));
  return {v.arena ? v.arena : v.f32.data(), v.shape};
}

ref::TensorRef<int32_t> OpContext::outI32(size_t k) const {
  ExecValue &v = result(k);
  if (v.dtype != DType::I32)
    fail("result #" + std::to_string(k) + " must be i32, the value table says " +
         valueTypeName(v.dtype));
  return {v.i32.data(), v.shape};
}

DType OpContext::resultType(size_t k) const { return result(k).dtype; }
DType OpContext::operandType(size_t k) const { return operand(k).dtype; }

//===----------------------------------------------------------------------===//
// The op table
//===----------------------------------------------------------------------===//

namespace {

// arith.constant: a splat of its scalar `value` over the result type.
void runConstant(const OpContext &c) {
  double value = c.op().getFloat("value");
  if (c.resultType(0) == DType::I32) {
    ref::TensorRef<int32_t> y = c.outI32(0);
    std::fill(y.data, y.data + y.numel(), static_cast<int32_t>(value));
  } else {
    ref::TensorRef<float> y = c.out(0);
    std::fill(y.data, y.data + y.numel(), static_cast<float>(value));
  }
}

OpTable buildOpTable(KernelSet kernels) {
  OpTable table;
  table[OpCode::ArithConstant] = {runConstant};
  addLibraryOps(table, kernels);
  return table;
}

} // namespace

const OpTable &opTable(KernelSet kernels) {
  static const OpTable reference = buildOpTable(KernelSet::Reference);
  static const OpTable fast = buildOpTable(KernelSet::Fast);
  return kernels == KernelSet::Reference ? reference : fast;
}

//===----------------------------------------------------------------------===//
// Executor
//===----------------------------------------------------------------------===//

namespace {

constexpr size_t kNoFree = static_cast<size_t>(-1);

std::string countRange(size_t lo, size_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
}

} // namespace

Executor::Executor(const Program &program, std::string name,
                   const std::vector<ParamLocation> &params, KernelSet kernels,
                   const KernelLibrary *library)
    : program_(program), name_(std::move(name)), kernels_(kernels) {
  if (kernels == KernelSet::Compiled && !library)
    throw Error("program '" + name_ + "': compiled kernels need the package's kernel library "
                "(a package of target cpu)");
  const size_t numValues = program.values.size();
  auto where = [&](size_t i) {
    return "program '" + name_ + "', op #" + std::to_string(i) + " (" + program.ops[i].op + ")";
  };
  for (size_t v = 0; v < numValues; ++v) {
    DType t = program.values[v].dtype;
    if (t != DType::F32 && t != DType::I32)
      throw Error("program '" + name_ + "': value " + std::to_string(v) + " has type " +
                  dtypeName(t) + " (only f32 and i32 are supported)");
  }

  // Definitions: inputs, then op results in order; uses must follow them.
  std::vector<bool> defined(numValues, false);
  auto define = [&](ValueId v, const std::string &what) {
    if (v >= numValues)
      throw Error(what + ": value id " + std::to_string(v) + " out of range (" +
                  std::to_string(numValues) + " values)");
    if (defined[v])
      throw Error(what + ": value " + std::to_string(v) + " is defined twice");
    defined[v] = true;
  };
  for (ValueId v : program.inputs)
    define(v, "program '" + name_ + "' inputs");

  const OpTable &table = opTable(kernels);
  std::unordered_map<std::string, const ParamLocation *> paramByName;
  for (const ParamLocation &p : params)
    paramByName.emplace(p.name, &p);
  const size_t numOps = program.ops.size();
  std::vector<size_t> lastUse(numValues, kNoFree);
  std::vector<size_t> definedAt(numValues, kNoFree); // kNoFree for inputs
  steps_.resize(numOps);
  for (size_t i = 0; i < numOps; ++i) {
    const ProgramOp &op = program.ops[i];
    Step &step = steps_[i];
    const std::optional<OpCode> code = findOpCode(op.op);
    if (!code)
      throw Error(where(i) + ": the cpu target has no such op");
    const OpSchema &schema = opSchema(*code);
    if (*code != OpCode::GetParam) {
      step.spec = table.find(*code);
      if (!step.spec)
        throw Error(where(i) + ": the cpu target has no such op");
    }
    if (kernels == KernelSet::Compiled && !op.kernels.empty()) {
      // A generated kernel checks nothing: its kinds and ranges must be the
      // op's, and the op needs its reference kernel's argument checks.
      checkOpKernels(op, program, where(i));
      if (!step.spec || !step.spec->check)
        throw Error(where(i) + ": runs on compiled kernels, but the runtime has no argument "
                               "check for it");
      for (const ProgramKernel &k : op.kernels) {
        KernelFunction function = library->find(k.symbol);
        if (!function)
          throw Error(where(i) + ": the kernel library has no kernel '" + k.symbol + "'");
        step.compiled.push_back({function, k.range, k.grain});
      }
    }
    const size_t minOps = schema.minOperands, maxOps = schema.maxOperands;
    if (op.operands.size() < minOps || op.operands.size() > maxOps)
      throw Error(where(i) + ": takes " + countRange(minOps, maxOps) + " operands, got " +
                  std::to_string(op.operands.size()));
    const size_t results = schema.resultCount(static_cast<int>(op.operands.size()));
    if (!schema.acceptsResults(static_cast<int>(op.operands.size()),
                               static_cast<int>(op.results.size())))
      throw Error(where(i) + ": has " + std::to_string(results) + " results with " +
                  std::to_string(op.operands.size()) + " operands, got " +
                  std::to_string(op.results.size()));
    for (ValueId v : op.operands) {
      if (v >= numValues)
        throw Error(where(i) + ": operand value id " + std::to_string(v) + " out of range (" +
                    std::to_string(numValues) + " values)");
      if (!defined[v])
        throw Error(where(i) + ": operand value " + std::to_string(v) +
                    " is used before it is defined");
      lastUse[v] = i;
    }
    for (ValueId v : op.results) {
      define(v, where(i));
      definedAt[v] = i;
    }
    if (*code == OpCode::GetParam) {
      const std::string &param = op.getString("param");
      auto it = paramByName.find(param);
      if (it == paramByName.end())
        throw Error(where(i) + ": no parameter '" + param + "'");
      const ParamLocation *found = it->second;
      const ProgramValue &type = program.values[op.results[0]];
      if (type.dtype != DType::F32 || type.shape != found->shape)
        throw Error(where(i) + ": parameter '" + param + "' is f32 " +
                    ref::shapeToString(found->shape) + ", the result is " +
                    valueTypeName(type.dtype) + " " + ref::shapeToString(type.shape));
      step.paramOffset = found->offset;
    }
  }
  std::vector<bool> isOutput(numValues, false);
  for (const ProgramOutput &out : program.outputs) {
    if (out.value >= numValues || !defined[out.value])
      throw Error("program '" + name_ + "': output '" + out.key() + "' names value " +
                  std::to_string(out.value) + ", which no input or op defines");
    isOutput[out.value] = true;
  }
  // An output whose value a later output is too must be copied, not moved.
  outputUsedLater_.assign(program.outputs.size(), false);
  std::vector<bool> seenLater(numValues, false);
  for (size_t j = program.outputs.size(); j-- > 0;) {
    outputUsedLater_[j] = seenLater[program.outputs[j].value];
    seenLater[program.outputs[j].value] = true;
  }

  ownedResult_.assign(numValues, false);
  for (size_t i = 0; i < numOps; ++i)
    if (steps_[i].spec)
      for (ValueId r : program.ops[i].results)
        ownedResult_[r] = true;

  // Free each value after its last use: its last reading op, or its defining
  // op when nothing reads it. Outputs live to the end.
  freeAfter_.assign(numOps, {});
  for (ValueId v = 0; v < numValues; ++v) {
    if (!defined[v] || isOutput[v])
      continue;
    size_t at = lastUse[v];
    if (at == kNoFree)
      at = definedAt[v]; // never read: free right after it is made (inputs: never bound long)
    if (at != kNoFree)
      freeAfter_[at].push_back(v);
  }

  // The arena plan, when the package has one: checked against this liveness
  // (an interval [defining op, last use], outputs to the end), then used.
  if (program.arena) {
    std::vector<int64_t> start(numValues, 0), end(numValues, 0);
    for (ValueId v = 0; v < numValues; ++v) {
      if (definedAt[v] == kNoFree)
        continue;
      start[v] = static_cast<int64_t>(definedAt[v]);
      end[v] = isOutput[v]               ? static_cast<int64_t>(numOps)
               : lastUse[v] != kNoFree ? static_cast<int64_t>(lastUse[v])
                                       : start[v];
    }
    checkArenaPlan(program, name_, start, end);
    inArena_ = arenaMembers(program);
    arenaSlots_ = f32ArenaSlots(program);
    useArena_ = true;
  }
}

int64_t Executor::runBytes(int64_t batch) const {
  // In double: an absurd batch gives a huge number, not an overflow.
  auto bytesOf = [&](ValueId v) {
    double n = 1;
    for (int64_t d : program_.values[v].shape)
      n *= d == kBatchDim ? static_cast<double>(batch) : static_cast<double>(d);
    return n * 4.0; // f32 and i32 alike
  };
  double live = 0, peak = 0;
  if (useArena_) {
    std::optional<int64_t> bytes = arenaSlotsBytes(arenaSlots_, batch);
    live = bytes ? static_cast<double>(*bytes) : 1e19;
  }
  peak = live;
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    if (!steps_[i].spec)
      continue; // pe.get_param: a view
    for (ValueId r : program_.ops[i].results)
      if (!useArena_ || !inArena_[r])
        live += bytesOf(r);
    peak = std::max(peak, live);
    for (ValueId v : freeAfter_[i])
      if (ownedResult_[v] && (!useArena_ || !inArena_[v]))
        live -= bytesOf(v);
  }
  return peak >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(peak);
}

void Executor::setUseArena(bool use) {
  if (use && !program_.arena)
    throw Error("program '" + name_ + "' has no arena plan");
  useArena_ = use;
}

std::vector<ref::Tensor<float>> Executor::run(const std::vector<HostTensor> &inputs,
                                              std::optional<int64_t> batch, const float *params,
                                              RunStats *stats, BufferPool *sharedPool,
                                              const StepKey &key) const {
  const Program &program = program_;
  if (inputs.size() != program.inputs.size())
    throw Error("program '" + name_ + "': " + std::to_string(program.inputs.size()) +
                " inputs expected, got " + std::to_string(inputs.size()));
  BufferPool runPool;
  BufferPool &pool = sharedPool ? *sharedPool : runPool;
  const int64_t allocatedBefore = pool.allocatedBytes();
  std::vector<ExecValue> values(program.values.size());
  int64_t live = 0, peak = 0, total = 0;

  // The arena: one buffer for the planned results, slot k at offsets[k].
  ArenaLayout layout;
  std::vector<float> arena;
  int64_t arenaAllocated = 0;
  const int64_t arenaBatch = batch.value_or(0);
  if (useArena_) {
    layout = arenaLayout(arenaSlots_, arenaBatch); // 16-byte slots: whole floats
    bool allocated = false;
    arena = arenas_.take(arenaBatch, layout.bytes / 4, allocated);
    if (allocated)
      arenaAllocated = layout.bytes;
    if (sharedPool && sharedPool->poison())
      std::fill(arena.begin(), arena.end(), std::numeric_limits<float>::quiet_NaN());
  }

  for (size_t k = 0; k < inputs.size(); ++k) {
    ValueId id = program.inputs[k];
    const ProgramValue &type = program.values[id];
    const HostTensor &in = inputs[k];
    std::string what = "program '" + name_ + "' input #" + std::to_string(k);
    std::vector<int64_t> shape = resolveShape(type.shape, batch, what);
    if (in.dtype != type.dtype || in.shape != shape)
      throw Error(what + ": expected " + valueTypeName(type.dtype) + " " +
                  ref::shapeToString(shape) + ", got " + valueTypeName(in.dtype) + " " +
                  ref::shapeToString(in.shape));
    if (!in.data && in.numel() > 0)
      throw Error(what + ": no data");
    ExecValue &v = values[id];
    v.dtype = type.dtype;
    v.shape = std::move(shape);
    v.view = in.data;
    v.live = true;
  }

  for (size_t i = 0; i < program.ops.size(); ++i) {
    const ProgramOp &op = program.ops[i];
    const Step &step = steps_[i];
    if (!step.spec) { // pe.get_param: a view of the parameter slice
      ExecValue &v = values[op.results[0]];
      v.dtype = DType::F32;
      v.shape = program.values[op.results[0]].shape;
      v.view = params + step.paramOffset;
      v.live = true;
    } else {
      for (ValueId r : op.results) {
        const ProgramValue &type = program.values[r];
        ExecValue &v = values[r];
        v.dtype = type.dtype;
        v.shape = type.shape; // resolveShape's, without building its message per run
        for (int64_t &d : v.shape) {
          if (d != kBatchDim)
            continue;
          if (!batch) // throws, naming the value
            resolveShape(type.shape, batch, "program '" + name_ + "', value " + std::to_string(r));
          d = *batch;
        }
        // Not zeroed: the adapter writes every element (see Executor.h).
        size_t n = static_cast<size_t>(v.numel());
        if (useArena_ && inArena_[r])
          v.arena = arena.data() + layout.offsets[program.arena->valueSlot[r]] / 4;
        else if (type.dtype == DType::I32)
          v.i32 = pool.takeI32(n);
        else
          v.f32 = pool.takeF32(n);
        v.live = true;
        live += v.ownedBytes();
        total += v.ownedBytes();
      }
      peak = std::max(peak, live);
      try {
        const auto started = profile_ ? std::chrono::steady_clock::now()
                                      : std::chrono::steady_clock::time_point();
        if (!step.compiled.empty())
          runCompiledKernels(OpContext(op, values, key), step.spec->check, step.compiled, batch);
        else
          step.spec->run(OpContext(op, values, key));
        if (profile_)
          profile_->add(step.compiled.empty() ? op.op : op.op + " [compiled]",
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                            .count());
      } catch (const Error &e) {
        throw Error("program '" + name_ + "', op #" + std::to_string(i) + " (" + op.op +
                    "): " + e.what());
      }
    }
    for (ValueId v : freeAfter_[i]) {
      ExecValue &value = values[v];
      live -= value.ownedBytes();
      pool.give(std::move(value.f32));
      pool.give(std::move(value.i32));
      value.release();
    }
  }

  std::vector<ref::Tensor<float>> outputs;
  outputs.reserve(program.outputs.size());
  for (size_t j = 0; j < program.outputs.size(); ++j) {
    ExecValue &v = values[program.outputs[j].value];
    ref::Tensor<float> t;
    t.shape = v.shape;
    const bool usedLater = outputUsedLater_[j];
    if (v.dtype == DType::I32) {
      const int32_t *data = v.view ? static_cast<const int32_t *>(v.view) : v.i32.data();
      t.values.assign(data, data + v.numel());
    } else if (v.view || v.arena) {
      const float *data = v.view ? static_cast<const float *>(v.view) : v.arena;
      t.values.assign(data, data + v.numel());
    } else if (usedLater || sharedPool) {
      t.values = v.f32; // a copy: the buffer goes back to the shared pool
    } else {
      t.values = std::move(v.f32);
    }
    outputs.push_back(std::move(t));
  }
  if (sharedPool) {
    for (ExecValue &v : values) {
      pool.give(std::move(v.f32));
      pool.give(std::move(v.i32));
    }
    pool.endRun(total);
  }
  if (useArena_)
    arenas_.give(arenaBatch, std::move(arena));
  if (stats) {
    stats->peakBytes = peak;
    stats->totalBytes = total;
    stats->allocatedBytes = pool.allocatedBytes() - allocatedBefore + arenaAllocated;
  }
  return outputs;
}

} // namespace stringrt::detail
