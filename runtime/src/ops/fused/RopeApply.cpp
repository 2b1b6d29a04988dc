// pe.rope_apply and its table gradient pe.rope_apply_grad_table
// (PEFusedOps.td: the rotary pairs of x turned by a precomputed cos/sin
// table, pe.rope_table's, which pe-hoist builds once per step; `inverse`
// turns them back, which is also the op's gradient with respect to x, so
// pe-autodiff emits a pe.rope_apply for it): the shape contracts, the
// reference kernels, the fast kernels and the registration
// (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/FusedOps.h; stringc's generated kernels of both ops are
// CpuGen's (RopeGen.cpp), checked here before they run.
//
// Unlike pe.rope's kernels nothing here evaluates a cos or a sin.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../cpu/RopeRow.h"
#include "../../reference/PositionUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/FusedOps.h"

#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::shapeToString;
using ref::TensorRef;

// x [..., T, D] (D even) against table [T, D/2, 2]; returns the leading
// count (the product of x's dims before T).
template <typename T>
int64_t ropeTableFits(const char *what, const TensorRef<const T> &x,
                      const TensorRef<const T> &table) {
  check(x.rank() >= 2, what, "'x' must be [..., T, D], got " + shapeToString(x.shape));
  const int64_t tokens = x.dim(-2), width = x.dim(-1);
  check(width % 2 == 0, what,
        "the last dimension of 'x' must be even (interleaved pairs), got " +
            std::to_string(width));
  checkShape((std::string(what) + ": 'table'").c_str(), table, {tokens, width / 2, 2});
  return ref::position::leadingCount(x.shape, 2);
}

// rope_apply: x [..., T, D] with D even, table [T, D/2, 2], the result the
// shape of x. Returns the leading count (the product of x's dims before T).
template <typename T>
int64_t ropeApplyContract(const TensorRef<const T> &x, const TensorRef<const T> &table,
                          const TensorRef<T> &y) {
  const int64_t lead = ropeTableFits("rope_apply", x, table);
  checkShape("rope_apply: result", y, x.shape);
  return lead;
}

// rope_apply_grad_table: x [..., T, D] with D even, dy the shape of x, the
// result [T, D/2, 2]. Returns the leading count.
template <typename T>
int64_t ropeApplyGradTableContract(const TensorRef<const T> &x, const TensorRef<const T> &dy,
                                   const TensorRef<T> &dtable) {
  check(x.rank() >= 2, "rope_apply_grad_table",
        "'x' must be [..., T, D], got " + shapeToString(x.shape));
  checkShape("rope_apply_grad_table: 'dy'", dy, x.shape);
  const int64_t tokens = x.dim(-2), width = x.dim(-1);
  check(width % 2 == 0, "rope_apply_grad_table",
        "the last dimension of 'x' must be even (interleaved pairs), got " +
            std::to_string(width));
  checkShape("rope_apply_grad_table: result", dtable, {tokens, width / 2, 2});
  return ref::position::leadingCount(x.shape, 2);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// Pair j of token t times [[c, -s], [s, c]] (its transpose when inverse).
template <typename T>
void ropeApply(TensorRef<const T> x, TensorRef<const T> table, bool inverse, TensorRef<T> y) {
  const int64_t lead = ops::ropeApplyContract(x, table, y);
  const int64_t tokens = x.dim(-2), width = x.dim(-1), pairs = width / 2;
  const double sign = inverse ? -1.0 : 1.0;
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        const double c = static_cast<double>(table[(t * pairs + j) * 2]);
        const double s = sign * static_cast<double>(table[(t * pairs + j) * 2 + 1]);
        const int64_t at = (l * tokens + t) * width + 2 * j;
        const double x0 = static_cast<double>(x[at]), x1 = static_cast<double>(x[at + 1]);
        y[at] = static_cast<T>(x0 * c - x1 * s);
        y[at + 1] = static_cast<T>(x0 * s + x1 * c);
      }
}

// dtable summed over the leading index in order, in double.
template <typename T>
void ropeApplyGradTable(TensorRef<const T> x, TensorRef<const T> dy, bool inverse,
                        TensorRef<T> dtable) {
  const int64_t lead = ops::ropeApplyGradTableContract(x, dy, dtable);
  const int64_t tokens = x.dim(-2), width = x.dim(-1), pairs = width / 2;
  const double sign = inverse ? -1.0 : 1.0;
  std::vector<double> acc(static_cast<size_t>(tokens * pairs * 2), 0.0);
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        const int64_t at = (l * tokens + t) * width + 2 * j;
        const double x0 = static_cast<double>(x[at]), x1 = static_cast<double>(x[at + 1]);
        const double d0 = static_cast<double>(dy[at]), d1 = static_cast<double>(dy[at + 1]);
        acc[(t * pairs + j) * 2] += d0 * x0 + d1 * x1;
        acc[(t * pairs + j) * 2 + 1] += sign * (d1 * x0 - d0 * x1);
      }
  for (int64_t i = 0; i < tokens * pairs * 2; ++i)
    dtable[i] = static_cast<T>(acc[i]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void ropeApply<T>(TensorRef<const T>, TensorRef<const T>, bool, TensorRef<T>);          \
  template void ropeApplyGradTable<T>(TensorRef<const T>, TensorRef<const T>, bool, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: float rows over the pool
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using namespace util;

// Rows (batch, token) in parallel, each turned by its token's table row.
void ropeApply(TensorRef<const float> x, TensorRef<const float> table, bool inverse,
               TensorRef<float> y) {
  const int64_t lead = ops::ropeApplyContract<float>(x, table, y);
  const int64_t tokens = x.dim(-2), width = x.dim(-1), pairs = width / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  parallelFor(0, lead * tokens, rowGrain(width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      rotateRow(x.data + r * width, table.data + 2 * (r % tokens) * pairs, pairs, sign,
                y.data + r * width);
  });
}

// Parallel over tokens: each task owns dtable[t] and sums the leading
// index in order, in double, so any thread count gives the same bits.
void ropeApplyGradTable(TensorRef<const float> x, TensorRef<const float> dy, bool inverse,
                        TensorRef<float> dtable) {
  const int64_t lead = ops::ropeApplyGradTableContract<float>(x, dy, dtable);
  const int64_t tokens = x.dim(-2), width = x.dim(-1), pairs = width / 2;
  const double sign = inverse ? -1.0 : 1.0;
  parallelFor(0, tokens, 1, [&](int64_t t0, int64_t t1) {
    std::vector<double> acc(static_cast<size_t>(2 * pairs));
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t l = 0; l < lead; ++l) {
        const float *xr = x.data + (l * tokens + t) * width;
        const float *dr = dy.data + (l * tokens + t) * width;
        for (int64_t j = 0; j < pairs; ++j) {
          const double x0 = xr[2 * j], x1 = xr[2 * j + 1], d0 = dr[2 * j], d1 = dr[2 * j + 1];
          acc[2 * j] += d0 * x0 + d1 * x1;
          acc[2 * j + 1] += sign * (d1 * x0 - d0 * x1);
        }
      }
      for (int64_t i = 0; i < 2 * pairs; ++i)
        dtable.data[t * 2 * pairs + i] = static_cast<float>(acc[i]);
    }
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// The defaulted attribute `inverse` is optional in the manifest and read
// with its default.
void runRopeApply(const OpContext &c) {
  ref::ropeApply<float>(c.in(0), c.in(1), attrs::RopeApply{c.op()}.inverse(), c.out(0));
}

void runFastRopeApply(const OpContext &c) {
  cpu::ropeApply(c.in(0), c.in(1), attrs::RopeApply{c.op()}.inverse(), c.out(0));
}

// The contract alone, run before a compiled kernel.
void checkRopeApply(const OpContext &c) { ropeApplyContract<float>(c.in(0), c.in(1), c.out(0)); }

void runRopeApplyGradTable(const OpContext &c) {
  ref::ropeApplyGradTable<float>(c.in(0), c.in(1), attrs::RopeApplyGradTable{c.op()}.inverse(),
                                 c.out(0));
}

void runFastRopeApplyGradTable(const OpContext &c) {
  cpu::ropeApplyGradTable(c.in(0), c.in(1), attrs::RopeApplyGradTable{c.op()}.inverse(), c.out(0));
}

void checkRopeApplyGradTable(const OpContext &c) {
  ropeApplyGradTableContract<float>(c.in(0), c.in(1), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::RopeApply>(OpRegistry &registry) {
  registry.add(OpCode::RopeApply, {runRopeApply, checkRopeApply, runFastRopeApply});
  registry.add(OpCode::RopeApplyGradTable,
               {runRopeApplyGradTable, checkRopeApplyGradTable, runFastRopeApplyGradTable});
}

} // namespace stringrt::ops
