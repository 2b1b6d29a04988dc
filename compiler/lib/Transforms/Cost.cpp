//===- Cost.cpp - FLOPs and bytes of pe ops, for --explain ----------------===//
//
// A first-order model: the arithmetic of each op's math (docs/dialect.md)
// and the bytes of its operands and results, f32. Ops it does not know cost
// one FLOP per result element. Good enough to rank rewrites, not a roofline.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Explain.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringSwitch.h"

#include <cstdio>

using namespace mlir;

namespace stringc {
namespace {

/// The shape of `type` with the symbolic batch dimension set to `batch`.
SmallVector<int64_t> concreteShape(Type type, int64_t batch) {
  SmallVector<int64_t> shape;
  if (auto ranked = dyn_cast<RankedTensorType>(type))
    for (int64_t dim : ranked.getShape())
      shape.push_back(ShapedType::isDynamic(dim) ? batch : dim);
  return shape;
}

double elements(Type type, int64_t batch) {
  if (!isa<RankedTensorType>(type))
    return 0;
  double count = 1;
  for (int64_t dim : concreteShape(type, batch))
    count *= double(dim);
  return count;
}

double dimFromEnd(Value value, int fromEnd, int64_t batch) {
  SmallVector<int64_t> shape = concreteShape(value.getType(), batch);
  if (fromEnd >= int(shape.size()))
    return 1;
  return double(shape[shape.size() - 1 - fromEnd]);
}

int64_t intAttr(Operation *op, StringRef name, int64_t fallback) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(name))
    return attr.getInt();
  return fallback;
}

/// FLOPs of `op`'s math; the bytes are counted by the caller.
double flopsOf(Operation *op, int64_t batch) {
  StringRef name = op->getName().getStringRef();
  double out = op->getNumResults() ? elements(op->getResult(0).getType(), batch) : 0;
  auto operandElements = [&](unsigned i) {
    return i < op->getNumOperands() ? elements(op->getOperand(i).getType(), batch) : 0;
  };

  // x W: rows(x) * I * O multiply-adds.
  if (name == "pe.linear" || name == "pe.patch_embed") {
    double inner = dimFromEnd(op->getOperand(1), 1, batch);
    return 2 * out * inner + (op->getNumOperands() > 2 ? out : 0);
  }
  if (name == "pe.linear_grad_input")  // dy W^T: out [.., I], inner O
    return 2 * out * dimFromEnd(op->getOperand(1), 0, batch);
  if (name == "pe.linear_grad_weight") // x^T dy: out [I, O], inner rows
    return 2 * operandElements(0) * dimFromEnd(op->getOperand(1), 0, batch);

  if (name == "pe.attention" || name == "pe.attention_grad") {
    Value q = op->getOperand(0);
    double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
    double heads = double(intAttr(op, "heads", 1));
    double headDim = d / heads;
    double pairs = b * heads * t * t;
    double forward = 2 * pairs * headDim * 2 + 5 * pairs; // QK^T, softmax, PV
    bool relative = op->getNumOperands() > (name == "pe.attention" ? 3u : 4u);
    if (relative)
      forward += 2 * pairs * headDim * headDim; // q_i^T R_ij per pair
    return name == "pe.attention" ? forward : 2.5 * forward;
  }

  if (name == "pe.cayley" || name == "pe.cayley_grad") {
    double d = dimFromEnd(op->getOperand(0), 0, batch);
    double rows = operandElements(0) / d;
    double perCall = 2.0 / 3.0 * d * d * d + 4 * rows * d * d; // LU + per-row solve, (I - S)
    return name == "pe.cayley" ? perCall : 2 * perCall + 2 * d * d * d;
  }
  if (name == "pe.generator_exp" || name == "pe.generator_exp_grad") {
    double d = dimFromEnd(op->getOperand(1), 0, batch);
    double k = dimFromEnd(op->getOperand(1), 2, batch);
    double matrices = operandElements(0) / k;
    // Scaling and squaring: about ten d x d products per exponential; the
    // Frechet derivative works on the 2d x 2d block matrix.
    double perMatrix = 20 * d * d * d + 2 * k * d * d;
    return name == "pe.generator_exp" ? matrices * perMatrix : matrices * 8 * perMatrix;
  }
  if (name == "pe.apply_rotation" || name == "pe.apply_rotation_grad") {
    double headDim = dimFromEnd(op->getOperand(1), 0, batch);
    double forward = 2 * operandElements(0) * headDim;
    return name == "pe.apply_rotation" ? forward : 2 * forward;
  }
  if (name == "pe.commutator_norm" || name == "pe.commutator_norm_grad") {
    double d = dimFromEnd(op->getOperand(0), 0, batch);
    double k = dimFromEnd(op->getOperand(0), 2, batch);
    return k * (k - 1) / 2 * 4 * d * d * d;
  }

  // The fused ops of pe-hoist / pe-fuse-* (PEFusedOps.td): the ops they replace.
  if (name == "pe.linear_gelu") // x W + b, then gelu
    return 2 * out * dimFromEnd(op->getOperand(1), 1, batch) + 21 * out;
  if (name == "pe.linear_residual") // r + x W + b
    return 2 * out * dimFromEnd(op->getOperand(2), 1, batch) + 2 * out;
  if (name == "pe.rope_attention" || name == "pe.rope_attention_grad") {
    Value q = op->getOperand(0);
    double b = dimFromEnd(q, 2, batch), t = dimFromEnd(q, 1, batch), d = dimFromEnd(q, 0, batch);
    double heads = double(intAttr(op, "heads", 1));
    double pairs = b * heads * t * t;
    double forward = 2 * pairs * (d / heads) * 2 + 5 * pairs + 2 * 6 * b * t * d;
    return name == "pe.rope_attention" ? forward : 2.5 * forward + 2 * 6 * b * t * d;
  }
  if (name == "pe.cayley_weight" || name == "pe.cayley_weight_grad") {
    double d = dimFromEnd(op->getOperand(0), 0, batch);
    double inverse = 2.0 / 3.0 * d * d * d + 2 * d * d * d; // LU, then d solves
    return name == "pe.cayley_weight" ? inverse + 2 * d * d * d : inverse + 6 * d * d * d;
  }
  if (name == "pe.rope_apply")
    return 6 * out;
  if (name == "pe.rope_table")
    return 20 * out; // angle, cos, sin
  if (name == "pe.rope_apply_grad_table")
    return 6 * operandElements(0);
  if (name == "pe.rope_table_grad")
    return 24 * operandElements(2);

  // Elementwise families: FLOPs per result element.
  double perElement = llvm::StringSwitch<double>(name)
                          .Cases("pe.rope", "pe.householder", 8)   // table + 2x2 product
                          .Cases("pe.rope_grad_freqs", "pe.householder_grad_freqs", 12)
                          .Cases("pe.layer_norm", "pe.layer_norm_grad", 10)
                          .Cases("pe.gelu", "pe.gelu_grad", 20)
                          .Cases("pe.spd_gate", "pe.spd_gate_grad", 3)
                          .Case("pe.cross_entropy", 0)
                          .Default(1);
  if (name == "pe.cross_entropy" || name == "pe.cross_entropy_grad")
    return 5 * operandElements(0);
  return perElement * out;
}

} // namespace

OpCost estimateCost(Operation *op, int64_t batch) {
  OpCost cost;
  if (op->getNumRegions() != 0)
    return cost;
  for (Value operand : op->getOperands())
    cost.bytes += 4 * elements(operand.getType(), batch);
  for (Value result : op->getResults())
    cost.bytes += 4 * elements(result.getType(), batch);
  // Reading a parameter or a constant moves no data of its own.
  StringRef name = op->getName().getStringRef();
  if (name == "pe.get_param" || name == "arith.constant")
    return OpCost{};
  cost.flops = flopsOf(op, batch);
  return cost;
}

OpCost estimateCost(ArrayRef<Operation *> ops, int64_t batch) {
  OpCost total;
  for (Operation *op : ops)
    total += estimateCost(op, batch);
  return total;
}

OpCost estimateFunctionCost(Operation *func, int64_t batch) {
  OpCost total;
  func->walk([&](Operation *op) {
    if (op != func)
      total += estimateCost(op, batch);
  });
  return total;
}

std::string formatCost(const OpCost &cost) {
  auto scaled = [](double value, const char *unit) {
    const char *prefixes[] = {"", "K", "M", "G", "T"};
    int index = 0;
    while (value >= 1000 && index < 4) {
      value /= 1000;
      ++index;
    }
    char text[48];
    std::snprintf(text, sizeof text, index ? "%.2f %s%s" : "%.0f %s%s", value, prefixes[index], unit);
    return std::string(text);
  };
  return scaled(cost.flops, "FLOP") + ", " + scaled(cost.bytes, "B");
}

void reportRewrite(Operation *anchor, StringRef pass, StringRef what, const OpCost &before,
                   const OpCost &after) {
  anchor->emitRemark() << "[" << pass << "] " << what << " (forward per example: "
                       << formatCost(before) << " -> " << formatCost(after) << ")";
}

} // namespace stringc
