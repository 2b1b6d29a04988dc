// pe.sub (PELayerElementwiseOps.td, a PE_BinaryOp: y = lhs - rhs with trailing-suffix
// broadcast; no gradient op of its own: its VJP is dy and -dy (pe.scale),
// through pe.sum_to to a broadcast operand): the reference and fast kernels
// on BinaryOp.h's contract and loops, and the registration (ops/OpLibrary.h).
// The kernels' declarations are in stringrt/ops/LayerOps.h; stringc's
// generated kernels of sub are CpuGen/ElementwiseGen.cpp's, checked here
// before they run.
#include "../OpLibrary.h"

#include "BinaryOp.h"

#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Reference kernel
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y = lhs - rhs
template <typename T> void sub(TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y) {
  ops::binary::reference("sub", lhs, rhs, y, [](layer::Acc a, layer::Acc b) { return a - b; });
}

template void sub<float>(TensorRef<const float>, TensorRef<const float>, TensorRef<float>);
template void sub<double>(TensorRef<const double>, TensorRef<const double>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

void sub(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y) {
  ops::binary::fast("sub", lhs, rhs, y, [](float a, float b) { return a - b; });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSub(const OpContext &c) { ref::sub<float>(c.in(0), c.in(1), c.out(0)); }
void checkSub(const OpContext &c) { binary::contract<float>("sub", c.in(0), c.in(1), c.out(0)); }
void runFastSub(const OpContext &c) { cpu::sub(c.in(0), c.in(1), c.out(0)); }

} // namespace

template <> void registerOps<OpCode::Sub>(OpRegistry &registry) {
  registry.add(OpCode::Sub, {runSub, checkSub, runFastSub});
}

} // namespace stringrt::ops
