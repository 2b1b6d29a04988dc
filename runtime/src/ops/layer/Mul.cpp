// pe.mul (PELayerElementwiseOps.td, a PE_BinaryOp: y = lhs * rhs with trailing-suffix
// broadcast; no gradient op of its own: its VJP is pe.mul's dy rhs and
// dy lhs, through pe.sum_to to a broadcast operand): the reference and fast
// kernels on BinaryOp.h's contract and loops, and the registration
// (ops/OpLibrary.h).
// The kernels' declarations are in stringrt/ops/LayerOps.h; stringc's
// generated kernels of mul are CpuGen/ElementwiseGen.cpp's, checked here
// before they run.
#include "../OpLibrary.h"

#include "BinaryOp.h"

#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Reference kernel
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y = lhs * rhs
template <typename T> void mul(TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y) {
  ops::binary::reference("mul", lhs, rhs, y, [](layer::Acc a, layer::Acc b) { return a * b; });
}

template void mul<float>(TensorRef<const float>, TensorRef<const float>, TensorRef<float>);
template void mul<double>(TensorRef<const double>, TensorRef<const double>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

void mul(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y) {
  ops::binary::fast("mul", lhs, rhs, y, [](float a, float b) { return a * b; });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runMul(const OpContext &c) { ref::mul<float>(c.in(0), c.in(1), c.out(0)); }
void checkMul(const OpContext &c) { binary::contract<float>("mul", c.in(0), c.in(1), c.out(0)); }
void runFastMul(const OpContext &c) { cpu::mul(c.in(0), c.in(1), c.out(0)); }

} // namespace

template <> void registerOps<OpCode::Mul>(OpRegistry &registry) {
  registry.add(OpCode::Mul, {runMul, checkMul, runFastMul});
}

} // namespace stringrt::ops
