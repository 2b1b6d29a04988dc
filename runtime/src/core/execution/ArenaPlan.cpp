// The arena plan: load-time check and the per-batch arenas (ArenaPlan.h).
#include "execution/ArenaPlan.h"

#include "format/AffineSize.h"
#include "stringrt/Error.h"

#include <algorithm>

namespace stringrt::detail {

std::vector<bool> arenaMembers(const Program &program) {
  std::vector<bool> member(program.values.size(), false);
  for (const ProgramOp &op : program.ops)
    if (!op.is(OpCode::GetParam))
      for (ValueId r : op.results)
        if (r < member.size() && program.values[r].dtype == DType::F32)
          member[r] = true;
  return member;
}

void checkArenaPlan(const Program &program, const std::string &name,
                    const std::vector<int64_t> &start, const std::vector<int64_t> &end) {
  const ProgramArena &arena = *program.arena;
  const std::string where = "program '" + name + "': arena plan: ";
  const std::vector<bool> member = arenaMembers(program);
  const size_t numValues = program.values.size();
  if (arena.valueSlot.size() != numValues)
    throw Error(where + std::to_string(arena.valueSlot.size()) + " value slots, the program has " +
                std::to_string(numValues) + " values");
  std::vector<std::vector<size_t>> slotMembers(arena.slots.size());
  int64_t noReuse = 0;
  for (size_t v = 0; v < numValues; ++v) {
    const int64_t s = arena.valueSlot[v];
    if (!member[v]) {
      if (s != -1)
        throw Error(where + "value " + std::to_string(v) +
                    " is not an intermediate (an input, a parameter view or an i32 value) "
                    "but is given slot " + std::to_string(s));
      continue;
    }
    if (s < 0 || s >= static_cast<int64_t>(arena.slots.size()))
      throw Error(where + "value " + std::to_string(v) + " has no slot");
    auto [perBatch, fixed] = affineSize(program.values[v].shape);
    if (arena.slots[s].first < perBatch || arena.slots[s].second < fixed)
      throw Error(where + "slot " + std::to_string(s) + " ([" +
                  std::to_string(arena.slots[s].first) + ", " +
                  std::to_string(arena.slots[s].second) + "]) is too small for value " +
                  std::to_string(v) + " ([" + std::to_string(perBatch) + ", " +
                  std::to_string(fixed) + "])");
    noReuse += perBatch * arena.reportBatch + fixed;
    slotMembers[s].push_back(v);
  }
  for (size_t s = 0; s < slotMembers.size(); ++s) {
    std::vector<size_t> &m = slotMembers[s];
    std::sort(m.begin(), m.end(), [&](size_t x, size_t y) { return start[x] < start[y]; });
    size_t longest = 0; // of m[0..k), the member whose interval ends last
    for (size_t k = 1; k < m.size(); ++k) {
      const size_t a = m[longest], b = m[k];
      if (start[b] <= end[a])
        throw Error(where + "values " + std::to_string(a) + " (live at ops " +
                    std::to_string(start[a]) + " to " + std::to_string(end[a]) + ") and " +
                    std::to_string(b) + " (live at ops " + std::to_string(start[b]) + " to " +
                    std::to_string(end[b]) + ") overlap but share slot " + std::to_string(s));
      if (end[b] > end[a])
        longest = k;
    }
  }
  int64_t arenaElements = 0;
  for (const auto &[perBatch, fixed] : arena.slots)
    arenaElements += perBatch * arena.reportBatch + fixed;
  if (arena.arenaBytes != arenaElements * 4 || arena.noReuseBytes != noReuse * 4)
    throw Error(where + "the report says " + std::to_string(arena.arenaBytes) + " arena and " +
                std::to_string(arena.noReuseBytes) + " no-reuse bytes at batch " +
                std::to_string(arena.reportBatch) + ", the plan gives " +
                std::to_string(arenaElements * 4) + " and " + std::to_string(noReuse * 4));
}

ArenaLayout arenaLayout(const ProgramArena &arena, int64_t batch, int64_t alignElements) {
  ArenaLayout layout;
  layout.offsets.reserve(arena.slots.size());
  for (const auto &[perBatch, fixed] : arena.slots) {
    layout.offsets.push_back(layout.elements);
    // Checked: an absurd batch is an error, not a wrapped size.
    int64_t elements = 0;
    if (__builtin_mul_overflow(perBatch, batch, &elements) ||
        __builtin_add_overflow(elements, fixed + alignElements - 1, &elements) ||
        __builtin_add_overflow(layout.elements, elements / alignElements * alignElements,
                               &layout.elements))
      throw Error("the arena at batch " + std::to_string(batch) +
                  " would hold more than 2^63 elements");
  }
  return layout;
}

std::vector<float> ArenaCache::take(int64_t batch, int64_t elements, bool &allocated) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Entry &e : entries_)
      if (e.batch == batch && !e.free.empty()) {
        std::vector<float> arena = std::move(e.free.back());
        e.free.pop_back();
        if (static_cast<int64_t>(arena.size()) == elements) {
          allocated = false;
          return arena;
        }
      }
  }
  allocated = true;
  return std::vector<float>(static_cast<size_t>(elements));
}

void ArenaCache::give(int64_t batch, std::vector<float> &&arena) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry &e) { return e.batch == batch; });
  Entry entry;
  if (it != entries_.end()) {
    entry = std::move(*it);
    entries_.erase(it);
  }
  entry.batch = batch;
  entry.free.push_back(std::move(arena));
  entries_.push_back(std::move(entry));
  if (entries_.size() > kKeptBatches)
    entries_.erase(entries_.begin());
}

} // namespace stringrt::detail
