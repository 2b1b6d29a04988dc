// pe.offset_table (PEGatherOps.td: the distinct relative offsets of a
// position table as a constant [U, A] table, as pe-distinct-offsets writes
// them; no gradient op: it has no operands): the shape contract, the
// reference kernel (every kernel set runs it: a constant has no fast
// variant) and the registration (ops/OpLibrary.h). The kernel's declaration
// is in stringrt/ops/GatherOps.h. stringc generates no CPU kernel for it.
#include "../OpLibrary.h"

#include "stringrt/ops/GatherOps.h"

#include <string>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkRank;
using ref::TensorRef;

// Offsets within 2^24 in magnitude, the integers f32 holds exactly.
constexpr int64_t kExact = int64_t(1) << 24;

// table [U, A], 'offsets' of U*A entries, each exact in f32.
template <typename T>
void offsetTableContract(const std::vector<int64_t> &offsets, const TensorRef<T> &table) {
  const char *what = "offset_table";
  checkRank(what, table, 2);
  check(static_cast<int64_t>(offsets.size()) == table.numel(), what,
        "'offsets' must have U*A = " + std::to_string(table.numel()) + " entries, got " +
            std::to_string(offsets.size()));
  for (int64_t offset : offsets)
    check(offset >= -kExact && offset <= kExact, what,
          "offset " + std::to_string(offset) + " is not exact in f32");
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: a conversion
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

template <typename T> void offsetTable(const std::vector<int64_t> &offsets, TensorRef<T> table) {
  ops::offsetTableContract(offsets, table);
  for (size_t u = 0; u < offsets.size(); ++u)
    table[static_cast<int64_t>(u)] = static_cast<T>(offsets[u]);
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void offsetTable<T>(const std::vector<int64_t> &, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runOffsetTable(const OpContext &c) {
  ref::offsetTable<float>(c.op().getInts("offsets"), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::OffsetTable>(OpRegistry &registry) {
  registry.add(OpCode::OffsetTable, {runOffsetTable});
}

} // namespace stringrt::ops
