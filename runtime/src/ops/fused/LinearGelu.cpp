// pe.linear_gelu (PEFusedOps.td: gelu(linear(x, w, b)) with the
// pre-activation kept as a second result for the backward, as
// pe-fuse-epilogue writes pe.linear then pe.gelu; no gradient op of its
// own): the shape contract, the fast kernel and the registration
// (ops/OpLibrary.h). Its reference kernel is its composition
// (ops/Compositions.cpp: pe.linear's then pe.gelu's reference kernels); the
// fast kernel is cpu::linear's then cpu::gelu's (ops/layer/Linear.cpp,
// Gelu.cpp), so the fused op has their bits in both sets. The fast kernel's
// declaration is in stringrt/ops/FusedOps.h. stringc generates no CPU
// kernel for it.
#include "../OpLibrary.h"

#include "../../reference/LayerKernelUtil.h"

#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::OptionalInput;
using ref::TensorRef;
using ref::layer::withLast;

// x [..., I], w [I, O], b? [O]; pre and the result [..., O].
template <typename T>
void linearGeluContract(const TensorRef<const T> &x, const TensorRef<const T> &w,
                        const OptionalInput<T> &b, const TensorRef<T> &y,
                        const TensorRef<T> &pre) {
  const int64_t O = ref::layer::checkLinearOperands("linear_gelu", x, w, b);
  checkShape("linear_gelu: pre", pre, withLast(x.shape, O));
  checkShape("linear_gelu: result", y, pre.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Fast kernel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

void linearGelu(TensorRef<const float> x, TensorRef<const float> w, OptionalInput<float> b,
                bool approximate, TensorRef<float> y, TensorRef<float> pre) {
  ops::linearGeluContract(x, w, b, y, pre);
  linear(x, w, b, pre);
  // cpu::gelu (std::erf): on the small pre-activations of these models
  // (|x| < 0.84 takes erff's short polynomial) it beat a branch-free
  // polynomial erf by ~25% on vit_rope's [6400, 128] activation.
  gelu(pre, approximate, y);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// The contract alone, run before the composition (runComposition).
void checkLinearGelu(const OpContext &c) {
  linearGeluContract<float>(c.in(0), c.in(1), c.optIn(2), c.out(0), c.out(1));
}
void runFastLinearGelu(const OpContext &c) {
  cpu::linearGelu(c.in(0), c.in(1), c.optIn(2), attrs::LinearGelu{c.op()}.approximate(), c.out(0),
                  c.out(1));
}

} // namespace

template <> void registerOps<OpCode::LinearGelu>(OpRegistry &registry) {
  registry.add(OpCode::LinearGelu, {nullptr, checkLinearGelu, runFastLinearGelu});
}

} // namespace stringrt::ops
