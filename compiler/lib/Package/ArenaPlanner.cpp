//===- ArenaPlanner.cpp - liveness intervals and slot assignment ----------===//
//
// See ArenaPlanner.h and docs/package.md ("The arena plan").
//
//===----------------------------------------------------------------------===//
#include "stringc/Package/ArenaPlanner.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <numeric>

using namespace mlir;

namespace stringc {

int64_t ArenaPlan::arenaBytes(int64_t batch) const {
  constexpr int64_t align = stringrt::kArenaSlotAlignment;
  int64_t bytes = 0;
  for (const ArenaSlot &slot : slots)
    bytes += (slot.bytes(batch) + align - 1) / align * align;
  return bytes;
}

int64_t noReuseBytes(llvm::ArrayRef<ArenaValue> values, int64_t batch) {
  int64_t bytes = 0;
  for (const ArenaValue &v : values)
    if (v.planned)
      bytes += v.bytes(batch);
  return bytes;
}

ArenaPlan planArena(llvm::ArrayRef<ArenaValue> values) {
  ArenaPlan plan;
  plan.valueSlot.assign(values.size(), -1);
  std::vector<size_t> order;
  for (size_t v = 0; v < values.size(); ++v)
    if (values[v].planned)
      order.push_back(v);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return values[x].start < values[y].start;
  });
  std::vector<int64_t> busyUntil; // per slot: the end of its last member
  const int64_t b = kArenaReportBatch;
  for (size_t v : order) {
    const ArenaValue &value = values[v];
    int64_t best = -1, bestGrowth = 0, bestSize = 0;
    for (size_t s = 0; s < plan.slots.size(); ++s) {
      if (busyUntil[s] >= value.start)
        continue; // a member is still live
      const ArenaSlot &slot = plan.slots[s];
      ArenaSlot grown{std::max(slot.perBatch, value.perBatch),
                      std::max(slot.fixed, value.fixed)};
      int64_t growth = grown.bytes(b) - slot.bytes(b);
      int64_t size = slot.bytes(b);
      if (best < 0 || growth < bestGrowth ||
          (growth == bestGrowth && size < bestSize)) {
        best = int64_t(s);
        bestGrowth = growth;
        bestSize = size;
      }
    }
    if (best < 0) {
      best = int64_t(plan.slots.size());
      plan.slots.push_back({});
      busyUntil.push_back(-1);
    }
    ArenaSlot &slot = plan.slots[best];
    slot.perBatch = std::max(slot.perBatch, value.perBatch);
    slot.fixed = std::max(slot.fixed, value.fixed);
    busyUntil[best] = value.end;
    plan.valueSlot[v] = best;
  }
  return plan;
}

std::optional<std::string> verifyArenaPlan(llvm::ArrayRef<ArenaValue> values,
                                           const ArenaPlan &plan) {
  if (plan.valueSlot.size() != values.size())
    return "the plan has " + std::to_string(plan.valueSlot.size()) +
           " value slots, the program " + std::to_string(values.size()) +
           " values";
  std::vector<std::vector<size_t>> members(plan.slots.size());
  for (size_t v = 0; v < values.size(); ++v) {
    int64_t s = plan.valueSlot[v];
    if (!values[v].planned) {
      if (s != -1)
        return "value " + std::to_string(v) +
               " is not an intermediate but has slot " + std::to_string(s);
      continue;
    }
    if (s < 0 || s >= int64_t(plan.slots.size()))
      return "value " + std::to_string(v) + " has no slot";
    const ArenaSlot &slot = plan.slots[s];
    if (slot.perBatch < values[v].perBatch || slot.fixed < values[v].fixed)
      return "slot " + std::to_string(s) + " is too small for value " +
             std::to_string(v);
    members[s].push_back(v);
  }
  for (size_t s = 0; s < members.size(); ++s) {
    std::vector<size_t> &m = members[s];
    std::sort(m.begin(), m.end(), [&](size_t x, size_t y) {
      return values[x].start < values[y].start;
    });
    for (size_t k = 1; k < m.size(); ++k)
      if (values[m[k]].start <= values[m[k - 1]].end)
        return "values " + std::to_string(m[k - 1]) + " and " +
               std::to_string(m[k]) + " share slot " + std::to_string(s) +
               " but are both live at op " +
               std::to_string(values[m[k]].start);
  }
  return std::nullopt;
}

std::vector<ArenaValue> arenaValues(func::FuncOp func, const ConcurrentOps &concurrent,
                                    const StoredTypes &stored) {
  Block &block = func.getBody().front();
  llvm::DenseMap<Value, int64_t> ids;
  llvm::DenseMap<int64_t, int64_t> storedBytes; // by value id; absent: 4 (f32)
  for (const auto &[id, dtype] : stored)
    storedBytes[id] = int64_t(stringrt::dtypeSize(dtype));
  std::vector<ArenaValue> values;
  auto add = [&](Value v, bool planned, int64_t at) {
    const int64_t id = int64_t(values.size());
    ids[v] = id;
    ArenaValue value;
    value.planned = planned;
    value.start = value.end = at;
    if (auto type = dyn_cast<RankedTensorType>(v.getType())) {
      auto it = storedBytes.find(id);
      int64_t product = it == storedBytes.end() ? 4 : it->second;
      bool batched = false;
      for (int64_t d : type.getShape()) {
        if (ShapedType::isDynamic(d))
          batched = true;
        else
          product *= d;
      }
      (batched ? value.perBatch : value.fixed) = product;
      value.planned = planned && type.getElementType().isF32();
    } else {
      value.planned = false;
    }
    values.push_back(value);
  };
  for (BlockArgument arg : block.getArguments())
    add(arg, /*planned=*/false, 0);
  int64_t index = 0;
  for (Operation &op : block.without_terminator()) {
    for (Value operand : op.getOperands()) {
      auto it = ids.find(operand);
      if (it != ids.end())
        values[it->second].end = std::max(values[it->second].end, index);
    }
    bool planned = !isa<pe::GetParamOp>(op);
    for (Value result : op.getResults())
      add(result, planned, index);
    ++index;
  }
  // Outputs live to the end (the runtime copies them out after the last op).
  for (Value output : block.getTerminator()->getOperands()) {
    auto it = ids.find(output);
    if (it != ids.end())
      values[it->second].end = index;
  }
  // The values of ops that run at once live until the range's last op.
  if (!concurrent.empty()) {
    std::vector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);
    for (const auto &[first, last] : concurrent)
      for (int64_t o = first; o <= last && o < int64_t(ops.size()); ++o) {
        for (Value v : ops[size_t(o)]->getOperands())
          if (auto it = ids.find(v); it != ids.end())
            values[it->second].end = std::max(values[it->second].end, last);
        for (Value v : ops[size_t(o)]->getResults())
          values[ids.lookup(v)].end = std::max(values[ids.lookup(v)].end, last);
      }
  }
  return values;
}

std::optional<std::string> packageArena(func::FuncOp func, const ConcurrentOps &concurrent,
                                        stringrt::ProgramArena &arena, const StoredTypes &stored) {
  std::vector<ArenaValue> values = arenaValues(func, concurrent, stored);
  ArenaPlan plan = planArena(values);
  if (std::optional<std::string> problem = verifyArenaPlan(values, plan))
    return problem;
  arena = stringrt::ProgramArena();
  for (const ArenaSlot &slot : plan.slots)
    arena.slots.push_back({slot.perBatch, slot.fixed});
  arena.valueSlot.assign(plan.valueSlot.begin(), plan.valueSlot.end());
  arena.reportBatch = kArenaReportBatch;
  arena.arenaBytes = plan.arenaBytes(kArenaReportBatch);
  arena.noReuseBytes = noReuseBytes(values, kArenaReportBatch);
  if (!stored.empty()) { // what Package::load derives from the cuda section
    arena.elementBytes.assign(values.size(), 4);
    for (const auto &[id, dtype] : stored)
      if (id >= 0 && size_t(id) < values.size())
        arena.elementBytes[size_t(id)] = int64_t(stringrt::dtypeSize(dtype));
  }
  return std::nullopt;
}

} // namespace stringc
