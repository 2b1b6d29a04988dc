// pe.rope_table and its gradient pe.rope_table_grad (PEFusedOps.td: the
// cos/sin table of the rotary angles theta_j(t) = sum_a pos[t, a] freqs[j,
// a], which pe-hoist builds once per step for every pe.rope_apply with the
// same pos and freqs; the gradient with respect to the frequencies, pos
// getting none): the shape contracts, the reference kernels and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/FusedOps.h. The table is [T, D/2] data built once per step,
// so neither op has a fast kernel (every kernel set runs the reference
// ones), nor a generated one.
#include "../OpLibrary.h"

#include "stringrt/ops/FusedOps.h"

#include <cmath>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkRank;
using ref::checkShape;
using ref::shapeToString;
using ref::TensorRef;

// Both ops: pos [T, A] and freqs [P, A]. Returns {T, P, A}.
template <typename T>
std::vector<int64_t> ropeTableInputs(const char *what, const TensorRef<const T> &pos,
                                     const TensorRef<const T> &freqs) {
  checkRank((std::string(what) + ": 'pos'").c_str(), pos, 2);
  checkRank((std::string(what) + ": 'freqs'").c_str(), freqs, 2);
  check(freqs.dim(1) == pos.dim(1), what,
        "'freqs' must be [P, " + std::to_string(pos.dim(1)) + "], got " +
            shapeToString(freqs.shape));
  return {pos.dim(0), freqs.dim(0), pos.dim(1)};
}

// rope_table: pos [T, A], freqs [P, A], the result [T, P, 2].
template <typename T>
std::vector<int64_t> ropeTableContract(const TensorRef<const T> &pos,
                                       const TensorRef<const T> &freqs,
                                       const TensorRef<T> &table) {
  const auto dims = ropeTableInputs("rope_table", pos, freqs);
  checkShape("rope_table: result", table, {dims[0], dims[1], 2});
  return dims;
}

// rope_table_grad: pos [T, A], freqs [P, A], dy [T, P, 2], the result the
// shape of freqs.
template <typename T>
std::vector<int64_t> ropeTableGradContract(const TensorRef<const T> &pos,
                                           const TensorRef<const T> &freqs,
                                           const TensorRef<const T> &dy,
                                           const TensorRef<T> &dfreqs) {
  const auto dims = ropeTableInputs("rope_table_grad", pos, freqs);
  checkShape("rope_table_grad: 'dy'", dy, {dims[0], dims[1], 2});
  checkShape("rope_table_grad: result", dfreqs, freqs.shape);
  return dims;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: the angles in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

template <typename T>
double angle(const TensorRef<const T> &pos, const TensorRef<const T> &freqs, int64_t t, int64_t j,
             int64_t axes) {
  double theta = 0.0;
  for (int64_t a = 0; a < axes; ++a)
    theta += static_cast<double>(pos[t * axes + a]) * static_cast<double>(freqs[j * axes + a]);
  return theta;
}

} // namespace

template <typename T>
void ropeTable(TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<T> table) {
  const auto dims = ops::ropeTableContract(pos, freqs, table);
  const int64_t tokens = dims[0], pairs = dims[1], axes = dims[2];
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < pairs; ++j) {
      const double theta = angle(pos, freqs, t, j, axes);
      table[(t * pairs + j) * 2] = static_cast<T>(std::cos(theta));
      table[(t * pairs + j) * 2 + 1] = static_cast<T>(std::sin(theta));
    }
}

// dtheta_j(t) = -sin theta dy[t, j, 0] + cos theta dy[t, j, 1];
// dfreqs[j, a] = sum_t pos[t, a] dtheta_j(t), summed in t order in double.
template <typename T>
void ropeTableGrad(TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<const T> dy,
                   TensorRef<T> dfreqs) {
  const auto dims = ops::ropeTableGradContract(pos, freqs, dy, dfreqs);
  const int64_t tokens = dims[0], pairs = dims[1], axes = dims[2];
  std::vector<double> acc(static_cast<size_t>(pairs * axes), 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < pairs; ++j) {
      const double theta = angle(pos, freqs, t, j, axes);
      const double dtheta = -std::sin(theta) * static_cast<double>(dy[(t * pairs + j) * 2]) +
                            std::cos(theta) * static_cast<double>(dy[(t * pairs + j) * 2 + 1]);
      for (int64_t a = 0; a < axes; ++a)
        acc[j * axes + a] += static_cast<double>(pos[t * axes + a]) * dtheta;
    }
  for (int64_t i = 0; i < pairs * axes; ++i)
    dfreqs[i] = static_cast<T>(acc[i]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void ropeTable<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);                \
  template void ropeTableGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,       \
                                 TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runRopeTable(const OpContext &c) { ref::ropeTable<float>(c.in(0), c.in(1), c.out(0)); }

// Operands pos, freqs and dy.
void runRopeTableGrad(const OpContext &c) {
  ref::ropeTableGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::RopeTable>(OpRegistry &registry) {
  registry.add(OpCode::RopeTable, {runRopeTable});
  registry.add(OpCode::RopeTableGrad, {runRopeTableGrad});
}

} // namespace stringrt::ops
