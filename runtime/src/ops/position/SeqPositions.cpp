// pe.seq_positions (PEPositionOps.td: the positions of a 1D sequence after
// `special` tokens at position 0, a constant [special + length, 1] table;
// no gradient op: it has no operands): the shape contract, the reference
// kernel (every kernel set runs it: a constant has no fast variant) and the
// registration (ops/OpLibrary.h). The kernel's declaration is in
// stringrt/ops/PositionOps.h. stringc generates no CPU kernel for it.
#include "../OpLibrary.h"

#include "stringrt/ops/PositionOps.h"

#include <string>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::TensorRef;

// length > 0, special >= 0, the result [special + length, 1].
template <typename T>
void seqPositionsContract(int64_t length, int64_t special, const TensorRef<T> &pos) {
  const char *what = "seq_positions";
  check(length > 0, what, "'length' must be > 0, got " + std::to_string(length));
  check(special >= 0, what, "'special' must be >= 0, got " + std::to_string(special));
  checkShape("seq_positions: result", pos, {special + length, 1});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: exact integers, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// pos[t, 0] = 0 for t < special, then 0, 1, ..., length - 1.
template <typename T> void seqPositions(int64_t length, int64_t special, TensorRef<T> pos) {
  ops::seqPositionsContract(length, special, pos);
  for (int64_t t = 0; t < special; ++t)
    pos[t] = T(0);
  for (int64_t n = 0; n < length; ++n)
    pos[special + n] = static_cast<T>(static_cast<double>(n));
}

template void seqPositions<float>(int64_t, int64_t, TensorRef<float>);
template void seqPositions<double>(int64_t, int64_t, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSeqPositions(const OpContext &c) {
  ref::seqPositions<float>(attrs::SeqPositions{c.op()}.length(),
                           attrs::SeqPositions{c.op()}.special(), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::SeqPositions>(OpRegistry &registry) {
  registry.add(OpCode::SeqPositions, {runSeqPositions});
}

} // namespace stringrt::ops
