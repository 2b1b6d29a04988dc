//===- PECost.cpp - tensor sizes for the cost model -----------------------===//
//
// The counting rules of PECostModel.h and elementsAtBatch (PECost.h, shared
// with the GPU launch report so that both read a tensor's size alike). The
// ops' costs themselves are beside their verifiers, in PE<Family>Ops.cpp.
//
//===----------------------------------------------------------------------===//
#include "stringc/Dialect/PE/PECost.h"

#include "PECostModel.h"

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::pe {

double elementsAtBatch(Type type, int64_t batch) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return 0;
  double count = 1;
  for (int64_t dim : ranked.getShape())
    count *= double(ShapedType::isDynamic(dim) ? batch : dim);
  return count;
}

namespace cost {

double elements(Value value, int64_t batch) { return elementsAtBatch(value.getType(), batch); }

double dimFromEnd(Value value, int fromEnd, int64_t batch) {
  auto ranked = dyn_cast<RankedTensorType>(value.getType());
  if (!ranked || fromEnd >= int(ranked.getRank()))
    return 1;
  int64_t dim = ranked.getShape()[size_t(ranked.getRank() - 1 - fromEnd)];
  return double(ShapedType::isDynamic(dim) ? batch : dim);
}

double resultElements(Operation *op, int64_t batch) {
  return op->getNumResults() ? elements(op->getResult(0), batch) : 0;
}

double operandElements(Operation *op, unsigned i, int64_t batch) {
  return i < op->getNumOperands() ? elements(op->getOperand(i), batch) : 0;
}

double perElement(Operation *op, int64_t batch, double factor) {
  return factor * resultElements(op, batch);
}

} // namespace cost

} // namespace mlir::pe
