// pe.rope_freqs (PEPositionOps.td: the rotary frequencies of a dim-wide
// vector split into heads, per pair, as a constant [dim/2, 1] (seq) or
// [dim/2, 2] (axial) table; no gradient op: it has no operands): the shape
// contract, the reference kernel (every kernel set runs it: a constant has
// no fast variant) and the registration (ops/OpLibrary.h). The kernel's
// declaration is in stringrt/ops/PositionOps.h. stringc generates no CPU
// kernel for it.
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
using ref::FreqsKind;
using ref::TensorRef;

// dim > 0, heads > 0 dividing dim, base > 0; the head width Dh = dim/heads
// even (seq: the result [dim/2, 1]) or a multiple of 4 (axial: [dim/2, 2]).
template <typename T>
void ropeFreqsContract(FreqsKind kind, int64_t dim, int64_t heads, double base,
                       const TensorRef<T> &freqs) {
  const char *what = "rope_freqs";
  check(dim > 0, what, "'dim' must be > 0, got " + std::to_string(dim));
  check(heads > 0 && dim % heads == 0, what,
        "'heads' (" + std::to_string(heads) + ") must be > 0 and divide 'dim' (" +
            std::to_string(dim) + ")");
  check(base > 0, what, "'base' must be > 0");
  const int64_t dh = dim / heads;
  if (kind == FreqsKind::Seq) {
    check(dh % 2 == 0, what, "the head width " + std::to_string(dh) + " must be even");
    checkShape("rope_freqs: result", freqs, {dim / 2, 1});
    return;
  }
  check(dh % 4 == 0, what,
        "the head width " + std::to_string(dh) + " must be a multiple of 4 for axial frequencies");
  checkShape("rope_freqs: result", freqs, {dim / 2, 2});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: in double, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// Seq: freqs[j, 0] = base^(-2i/Dh); Axial: (base^(-4i/Dh), 0) for i < Dh/4,
// (0, base^(-4(i - Dh/4)/Dh)) otherwise; i = j % (Dh/2).
template <typename T>
void ropeFreqs(FreqsKind kind, int64_t dim, int64_t heads, double base, TensorRef<T> freqs) {
  ops::ropeFreqsContract(kind, dim, heads, base, freqs);
  const int64_t dh = dim / heads;
  const int64_t pairsPerHead = dh / 2;
  if (kind == FreqsKind::Seq) {
    for (int64_t j = 0; j < dim / 2; ++j) {
      const double i = static_cast<double>(j % pairsPerHead);
      freqs[j] = static_cast<T>(std::pow(base, -2.0 * i / static_cast<double>(dh)));
    }
    return;
  }
  const int64_t quarter = dh / 4;
  for (int64_t j = 0; j < dim / 2; ++j) {
    const int64_t i = j % pairsPerHead;
    const int64_t axis = i < quarter ? 0 : 1;
    const double k = static_cast<double>(i < quarter ? i : i - quarter);
    const double f = std::pow(base, -4.0 * k / static_cast<double>(dh));
    freqs[2 * j + axis] = static_cast<T>(f);
    freqs[2 * j + (1 - axis)] = T(0);
  }
}

template void ropeFreqs<float>(FreqsKind, int64_t, int64_t, double, TensorRef<float>);
template void ropeFreqs<double>(FreqsKind, int64_t, int64_t, double, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runRopeFreqs(const OpContext &c) {
  const std::string &kind = c.op().getString("kind");
  FreqsKind k = FreqsKind::Seq;
  if (kind == "axial")
    k = FreqsKind::Axial;
  else if (kind != "seq")
    c.fail("unknown kind '" + kind + "' (seq or axial)");
  ref::ropeFreqs<float>(k, c.op().getInt("dim"), c.op().getInt("heads"),
                        c.op().getFloat("base"), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::RopeFreqs>(OpRegistry &registry) {
  registry.add(OpCode::RopeFreqs, {runRopeFreqs});
}

} // namespace stringrt::ops
