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
// slot whose size bounds it for every batch, no other value has one, no two
// members of a slot are live at the same op (intervals [start[v], end[v]],
// inclusive, in op indices; outputs end at the op count), and the report's
// figures are those of the plan. Throws Error naming the program `name` and
// the values.
void checkArenaPlan(const Program &program, const std::string &name,
                    const std::vector<int64_t> &start, const std::vector<int64_t> &end);

// The plan's slots laid out at one batch size: slot k at offsets[k] (in
// floats; prefix sums of the slot sizes, each rounded up to a multiple of
// `alignElements`: the CPU packs them, the device aligns them for cuBLAS),
// `elements` floats in all.
struct ArenaLayout {
  std::vector<int64_t> offsets;
  int64_t elements = 0;
};
ArenaLayout arenaLayout(const ProgramArena &arena, int64_t batch, int64_t alignElements = 1);

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
