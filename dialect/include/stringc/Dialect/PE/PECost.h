//===- PECost.h - element counts of the cost model --------------*- C++ -*-===//
//
// What the cost model (CostOpInterface, PECostModel.h) counts, shared with the
// GPU launch report so that both read a tensor's size alike.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_DIALECT_PE_PECOST_H
#define STRINGC_DIALECT_PE_PECOST_H

#include "mlir/IR/Types.h"

#include <cstdint>

namespace mlir::pe {

/// The elements of a ranked tensor type with its dynamic (batch) dimension
/// set to `batch`; 0 for any other type.
double elementsAtBatch(Type type, int64_t batch);

} // namespace mlir::pe

#endif // STRINGC_DIALECT_PE_PECOST_H
