// The arena plan of a program at run time (docs/package.md, "The arena
// plan"): the check of the compiler's plan against the program's liveness,
// and the arenas themselves, one allocation per batch size reused across
// runs. Private to the runtime; Executor uses it.
#pragma once

#include "stringrt/Manifest.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace stringrt::detail {

// Whether value v of `program` belongs in the arena: an f32 op result other
// than a pe.get_param view (the compiler plans exactly these).
std::vector<bool> arenaMembers(const Program &program);

// Checks `program.arena` (which must be present): every arena member has a
// slot whose size bounds it for every batch (in bytes, each member at the
// plan's bytes an element: ProgramArena::elementBytesOf), no other value has
// one, no two members of a slot are live at the same op (intervals
// [start[v], end[v]], inclusive, in op indices; outputs end at the op
// count), and the report's figures are those of the plan (arena_bytes: the
// slots at the report's batch, each rounded up to kArenaSlotAlignment;
// no_reuse_bytes: the members' bytes). Throws Error naming the program
// `name` and the values.
void checkArenaPlan(const Program &program, const std::string &name,
                    const std::vector<int64_t> &start, const std::vector<int64_t> &end);

// The plan's slots as the CPU executor stores them: every member at 4 bytes
// an element (f32), so a slot of a plan that stores some members in bf16
// grows to its widest member's f32 bytes; the plan's own slots otherwise.
std::vector<std::pair<int64_t, int64_t>> f32ArenaSlots(const Program &program);

// Slots ([per batch, fixed] bytes each) laid out at one batch size: slot k
// at offsets[k] bytes (prefix sums of the slot sizes, each rounded up to
// `alignment` bytes, kArenaSlotAlignment on the CPU, kDeviceAlignment on
// the device: every slot starts aligned at every batch), `bytes` in all.
// Throws Error past 2^63 bytes.
struct ArenaLayout {
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
};
ArenaLayout arenaLayout(const std::vector<std::pair<int64_t, int64_t>> &slots, int64_t batch,
                        int64_t alignment = kArenaSlotAlignment);

// Arenas kept between runs, by batch size: take() hands one out (allocating
// only when none of that size is free, e.g. the first run at a batch or a
// concurrent run), give() takes it back. At most kKeptBatches batch sizes
// are kept, the least recently given dropped first. Thread-safe.
class ArenaCache {
public:
  static constexpr size_t kKeptBatches = 4;
  std::vector<float> take(int64_t batch, int64_t elements, bool &allocated);
  void give(int64_t batch, std::vector<float> &&arena);

private:
  struct Entry {
    int64_t batch = 0;
    std::vector<std::vector<float>> free;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_; // most recently given last
};

} // namespace stringrt::detail
