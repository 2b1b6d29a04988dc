// pe.relative_positions (PEPositionOps.td: every pair's offset
// r[i, j] = pos[j] - pos[i] of a position table; no gradient op: positions
// are constants, pe-autodiff differentiates nothing through them): the
// shape contract, the reference kernel (every kernel set runs it: there is
// no fast variant) and the registration (ops/OpLibrary.h). The kernel's
// declaration is in stringrt/ops/PositionOps.h. stringc generates no CPU
// kernel for it.
#include "../OpLibrary.h"

#include "stringrt/ops/PositionOps.h"

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

// pos [T, A], the result [T, T, A].
template <typename T>
void relativePositionsContract(const TensorRef<const T> &pos, const TensorRef<T> &r) {
  checkRank("relative_positions: 'pos'", pos, 2);
  checkShape("relative_positions: result", r, {pos.dim(0), pos.dim(0), pos.dim(1)});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: differences in double, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// r[i, j, a] = pos[j, a] - pos[i, a].
template <typename T> void relativePositions(TensorRef<const T> pos, TensorRef<T> r) {
  ops::relativePositionsContract(pos, r);
  const int64_t n = pos.dim(0), axes = pos.dim(1);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t a = 0; a < axes; ++a)
        r[(i * n + j) * axes + a] = static_cast<T>(static_cast<double>(pos[j * axes + a]) -
                                                   static_cast<double>(pos[i * axes + a]));
}

template void relativePositions<float>(TensorRef<const float>, TensorRef<float>);
template void relativePositions<double>(TensorRef<const double>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runRelativePositions(const OpContext &c) {
  ref::relativePositions<float>(c.in(0), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::RelativePositions>(OpRegistry &registry) {
  registry.add(OpCode::RelativePositions, {runRelativePositions});
}

} // namespace stringrt::ops
