//===- PEVJPGather.cpp - vector-Jacobian products of the gather ops -------===//
//
// DifferentiableOpInterface::buildVJP of pe.skip_gather and pe.pair_gather
// (PEGatherOps.td, docs/autodiff.md). pe.offset_table is a constant.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;
using namespace mlir::pe;

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
