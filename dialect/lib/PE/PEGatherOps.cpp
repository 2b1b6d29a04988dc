//===- PEGatherOps.cpp - the gather ops -----------------------------------===//
//
// What the ops of PEGatherOps.td (pe.skip_gather, pe.offset_table,
// pe.pair_gather and their backward ops) need beyond their ODS: the shape
// rules, the vector-Jacobian products and the costs.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PECostModel.h"
#include "PEVerify.h"

using namespace mlir;
using namespace mlir::pe;
using namespace mlir::pe::cost;
using namespace mlir::pe::verify;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

/// pe.skip_gather / pe.skip_gather_grad: `operand` (`name`) `[B, T, D]`,
/// `heads` dividing D, `skip_base >= 0`, and a result of the operand's shape.
static LogicalResult checkSkipGather(Operation *op, Value operand,
                                     StringRef name, int64_t heads,
                                     int64_t skipBase) {
  if (failed(checkActivation(op, operand, name, 3)) ||
      failed(checkHeads(op, heads, shapeOf(operand)[2])))
    return failure();
  if (skipBase < 0)
    return op->emitOpError() << "skip_base must be non-negative, got "
                             << skipBase;
  return checkResultShape(op, shapeOf(operand));
}

LogicalResult SkipGatherOp::verify() {
  return checkSkipGather(*this, getV(), "v", getHeadsAttr().getInt(),
                         getSkipBaseAttr().getInt());
}

LogicalResult SkipGatherGradOp::verify() {
  return checkSkipGather(*this, getDy(), "dy", getHeadsAttr().getInt(),
                         getSkipBaseAttr().getInt());
}

LogicalResult OffsetTableOp::verify() {
  auto type = cast<RankedTensorType>(getResult().getType());
  if (type.getRank() != 2 || !type.hasStaticShape())
    return emitOpError() << "result must be a static [U, A] table, got "
                         << type;
  int64_t rows = type.getDimSize(0), axes = type.getDimSize(1);
  ArrayRef<int64_t> offsets = getOffsets();
  if (rows <= 0 || axes <= 0 ||
      static_cast<int64_t>(offsets.size()) != rows * axes)
    return emitOpError() << "offsets must hold U*A = " << rows * axes
                         << " entries (U, A > 0) for the result " << type
                         << ", got " << offsets.size();
  // Integers up to 2^24 are exact in f32.
  constexpr int64_t kExact = int64_t(1) << 24;
  for (int64_t value : offsets)
    if (value < -kExact || value > kExact)
      return emitOpError() << "offset " << value
                           << " is not exactly representable in f32";
  return success();
}

/// pe.pair_gather / pe.pair_gather_grad: `table` `[U, S...]` and `pairs`
/// `[T, T, S...]` (both static; `pairsName` is the operand or result that
/// holds the pairs), and `index` of T*T entries in [0, U).
static LogicalResult checkPairGather(Operation *op, RankedTensorType table,
                                     StringRef tableName,
                                     RankedTensorType pairs,
                                     StringRef pairsName,
                                     ArrayRef<int64_t> index) {
  if (table.getRank() < 1 || !table.hasStaticShape())
    return op->emitOpError() << "'" << tableName
                             << "' must be a static [U, ...] table, got "
                             << table;
  ArrayRef<int64_t> t = table.getShape(), p = pairs.getShape();
  SmallVector<int64_t> expected = {-1, -1};
  expected.append(t.begin() + 1, t.end());
  bool ok = pairs.hasStaticShape() && p.size() == expected.size() &&
            p[0] == p[1] && p.drop_front(2) == t.drop_front(1);
  if (!ok)
    return op->emitOpError() << "'" << pairsName << "' must have shape [T, T"
                             << (t.size() > 1 ? ", " : "")
                             << shapeStr(t.drop_front(1)).substr(1)
                             << " (the table's trailing dimensions), got "
                             << pairs;
  int64_t tokens = p[0];
  if (static_cast<int64_t>(index.size()) != tokens * tokens)
    return op->emitOpError() << "index must have T*T = " << tokens * tokens
                             << " entries, got " << index.size();
  for (int64_t i : index)
    if (i < 0 || i >= t[0])
      return op->emitOpError() << "index entry " << i
                               << " is out of range for a table of " << t[0]
                               << " rows";
  return success();
}

LogicalResult PairGatherOp::verify() {
  return checkPairGather(*this, getTable().getType(), "table",
                         cast<RankedTensorType>(getResult().getType()),
                         "result", getIndex());
}

LogicalResult PairGatherGradOp::verify() {
  return checkPairGather(*this, cast<RankedTensorType>(getDtable().getType()),
                         "dtable", getDy().getType(), "dy", getIndex());
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products (DifferentiableOpInterface)
//
// docs/autodiff.md. pe.offset_table is a constant.
//===----------------------------------------------------------------------===//

/// The transpose of a shift is the reverse shift.
LogicalResult SkipGatherOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SkipGatherGradOp>(
      getLoc(), getV().getType(), resultGrads[0], getHeadsAttr(),
      getSkipBaseAttr()));
  return success();
}

/// The transpose of a gather is a scatter-add.
LogicalResult PairGatherOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<PairGatherGradOp>(
      getLoc(), getTable().getType(), resultGrads[0], getIndexAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// FLOPs (CostOpInterface, docs/dialect.md)
//===----------------------------------------------------------------------===//

double SkipGatherOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double SkipGatherGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double OffsetTableOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double PairGatherOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
double PairGatherGradOp::estimateFlops(int64_t batch) { return perElement(*this, batch, 1); }
