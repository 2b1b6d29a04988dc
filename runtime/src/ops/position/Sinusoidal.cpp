// pe.sinusoidal (PEPositionOps.td: the Transformer's sinusoidal position
// table, a constant [length, dim]; no gradient op: it has no operands): the
// shape contract, the reference kernel (every kernel set runs it: a
// constant has no fast variant) and the registration (ops/OpLibrary.h). The
// kernel's declaration is in stringrt/ops/PositionOps.h. stringc generates
// no CPU kernel for it.
#include "../OpLibrary.h"

#include "stringrt/ops/PositionOps.h"

#include <cmath>
#include <string>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::TensorRef;

// length > 0, dim > 0 and even, base > 0, the result [length, dim].
template <typename T>
void sinusoidalContract(int64_t length, int64_t dim, double base, const TensorRef<T> &pe) {
  const char *what = "sinusoidal";
  check(length > 0, what, "'length' must be > 0, got " + std::to_string(length));
  check(dim > 0 && dim % 2 == 0, what, "'dim' must be > 0 and even, got " + std::to_string(dim));
  check(base > 0, what, "'base' must be > 0");
  checkShape("sinusoidal: result", pe, {length, dim});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: in double, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim)).
template <typename T> void sinusoidal(int64_t length, int64_t dim, double base, TensorRef<T> pe) {
  ops::sinusoidalContract(length, dim, base, pe);
  for (int64_t p = 0; p < length; ++p)
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double angle = static_cast<double>(p) /
                           std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(dim));
      pe[p * dim + 2 * i] = static_cast<T>(std::sin(angle));
      pe[p * dim + 2 * i + 1] = static_cast<T>(std::cos(angle));
    }
}

template void sinusoidal<float>(int64_t, int64_t, double, TensorRef<float>);
template void sinusoidal<double>(int64_t, int64_t, double, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSinusoidal(const OpContext &c) {
  ref::sinusoidal<float>(c.op().getInt("length"), c.op().getInt("dim"), c.op().getFloat("base"),
                         c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Sinusoidal>(OpRegistry &registry) {
  registry.add(OpCode::Sinusoidal, {runSinusoidal});
}

} // namespace stringrt::ops
