//===- PEVJPLayer.cpp - vector-Jacobian products of the layer ops ---------===//
//
// DifferentiableOpInterface::buildVJP of the ops in PELayerOps.td, in the
// forms of docs/autodiff.md: forward ops where they suffice (scale, mul,
// sum_to), the backward ops of PEGradOps.td otherwise. Each pushes one
// gradient per operand, null for integer ids and labels and for the image.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;
using namespace mlir::pe;

/// The gradient of an operand of type `target` that was broadcast to the
/// shape of `grad`: `grad` itself, or its sum over the leading dimensions.
static Value sumTo(OpBuilder &builder, Location loc, Value grad, Type target) {
  if (grad.getType() == target)
    return grad;
  return builder.create<SumToOp>(loc, target, grad);
}

static Value negate(OpBuilder &builder, Location loc, Value x) {
  return builder.create<ScaleOp>(loc, x.getType(), x, APFloat(-1.0),
                                 APFloat(0.0));
}

LogicalResult LinearOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(
      builder.create<LinearGradInputOp>(loc, getX().getType(), dy, getW()));
  operandGrads.push_back(
      builder.create<LinearGradWeightOp>(loc, getW().getType(), getX(), dy));
  if (getB())
    operandGrads.push_back(sumTo(builder, loc, dy, getB().getType()));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<LayerNormGradOp>(
      getLoc(), getX().getType(), getGamma().getType(), getBeta().getType(),
      getX(), getGamma(), resultGrads[0], getEpsilonAttr());
  operandGrads.append({grad.getDx(), grad.getDgamma(), grad.getDbeta()});
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<GeluGradOp>(getLoc(), getX().getType(),
                                                    getX(), resultGrads[0],
                                                    getApproximateAttr()));
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<ReluGradOp>(getLoc(), getX().getType(),
                                                    getX(), resultGrads[0]));
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads.push_back(sumTo(builder, getLoc(), dy, getLhs().getType()));
  operandGrads.push_back(sumTo(builder, getLoc(), dy, getRhs().getType()));
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(sumTo(builder, loc, dy, getLhs().getType()));
  // Negate after reducing: the smaller tensor.
  operandGrads.push_back(
      negate(builder, loc, sumTo(builder, loc, dy, getRhs().getType())));
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  // Each operand's shape is a suffix of dy's, so the products have dy's type.
  Value dyRhs = builder.create<MulOp>(loc, dy.getType(), dy, getRhs());
  Value dyLhs = builder.create<MulOp>(loc, dy.getType(), dy, getLhs());
  operandGrads.push_back(sumTo(builder, loc, dyRhs, getLhs().getType()));
  operandGrads.push_back(sumTo(builder, loc, dyLhs, getRhs().getType()));
  return success();
}

LogicalResult ScaleOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<ScaleOp>(
      getLoc(), getX().getType(), resultGrads[0], getFactor(), APFloat(0.0)));
  return success();
}

/// dx = dy repeated over the averaged elements, divided by their count.
/// pe.mean_grad reads the count from the shape of x at run time, so one form
/// serves every mean, the dynamic batch dimension included.
LogicalResult MeanOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<MeanGradOp>(
      getLoc(), getX().getType(), getX(), resultGrads[0], getAxisAttr()));
  return success();
}

LogicalResult PatchEmbedOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<PatchEmbedGradOp>(getLoc(), getW().getType(),
                                               getB().getType(), getImage(),
                                               resultGrads[0], getPatchAttr());
  operandGrads.append({Value(), grad.getDw(), grad.getDb()});
  return success();
}

LogicalResult TokenEmbedOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value());
  operandGrads.push_back(builder.create<TokenEmbedGradOp>(
      getLoc(), getTable().getType(), getIds(), resultGrads[0]));
  return success();
}

LogicalResult ClassTokenOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  auto grad = builder.create<ClassTokenGradOp>(
      getLoc(), getX().getType(), getCls().getType(), resultGrads[0]);
  operandGrads.append({grad.getDx(), grad.getDcls()});
  return success();
}

LogicalResult SelectTokenOp::buildVJP(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<SelectTokenGradOp>(
      getLoc(), getX().getType(), resultGrads[0], getIndexAttr()));
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Type type = getQ().getType();
  Type relType = getRel() ? getRel().getType() : Type();
  auto grad = builder.create<AttentionGradOp>(
      getLoc(), type, type, type, relType, getQ(), getK(), getV(),
      resultGrads[0], getRel(), getHeadsAttr(), getScaleAttr(), getMaskAttr(),
      getSkipBaseAttr());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv()});
  if (getRel())
    operandGrads.push_back(grad.getDrel());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<CrossEntropyGradOp>(
      getLoc(), getLogits().getType(), getLogits(), getLabels(),
      resultGrads[0], getSmoothingAttr()));
  operandGrads.push_back(Value());
  return success();
}
