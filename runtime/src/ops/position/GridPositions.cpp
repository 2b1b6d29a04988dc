// pe.grid_positions (PEPositionOps.td: the (x, y) positions of a row-major
// rows x cols patch grid after `special` tokens at (0, 0), a constant
// [special + rows*cols, 2] table; no gradient op: it has no operands): the
// shape contract, the reference kernel (every kernel set runs it: a
// constant has no fast variant) and the registration (ops/OpLibrary.h). The
// kernel's declaration is in stringrt/ops/PositionOps.h. stringc generates
// no CPU kernel for it.
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

// rows, cols > 0, special >= 0, the result [special + rows*cols, 2].
template <typename T>
void gridPositionsContract(int64_t rows, int64_t cols, int64_t special, const TensorRef<T> &pos) {
  const char *what = "grid_positions";
  check(rows > 0 && cols > 0, what,
        "'rows' and 'cols' must be > 0, got " + std::to_string(rows) + "x" + std::to_string(cols));
  check(special >= 0, what, "'special' must be >= 0, got " + std::to_string(special));
  checkShape("grid_positions: result", pos, {special + rows * cols, 2});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: exact integers, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// pos[t] = (0, 0) for t < special, then patch n at (n % cols, n / cols).
template <typename T>
void gridPositions(int64_t rows, int64_t cols, int64_t special, TensorRef<T> pos) {
  ops::gridPositionsContract(rows, cols, special, pos);
  for (int64_t t = 0; t < special; ++t) {
    pos[2 * t] = T(0);
    pos[2 * t + 1] = T(0);
  }
  for (int64_t n = 0; n < rows * cols; ++n) {
    pos[2 * (special + n)] = static_cast<T>(static_cast<double>(n % cols));     // x: column
    pos[2 * (special + n) + 1] = static_cast<T>(static_cast<double>(n / cols)); // y: row
  }
}

template void gridPositions<float>(int64_t, int64_t, int64_t, TensorRef<float>);
template void gridPositions<double>(int64_t, int64_t, int64_t, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runGridPositions(const OpContext &c) {
  ref::gridPositions<float>(attrs::GridPositions{c.op()}.rows(),
                            attrs::GridPositions{c.op()}.cols(),
                            attrs::GridPositions{c.op()}.special(), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::GridPositions>(OpRegistry &registry) {
  registry.add(OpCode::GridPositions, {runGridPositions});
}

} // namespace stringrt::ops
