//===- Cost.cpp - FLOPs and bytes of pe ops, for --explain ----------------===//
//
// A first-order model: the arithmetic of each op's math (the dialect's
// CostOpInterface, in each op family's PE<Family>Ops.cpp) and the bytes of
// its operands and results, f32. Good enough to rank rewrites, not a roofline.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Explain.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

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

/// FLOPs of `op`'s math (CostOpInterface); other dialects' ops
/// count one per result element. The bytes are counted by the caller.
double flopsOf(Operation *op, int64_t batch) {
  if (auto costed = dyn_cast<pe::CostOpInterface>(op))
    return costed.estimateFlops(batch);
  return op->getNumResults() ? elements(op->getResult(0).getType(), batch) : 0;
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
  if (isa<pe::GetParamOp, arith::ConstantOp>(op))
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
