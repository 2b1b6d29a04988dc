// pe.add (PELayerElementwiseOps.td, a PE_BinaryOp: y = lhs + rhs with trailing-suffix
// broadcast; no gradient op of its own: dy goes to both operands, through
// pe.sum_to to a broadcast one): the reference and fast kernels on
// BinaryOp.h's contract and loops, and the registration (ops/OpLibrary.h).
// The kernels' declarations are in stringrt/ops/LayerOps.h; stringc's
// generated kernels of add are CpuGen/ElementwiseGen.cpp's, checked here
// before they run.
#include "../OpLibrary.h"

#include "BinaryOp.h"

#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Reference kernel
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y = lhs + rhs
template <typename T> void add(TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y) {
  ops::binary::reference("add", lhs, rhs, y, [](layer::Acc a, layer::Acc b) { return a + b; });
}

template void add<float>(TensorRef<const float>, TensorRef<const float>, TensorRef<float>);
template void add<double>(TensorRef<const double>, TensorRef<const double>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

void add(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y) {
  ops::binary::fast("add", lhs, rhs, y, [](float a, float b) { return a + b; });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runAdd(const OpContext &c) { ref::add<float>(c.in(0), c.in(1), c.out(0)); }
void checkAdd(const OpContext &c) { binary::contract<float>("add", c.in(0), c.in(1), c.out(0)); }
void runFastAdd(const OpContext &c) { cpu::add(c.in(0), c.in(1), c.out(0)); }

} // namespace

template <> void registerOps<OpCode::Add>(OpRegistry &registry) {
  registry.add(OpCode::Add, {runAdd, checkAdd, runFastAdd});
}

} // namespace stringrt::ops
