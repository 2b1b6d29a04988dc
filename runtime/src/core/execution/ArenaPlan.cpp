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
  if (!arena.elementBytes.empty() && arena.elementBytes.size() != numValues)
    throw Error(where + "element sizes of " + std::to_string(arena.elementBytes.size()) +
                " values, the program has " + std::to_string(numValues));
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
    const int64_t element = arena.elementBytesOf(v);
    if (element != 2 && element != 4)
      throw Error(where + "value " + std::to_string(v) + " is stored at " +
                  std::to_string(element) + " bytes an element (2 or 4)");
    auto [perBatch, fixed] = affineSize(program.values[v].shape);
    perBatch *= element;
    fixed *= element;
    if (arena.slots[s].first < perBatch || arena.slots[s].second < fixed)
      throw Error(where + "slot " + std::to_string(s) + " ([" +
                  std::to_string(arena.slots[s].first) + ", " +
                  std::to_string(arena.slots[s].second) + "] bytes) is too small for value " +
                  std::to_string(v) + " ([" + std::to_string(perBatch) + ", " +
                  std::to_string(fixed) + "] bytes)");
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
  const int64_t arenaBytes = arenaSlotsBytes(arena.slots, arena.reportBatch).value_or(-1);
  if (arena.arenaBytes != arenaBytes || arena.noReuseBytes != noReuse)
    throw Error(where + "the report says " + std::to_string(arena.arenaBytes) + " arena and " +
                std::to_string(arena.noReuseBytes) + " no-reuse bytes at batch " +
                std::to_string(arena.reportBatch) + ", the plan gives " +
                std::to_string(arenaBytes) + " and " + std::to_string(noReuse));
}

std::vector<std::pair<int64_t, int64_t>> f32ArenaSlots(const Program &program) {
  const ProgramArena &arena = *program.arena;
  std::vector<std::pair<int64_t, int64_t>> slots = arena.slots;
  if (arena.elementBytes.empty())
    return slots;
  const std::vector<bool> member = arenaMembers(program);
  for (size_t v = 0; v < program.values.size(); ++v) {
    const int64_t s = v < arena.valueSlot.size() ? arena.valueSlot[v] : -1;
    if (!member[v] || s < 0 || size_t(s) >= slots.size() || arena.elementBytesOf(v) >= 4)
      continue;
    auto [perBatch, fixed] = affineSize(program.values[v].shape);
    slots[size_t(s)].first = std::max(slots[size_t(s)].first, perBatch * 4);
    slots[size_t(s)].second = std::max(slots[size_t(s)].second, fixed * 4);
  }
  return slots;
}

ArenaLayout arenaLayout(const std::vector<std::pair<int64_t, int64_t>> &slots, int64_t batch,
                        int64_t alignment) {
  ArenaLayout layout;
  layout.offsets.reserve(slots.size());
  for (const auto &[perBatch, fixed] : slots) {
    layout.offsets.push_back(layout.bytes);
    // Checked: an absurd batch is an error, not a wrapped size.
    int64_t bytes = 0;
    if (__builtin_mul_overflow(perBatch, batch, &bytes) ||
        __builtin_add_overflow(bytes, fixed + alignment - 1, &bytes) ||
        __builtin_add_overflow(layout.bytes, bytes / alignment * alignment, &layout.bytes))
      throw Error("the arena at batch " + std::to_string(batch) +
                  " would hold more than 2^63 bytes");
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
