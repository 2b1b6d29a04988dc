// The walk of a step program on the device (DeviceModelImpl.h): each op's
// launches bound to pointers and sizes (StepBinding.cpp), the GEMMs, the step
// key, and the gradients of @gradients into their slots.
#include "DeviceModelImpl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

namespace stringrt::cuda {

/// The device addresses op `i` of program `name` sees in `b`.
OpPointers DeviceModel::Impl::opPointers(const std::string &name, size_t i,
                                         const CudaOpSteps &opSteps, const BatchBuffers &b,
                                         int64_t batch) const {
  const ProgramOp &op = program(name).ops[i];
  const CudaProgramSteps &steps = *section.stepsOf(name);
  OpPointers pointers;
  pointers.constants = constantAddresses;
  pointers.stepKey = stepKeyAddress;
  pointers.tickets = ticketsAddress;
  for (ValueId v : op.operands) {
    pointers.operands.push_back(address(b, v));
    pointers.operandTypes.push_back(steps.dtypeOf(v));
  }
  for (ValueId v : op.results) {
    pointers.results.push_back(address(b, v));
    pointers.resultTypes.push_back(steps.dtypeOf(v));
  }
  ScratchLayout scratch = scratchLayout(opSteps, batch);
  for (size_t s = 0; s < scratch.offsets.size(); ++s) {
    uint64_t bytes = scratch.offsets.size() > s + 1 ? scratch.offsets[s + 1] - scratch.offsets[s]
                                                    : scratch.bytes - scratch.offsets[s];
    pointers.scratch.push_back(bytes ? b.scratch->at(scratch.offsets[s], bytes) : 0);
  }
  return pointers;
}

/// Binds and checks every grouped GEMM's members, and uploads their
/// pointers: per group, B's, A's, then C's (Gemm::runGrouped); and every
/// kernel group's table: per member, its group arguments' addresses.
void DeviceModel::Impl::placeGroupPointers(const std::string &name, BatchBuffers &b,
                                           int64_t batch) {
  const CudaProgramSteps *steps = section.stepsOf(name);
  if (!steps)
    return;
  std::vector<uint64_t> words;
  // ((steps index, launch), first word)
  std::vector<std::pair<std::pair<size_t, size_t>, size_t>> starts;
  // The arrays of a grouped GEMM, launch `l` of steps [s, s + size): B's,
  // A's, then C's, after checkGemmGroup.
  auto gemmArrays = [&](size_t s, size_t l, size_t size) {
    std::vector<BoundGemm> members;
    std::vector<std::string> names;
    for (size_t m = s; m < s + size; ++m) { // the loader checked the members
      const CudaOpSteps &member = steps->ops[m];
      size_t i = size_t(member.op);
      names.push_back(fmt::format("{} op {} ({})", name, i, program(name).ops[i].op));
      BoundLaunch bound = bindLaunch(section, member.launches[l],
                                     opPointers(name, i, member, b, batch), batch,
                                     fmt::format("{} launch {}", names.back(), l));
      members.push_back(*bound.gemm);
    }
    checkGemmGroup(members, names);
    starts.push_back({{s, l}, words.size()});
    for (const BoundGemm &g : members)
      words.push_back(g.b);
    for (const BoundGemm &g : members)
      words.push_back(g.a);
    for (const BoundGemm &g : members)
      words.push_back(g.c);
  };
  for (size_t s = 0; s < steps->ops.size(); ++s) {
    const CudaOpSteps &leader = steps->ops[s];
    if (!leader.launches.empty() && leader.launches[0].groupSize > 1) { // a kernel group
      const CudaLaunch &launch = leader.launches[0];
      starts.push_back({{s, 0}, words.size()});
      std::vector<const CudaOpSteps *> members;
      std::vector<std::string> names;
      for (size_t m = s; m < s + size_t(launch.groupSize); ++m) { // the loader checked them
        const CudaOpSteps &member = steps->ops[m];
        size_t i = size_t(member.op);
        names.push_back(fmt::format("{} op {} ({})", name, i, program(name).ops[i].op));
        std::vector<uint64_t> row = groupTableRow(launch, opPointers(name, i, member, b, batch),
                                                  names.back() + ", a member of a kernel group");
        words.insert(words.end(), row.begin(), row.end());
        members.push_back(&member);
      }
      // A group of first launches writes each member's scratch ahead of
      // the member's own launches.
      if (leader.launches.size() > 1)
        checkGroupScratch(members, batch, names);
      // ... and its later launches that the first member runs as grouped
      // GEMMs.
      for (size_t l = 1; l < leader.launches.size(); ++l)
        if (leader.launches[l].gemm && leader.launches[l].gemm->groupSize > 1)
          gemmArrays(s, l, size_t(launch.groupSize));
      s += size_t(launch.groupSize) - 1;
      continue;
    }
    // A GEMM group's members from here (a group of first launches is a
    // kernel group: stepsComputedBy counts only the steps a group computes
    // whole).
    const int64_t size = stepsComputedBy(leader);
    if (size < 2)
      continue;
    gemmArrays(s, 0, size_t(size));
    s += size_t(size) - 1;
  }
  if (words.empty())
    return;
  b.groupPointers = newArena(words.size() * 8);
  b.groupPointers->upload(0, words.data(), words.size() * 8,
                          fmt::format("the {} program's group pointers", name));
  for (const auto &[at, word] : starts)
    b.groupArrays[at] = b.groupPointers->at(word * 8, 8);
}

/// Runs program `name` on the device (asynchronously, on the stream). A
/// GEMM group runs as one call at its first member, timed as that op; a
/// kernel group as its first member's launch, reading its table (a group
/// of first launches: each member's other launches at its own place).
void DeviceModel::Impl::walk(const std::string &name, BatchBuffers &b, int64_t batch,
                             const std::function<void(int64_t)> &afterOp) {
  const Program &p = program(name);
  const CudaProgramSteps &steps = *section.stepsOf(name);
  size_t next = 0; // the next entry of steps.ops
  size_t groupedUntil = 0; // steps entries before this one ran with their group
  size_t firstLaunchesUntil = 0; // ... whose first launch ran in their group's
  // The first member of that group of first launches, whose grouped later
  // GEMMs ran the members' launches too.
  const CudaOpSteps *firstLaunchesLeader = nullptr;
  auto groupedLater = [](const CudaOpSteps &leader, size_t l) {
    return l > 0 && leader.launches[l].gemm && leader.launches[l].gemm->groupSize > 1;
  };
  // The entry a bias-gradient epilogue computed (CudaGemmEpilogue::BiasGrad):
  // its own launches, the fallback, are skipped.
  size_t computedByEpilogue = SIZE_MAX;
  // Queues op i's work (nothing for a parameter view or a group's later member).
  auto runOp = [&](size_t i) {
    const ProgramOp &op = p.ops[i];
    if (op.is(OpCode::GetParam))
      return;
    if (op.is(OpCode::ArithConstant)) {
      // Constants share arena slots with other values: fill at their place.
      ValueId r = op.results[0];
      const ValuePlace &place = b.placement.values[r];
      double value = op.getFloat("value");
      uint32_t bits = 0;
      if (p.values[r].dtype == DType::I32) {
        int32_t v = int32_t(value);
        std::memcpy(&bits, &v, 4);
      } else {
        float v = float(value);
        std::memcpy(&bits, &v, 4);
      }
      if (place.bytes)
        driver::check(driver::require().memsetD32Async(CUdeviceptr(address(b, r)), bits,
                                                       place.bytes / 4, stream),
                      fmt::format("{} op {} (arith.constant)", name, i), "cuMemsetD32Async");
      return;
    }
    if (next >= steps.ops.size() || steps.ops[next].op != int64_t(i))
      throw Error(fmt::format("{} op {} ({}) has no GPU steps", name, i, op.op));
    const size_t entry = next++;
    const CudaOpSteps &opSteps = steps.ops[entry];
    if (entry < groupedUntil || entry == computedByEpilogue) { // computed by its group's
      untimed(op.op);                                             // call or an epilogue
      return;
    }
    // A member of a group of first launches: the launches its group ran.
    const bool member = entry < firstLaunchesUntil;
    auto ranInGroup = [&](size_t l) {
      return member && (l == 0 || groupedLater(*firstLaunchesLeader, l));
    };
    if (member) {
      size_t own = 0;
      for (size_t l = 0; l < opSteps.launches.size(); ++l)
        own += ranInGroup(l) ? 0 : 1;
      if (own == 0) { // every launch ran in its group's
        untimed(op.op);
        return;
      }
    }
    OpPointers pointers = opPointers(name, i, opSteps, b, batch);
    auto group = b.groupArrays.find({entry, 0});
    if (group != b.groupArrays.end() && !opSteps.launches[0].gemm) {
      pointers.groupTable = group->second;
      if (opSteps.launches.size() == 1) {
        groupedUntil = entry + size_t(opSteps.launches[0].groupSize);
      } else {
        firstLaunchesUntil = entry + size_t(opSteps.launches[0].groupSize);
        firstLaunchesLeader = &opSteps;
      }
    } else if (group != b.groupArrays.end()) {
      const CudaGemm &g = *opSteps.launches[0].gemm;
      std::string where = fmt::format("{} op {} ({}): a GEMM group of {}", name, i, op.op,
                                      g.groupSize);
      DType typeA = steps.dtypeOf(op.operands[size_t(g.a.index)]);
      DType typeC = steps.dtypeOf(op.results[size_t(g.c.index)]);
      timed(op.op, [&] {
        gemm->runGrouped(g.transA, g.transB, g.m.at(batch), g.n.at(batch), g.k.at(batch),
                         g.alpha, g.beta, group->second, g.groupSize, where, gemmPrecision,
                         typeA, typeC);
        checkLaunch(where + " (GEMM)");
      });
      groupedUntil = entry + size_t(g.groupSize);
      return;
    }
    timed(op.op, [&] {
      for (size_t l = 0; l < opSteps.launches.size(); ++l) {
        if (ranInGroup(l))
          continue;
        std::string where = fmt::format("{} op {} ({}) launch {}", name, i, op.op, l);
        const CudaLaunch &launch = opSteps.launches[l];
        std::optional<OpPointers> nextPointers;
        if (launch.gemm && launch.gemm->epilogue == CudaGemmEpilogue::BiasGrad) {
          if (entry + 1 >= steps.ops.size()) // the loader checked it
            throw Error(where + ": a bias_grad GEMM in the program's last entry");
          const CudaOpSteps &nextSteps = steps.ops[entry + 1];
          nextPointers = opPointers(name, size_t(nextSteps.op), nextSteps, b, batch);
        }
        BoundLaunch bound = bindLaunch(section, launch, pointers, batch, where,
                                       nextPointers ? &*nextPointers : nullptr);
        const int64_t gemmGroup = bound.gemm ? launch.gemm->groupSize : 1;
        if (gemmGroup > 1) { // over the members' launch l
          auto arrays = b.groupArrays.find({entry, l});
          if (arrays == b.groupArrays.end())
            throw Error(where + ": a GEMM group without its pointer arrays");
          const BoundGemm &g = *bound.gemm;
          gemm->runGrouped(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.beta, arrays->second,
                           gemmGroup, where, gemmPrecision, g.typeA, g.typeC);
          checkLaunch(where + " (GEMM group)");
        } else if (bound.gemm) {
          if (runGemm(*bound.gemm, where))
            computedByEpilogue = entry + 1;
          checkLaunch(where + " (GEMM)");
        } else if (!bound.empty()) { // no block at this batch: nothing to do
          kernels->launch(bound.kernel->name, bound.args, where,
                          bound.grid ? &*bound.grid : nullptr, stream);
          checkLaunch(where + " (kernel " + bound.kernel->name + ")");
        }
      }
    });
  };
  for (size_t i = 0; i < p.ops.size(); ++i) {
    runOp(i);
    if (afterOp)
      afterOp(int64_t(i));
  }
}

/// One GEMM of the step program in the package's precision; a bias
/// epilogue or an addend as one cuBLASLt matmul where it can run, else the
/// addend copied into C, the GEMM with beta, then pe_add_bias (the loader
/// checked the package has it).
bool DeviceModel::Impl::runGemm(const BoundGemm &g, const std::string &where) {
  if (g.biasGrad &&
      gemm->runWithBiasGradient(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.b, g.biasGrad,
                                g.c, where, gemmPrecision, g.typeA, g.typeC))
    return true;
  if (g.addend) {
    if (gemm->runWithAddend(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.b, g.beta,
                            g.addend, g.bias, g.c, where, gemmPrecision, g.typeA, g.typeC))
      return false;
    if (g.addend != g.c && g.m > 0 && g.n > 0)
      copyOnDevice(g.c, g.addend, uint64_t(g.m) * uint64_t(g.n) * dtypeSize(g.typeC),
                   where + " (addend)");
  } else if (g.bias && gemm->runWithBias(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.b,
                                         g.bias, g.c, where, gemmPrecision, g.typeA, g.typeC)) {
    return false;
  }
  if (g.count == 1) // bf16 matrices only here (CudaGemm)
    gemm->run(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.b, g.beta, g.c, where,
              gemmPrecision, g.typeA, g.typeC);
  else
    gemm->runStridedBatched(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.strideA, g.b,
                            g.strideB, g.beta, g.c, g.strideC, g.count, where, gemmPrecision);
  if (g.bias && g.m > 0 && g.n > 0)
    kernels->launch(cudaBiasFallbackKernel(g.typeC),
                    {KernelArg::pointer(g.c), KernelArg::pointer(g.bias),
                     KernelArg::integer(g.m * g.n), KernelArg::integer(g.n)},
                    where + " (bias)", nullptr, stream);
  return false;
}

/// After @gradients: each gradient output into its slot of `grads`.
void DeviceModel::Impl::collectGradients(const BatchBuffers &b) {
  forEachGradientOutput(b, [&](const OptimizerSlot &slot, uint64_t from) {
    const uint64_t bytes = uint64_t(slot.size) * 4;
    copyOnDevice(grads->at(slot.offset * 4, bytes), from, bytes, "collecting the gradients");
  });
}

/// The device address of @gradients' loss (its first output).
uint64_t DeviceModel::Impl::lossAddress(const BatchBuffers &b) const {
  return address(b, program("gradients").outputs.at(0).value);
}

/// Queues the write of `stepKey` into the step key buffer (nothing when
/// the package reads none), for a step of `batch` samples: four one-word
/// memsets on the stream, before the step's work and outside its graph,
/// so that a replayed step reads its own key. Throws Error, naming `where`,
/// for a key outside the masks' domain (dropoutDomainError).
void DeviceModel::Impl::writeStepKey(int64_t batch, const std::string &where) {
  if (stepKeyAddress != 0)
    writeKeyWords(stepKeyAddress, stepKey, batch, where);
}

/// writeStepKey's memsets of `key` at `address`.
void DeviceModel::Impl::writeKeyWords(uint64_t address, const StepKey &key, int64_t batch,
                                      const std::string &where) {
  if (std::string why = dropoutDomainError(0.0, 0, key, batch, 0); !why.empty())
    throw Error(fmt::format("{}: the dropout masks' key: {}", where, why));
  const uint32_t words[kStepKeyWords] = {uint32_t(key.seed), uint32_t(key.seed >> 32),
                                         uint32_t(key.step), uint32_t(key.firstSample)};
  for (int w = 0; w < kStepKeyWords; ++w)
    driver::check(
        driver::require().memsetD32Async(CUdeviceptr(address + 4 * w), words[w], 1, stream),
        where + " (writing the step key)", "cuMemsetD32Async");
}

/// Runs @gradients on the staged batch: the gradients into `grads`, the
/// loss into hostReturn[0].
void DeviceModel::Impl::runGradients() {
  int64_t batch = stagedBatch();
  BatchBuffers &b = buffersFor("gradients", batch);
  writeStepKey(batch, "the gradients program");
  consumeStaged(b, "gradients");
  walk("gradients", b, batch);
  collectGradients(b);
  copyBack(hostReturn->data(), lossAddress(b), 4, "copying the loss back");
}

} // namespace stringrt::cuda
