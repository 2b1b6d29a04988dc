//===- RotationKernels.cpp - the SPD gate ---------------------------------===//
//
// Kernels and op lowerings of the per-token transforms (the CPU's
// ops/position/SpdGate.cpp, ApplyRotation.cpp): spd_gate and its gradient
// (the input gradient is the forward kernel on dy; the gate's gradient a
// column sum, no atomics).
// apply_rotation has no CUDA kernel (no example uses it): its package runs
// on the CPU, and `--device cuda` refuses it naming the op
// (DeviceModel::checkPackage).
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace param_kinds;
using A = LaunchArg;

void appendSpdGateKernels(std::vector<KernelDef> &defs) {
  // y = x exp(gamma[i % n_gamma]) (also dx = dy exp(gamma))
  defs.push_back({makeSpec("pe_spd_gate", pe::SpdGateOp::getOperationName(),
                           {{"y", P}, {"x", P}, {"gamma", P}, {"n", I}, {"n_gamma", I}}),
                  [](KernelBuilder &k) {
                    k.forGridStride(k.arg(3), [&](Value i) {
                      Value g = k.load(k.arg(2), remU(k, i, k.arg(4)));
                      Value e = k.builder().create<math::ExpOp>(k.location(), g);
                      k.store(k.mul(k.load(k.arg(1), i), e), k.arg(0), i);
                    });
                  }});
  // dgamma partials: dy x exp(gamma[c]) at r * cols + c
  defs.push_back(columnPartialsKernel(
      "pe_spd_gate_grad_partials", pe::SpdGateGradOp::getOperationName(), {"x", "gamma", "dy"}, {},
      [](KernelBuilder &k, Value r, Value c) {
        Value at = k.add(k.mul(r, k.arg(5)), c);
        Value e = k.builder().create<math::ExpOp>(k.location(), k.load(k.arg(2), c));
        return k.mul(k.mul(k.load(k.arg(3), at), k.load(k.arg(1), at)), e);
      }));
}

std::optional<OpSteps> lowerSpdGate(Operation &op) {
  return singleLaunch("pe_spd_gate",
                      {A::result(0), A::operand(0), A::operand(1), A::i64(numel(op.getResult(0))),
                       A::i64(numel(op.getOperand(1)))});
}

std::optional<OpSteps> lowerSpdGateGrad(Operation &op) {
  BatchAffine gamma = numel(op.getOperand(1));
  if (gamma.perBatch != 0)
    return std::nullopt;
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(
      "pe_spd_gate", {A::result(0), A::operand(2), A::operand(1), A::i64(numel(op.getOperand(0))),
                      A::i64(gamma)}));
  appendColumnSum(steps, "pe_spd_gate_grad_partials",
                  {A::operand(0), A::operand(1), A::operand(2)},
                  rowsOf(numel(op.getOperand(0)), gamma.constant), gamma.constant, {},
                  A::result(1));
  return steps;
}

} // namespace

void appendRotationKernels(std::vector<KernelDef> &defs) { appendSpdGateKernels(defs); }

void appendRotationLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SpdGateOp>(lowerSpdGate));
  lowerings.push_back(loweringOf<pe::SpdGateGradOp>(lowerSpdGateGrad));
}

} // namespace stringc::cudagen
