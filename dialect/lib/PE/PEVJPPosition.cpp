//===- PEVJPPosition.cpp - vector-Jacobian products of the PE ops ---------===//
//
// DifferentiableOpInterface::buildVJP of the positional-encoding ops in
// PEPositionOps.td (docs/autodiff.md). Positions and relative positions are
// constants: their operands get a null gradient. The operand-less ops
// (seq_positions, grid_positions, rope_freqs, sinusoidal) and
// relative_positions do not implement the interface.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;
using namespace mlir::pe;

/// The rotation by -theta is the transpose of the rotation by theta, so
/// dx = rope(dy, pos, -freqs).
LogicalResult RopeOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value negFreqs = builder.create<ScaleOp>(
      loc, getFreqs().getType(), getFreqs(), APFloat(-1.0), APFloat(0.0));
  Value dx = builder.create<RopeOp>(loc, getX().getType(), dy, getPos(),
                                    negFreqs, getModeAttr());
  Value dfreqs = builder.create<RopeGradFreqsOp>(
      loc, getFreqs().getType(), getX(), getPos(), getFreqs(), dy);
  operandGrads.append({dx, Value(), dfreqs});
  return success();
}

/// Reflections are symmetric, so the transpose of H(a2) H(a1) is
/// H(a1) H(a2): dx = householder(dy, pos, f2, f1), the swapped angles.
LogicalResult HouseholderOp::buildVJP(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value dx = builder.create<HouseholderOp>(loc, getX().getType(), dy, getPos(),
                                           getF2(), getF1());
  auto dfreqs = builder.create<HouseholderGradFreqsOp>(
      loc, getF1().getType(), getF2().getType(), getX(), getPos(), getF1(),
      getF2(), dy);
  operandGrads.append({dx, Value(), dfreqs.getDf1(), dfreqs.getDf2()});
  return success();
}

LogicalResult SkewOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SkewGradOp>(
      getLoc(), getParams().getType(), resultGrads[0], getDimAttr()));
  return success();
}

LogicalResult SparseSkewOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SparseSkewGradOp>(
      getLoc(), getParams().getType(), resultGrads[0], getDimAttr(),
      getSupportAttr()));
  return success();
}

LogicalResult CayleyOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  auto grad =
      builder.create<CayleyGradOp>(getLoc(), getX().getType(), getS().getType(),
                                   getX(), getS(), resultGrads[0]);
  operandGrads.append({grad.getDx(), grad.getDs()});
  return success();
}

/// Only the generators get a gradient: `r` holds relative positions.
LogicalResult GeneratorExpOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value());
  operandGrads.push_back(builder.create<GeneratorExpGradOp>(
      getLoc(), getGenerators().getType(), getR(), getGenerators(),
      resultGrads[0]));
  return success();
}

LogicalResult ApplyRotationOp::buildVJP(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<ApplyRotationGradOp>(
      getLoc(), getX().getType(), getRotations().getType(), getX(),
      getRotations(), resultGrads[0], getHeadsAttr());
  operandGrads.append({grad.getDx(), grad.getDrotations()});
  return success();
}

LogicalResult CommutatorNormOp::buildVJP(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<CommutatorNormGradOp>(
      getLoc(), getGenerators().getType(), getGenerators(), resultGrads[0]));
  return success();
}

LogicalResult SpdGateOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<SpdGateGradOp>(getLoc(), getX().getType(),
                                            getGamma().getType(), getX(),
                                            getGamma(), resultGrads[0]);
  operandGrads.append({grad.getDx(), grad.getDgamma()});
  return success();
}
