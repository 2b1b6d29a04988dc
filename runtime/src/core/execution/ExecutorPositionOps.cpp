// Executor adapters of the pe positional-encoding ops (the rotation; the
// tables, the rotary ops, the skew builders, the Cayley transform, the
// generator ops and the SPD gate are in the op library,
// runtime/src/ops/position/), each forward op beside
// its backward op (docs/autodiff.md): each reads the op's attributes and
// calls its reference kernel (PositionKernels.h).
#include "execution/Executor.h"

#include "stringrt/reference/PositionKernels.h"

namespace stringrt::detail {
namespace {

using namespace stringrt::ref;

void runApplyRotation(const OpContext &c) {
  applyRotation<float>(c.in(0), c.in(1), c.op().getInt("heads"), c.out(0));
}

void runApplyRotationGrad(const OpContext &c) {
  applyRotationGrad<float>(c.in(0), c.in(1), c.in(2), c.op().getInt("heads"), c.out(0),
                           c.out(1));
}

} // namespace

void addPositionOps(OpTable &table) {
  table[OpCode::ApplyRotation] = {runApplyRotation};
  table[OpCode::ApplyRotationGrad] = {runApplyRotationGrad};
}

} // namespace stringrt::detail
