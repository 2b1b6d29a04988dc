//===- PEVJPFused.cpp - vector-Jacobian products of the fused ops ---------===//
//
// DifferentiableOpInterface::buildVJP of the ops in PEFusedOps.td
// (docs/autodiff.md). Where a fused op is a composition of ordinary ops, its
// VJP is the composition of theirs, reusing their backward ops.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;
using namespace mlir::pe;

/// `pos` is a position table: no gradient.
LogicalResult RopeTableOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dfreqs = builder.create<RopeTableGradOp>(
      getLoc(), getFreqs().getType(), getPos(), getFreqs(), resultGrads[0]);
  operandGrads.append({Value(), dfreqs});
  return success();
}

/// The transpose of the rotation: the same table, `inverse` flipped.
LogicalResult RopeApplyOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value dx = builder.create<RopeApplyOp>(loc, getX().getType(), dy, getTable(),
                                         builder.getBoolAttr(!getInverse()));
  Value dtable = builder.create<RopeApplyGradTableOp>(
      loc, getTable().getType(), getX(), dy, getInverseAttr());
  operandGrads.append({dx, dtable});
  return success();
}

LogicalResult CayleyWeightOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<CayleyWeightGradOp>(
      getLoc(), getS().getType(), getS(), resultGrads[0]));
  return success();
}

/// The table gets no gradient: pe-fuse-attention only fuses constant tables
/// (docs/passes.md); autodiff reports a trainable one.
LogicalResult RopeAttentionOp::buildVJP(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  Type type = getQ().getType();
  auto grad = builder.create<RopeAttentionGradOp>(
      getLoc(), type, type, type, getQ(), getK(), getV(), getTable(),
      resultGrads[0], getHeadsAttr(), getScaleAttr(), getMaskAttr());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv(), Value()});
  return success();
}

/// The gradient of `linear` then `gelu`, from the kept pre-activation:
/// dpre = gelu_grad(pre, dy) (+ the gradient of `pre` itself when something
/// else reads it), then the gradients of pe.linear.
LogicalResult LinearGeluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dpre;
  if (Value dy = resultGrads[0])
    dpre = builder.create<GeluGradOp>(loc, getPre().getType(), getPre(), dy,
                                      getApproximateAttr());
  if (Value dPreDirect = resultGrads[1])
    dpre = dpre ? builder.create<AddOp>(loc, dpre.getType(), dpre, dPreDirect)
                      .getResult()
                : dPreDirect;
  if (!dpre)
    return emitOpError() << "VJP without a gradient for either result";
  operandGrads.push_back(
      builder.create<LinearGradInputOp>(loc, getX().getType(), dpre, getW()));
  operandGrads.push_back(
      builder.create<LinearGradWeightOp>(loc, getW().getType(), getX(), dpre));
  if (getB())
    operandGrads.push_back(
        builder.create<SumToOp>(loc, getB().getType(), dpre));
  return success();
}

LogicalResult LinearResidualOp::buildVJP(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(dy);
  operandGrads.push_back(
      builder.create<LinearGradInputOp>(loc, getX().getType(), dy, getW()));
  operandGrads.push_back(
      builder.create<LinearGradWeightOp>(loc, getW().getType(), getX(), dy));
  if (getB())
    operandGrads.push_back(builder.create<SumToOp>(loc, getB().getType(), dy));
  return success();
}
