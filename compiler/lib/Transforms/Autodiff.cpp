//===- Autodiff.cpp - reverse-mode differentiation of @forward ------------===//
//
// Adds `func.func @gradients`: a copy of `@forward` followed by the backward
// graph, built op by op through DifferentiableOpInterface, returning the loss
// and the gradient of every trainable parameter (docs/autodiff.md).
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEInterfaces.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-autodiff"

namespace stringc {
#define GEN_PASS_DEF_AUTODIFF
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

constexpr StringLiteral kForward = "forward";
constexpr StringLiteral kGradients = "gradients";

/// The values of a straight-line function body that need a gradient: those
/// that depend on a trainable parameter (varied) and on which the loss
/// depends (useful).
class Activity {
public:
  Activity(Block &body, Value loss, const DenseSet<StringAttr> &trainable) {
    for (Operation &op : body) {
      auto read = dyn_cast<pe::GetParamOp>(op);
      bool fromParam =
          read && trainable.contains(read.getParamAttr().getAttr());
      bool fromVaried = llvm::any_of(
          op.getOperands(), [&](Value v) { return varied.contains(v); });
      if (fromParam || fromVaried)
        for (Value result : op.getResults())
          if (isa<FloatType>(getElementTypeOrSelf(result.getType())))
            varied.insert(result);
    }
    useful.insert(loss);
    for (Operation &op : llvm::reverse(body))
      if (llvm::any_of(op.getResults(),
                       [&](Value v) { return useful.contains(v); }))
        useful.insert(op.operand_begin(), op.operand_end());
  }

  bool isActive(Value v) const {
    return varied.contains(v) && useful.contains(v);
  }

private:
  DenseSet<Value> varied, useful;
};

/// Builds the backward graph of `body` (whose terminator is being replaced)
/// and records the gradient of every active value.
class BackwardBuilder {
public:
  BackwardBuilder(Block &body, const Activity &activity)
      : body(body), activity(activity), builder(body.getTerminator()) {}

  /// Seeds the loss with 1.0 and walks the forward ops in reverse.
  LogicalResult run(Value loss) {
    if (!activity.isActive(loss))
      return success();
    auto lossType = cast<RankedTensorType>(loss.getType());
    grads[loss] = builder.create<arith::ConstantOp>(
        loss.getLoc(), DenseElementsAttr::get(lossType, 1.0f));
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps))
      if (failed(differentiate(op)))
        return failure();
    return success();
  }

  /// The gradient of `v`, or null when no gradient reaches it.
  Value gradientOf(Value v) const { return grads.lookup(v); }

  OpBuilder &getBuilder() { return builder; }

private:
  LogicalResult differentiate(Operation *op) {
    if (isa<pe::GetParamOp>(op) ||
        llvm::none_of(op->getResults(),
                      [&](Value v) { return activity.isActive(v); }))
      return success();
    auto vjp = dyn_cast<pe::DifferentiableOpInterface>(op);
    if (!vjp)
      return op->emitOpError()
             << "cannot differentiate: it lies on the path from a trainable "
                "parameter to the loss and does not implement "
                "DifferentiableOpInterface";

    SmallVector<Value> resultGrads;
    for (OpResult result : op->getResults()) {
      Value grad = grads.lookup(result);
      // A result the loss does not depend on (pe.linear_gelu's kept `pre`
      // in @forward) gets a null gradient; the VJP skips it.
      if (!grad && !activity.isActive(result)) {
        resultGrads.push_back(Value());
        continue;
      }
      if (!grad)
        return op->emitOpError()
               << "cannot differentiate: result #" << result.getResultNumber()
               << " has no gradient";
      resultGrads.push_back(grad);
    }

    SmallVector<Value> operandGrads;
    if (failed(vjp.buildVJP(builder, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError()
             << "VJP returned " << operandGrads.size() << " gradients for "
             << op->getNumOperands() << " operands";
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      if (!activity.isActive(value))
        continue;
      Value grad = operandGrads[operand.getOperandNumber()];
      if (!grad)
        return op->emitOpError()
               << "cannot differentiate with respect to operand #"
               << operand.getOperandNumber()
               << ", which depends on a trainable parameter";
      if (grad.getType() != value.getType())
        return op->emitOpError()
               << "VJP built a gradient of type " << grad.getType()
               << " for operand #" << operand.getOperandNumber() << " of type "
               << value.getType();
      accumulate(value, grad, op->getLoc());
    }
    return success();
  }

  /// A value used several times receives the sum of its uses' gradients.
  void accumulate(Value value, Value grad, Location loc) {
    Value &sum = grads[value];
    sum = sum ? builder.create<pe::AddOp>(loc, value.getType(), sum, grad)
                    .getResult()
              : grad;
  }

  Block &body;
  const Activity &activity;
  OpBuilder builder;
  DenseMap<Value, Value> grads;
};

struct AutodiffPass : stringc::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override;

private:
  LogicalResult differentiateModule(ModuleOp module);
};

/// Ops whose backward reads more of the forward than their results (the
/// attention ops' log-sum-exp) are replaced by copies that return it too.
void saveForBackward(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto vjp = dyn_cast<pe::DifferentiableOpInterface>(&op);
    if (!vjp)
      continue;
    OpBuilder builder(&op);
    Operation *saved = vjp.withSavedResults(builder);
    if (!saved)
      continue;
    op.replaceAllUsesWith(saved->getResults().take_front(op.getNumResults()));
    op.erase();
  }
}

/// Checks that `forward` is a definition returning the loss first.
LogicalResult checkForward(func::FuncOp forward) {
  if (forward.isExternal())
    return forward.emitOpError() << "@forward must have a body to "
                                    "differentiate";
  if (!forward.getBody().hasOneBlock())
    return forward.emitOpError() << "@forward must be a single block";
  auto lossType = forward.getNumResults() == 0
                      ? RankedTensorType()
                      : dyn_cast<RankedTensorType>(forward.getResultTypes()[0]);
  if (!lossType || lossType.getRank() != 0 ||
      !lossType.getElementType().isF32())
    return forward.emitOpError()
           << "the first result of @forward (the loss) must be tensor<f32>";
  return success();
}

LogicalResult AutodiffPass::differentiateModule(ModuleOp module) {
  SymbolTable symbols(module);
  if (Operation *existing = symbols.lookup(kGradients)) {
    if (isa<func::FuncOp>(existing))
      return existing->emitError()
             << "the module already has @gradients: pe-autodiff runs once per "
                "module";
    return existing->emitError()
           << "the symbol @gradients is taken: pe-autodiff names the function "
              "it adds @gradients";
  }
  auto forward = symbols.lookup<func::FuncOp>(kForward);
  if (!forward)
    return module.emitError() << "pe-autodiff needs a func.func @forward";
  if (failed(checkForward(forward)))
    return failure();

  SmallVector<pe::ParameterOp> params;
  DenseSet<StringAttr> trainable;
  for (auto param : module.getOps<pe::ParameterOp>())
    if (!param.getFrozen()) {
      params.push_back(param);
      trainable.insert(param.getSymNameAttr());
    }

  auto gradients = cast<func::FuncOp>(forward->clone());
  gradients.setSymName(kGradients);
  symbols.insert(gradients, std::next(forward->getIterator()));

  Block &body = gradients.getBody().front();
  saveForBackward(body);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  Activity activity(body, loss, trainable);
  BackwardBuilder backward(body, activity);
  if (failed(backward.run(loss)))
    return failure();

  // One gradient per trainable parameter: the sum over its reads.
  DenseMap<StringAttr, Value> paramGrads;
  OpBuilder &builder = backward.getBuilder();
  for (auto read : body.getOps<pe::GetParamOp>()) {
    Value grad = backward.gradientOf(read.getResult());
    if (!grad)
      continue;
    Value &sum = paramGrads[read.getParamAttr().getAttr()];
    sum = sum ? builder
                    .create<pe::AddOp>(read.getLoc(), grad.getType(), sum, grad)
                    .getResult()
              : grad;
  }

  SmallVector<Value> results{loss};
  SmallVector<DictionaryAttr> resultAttrs{builder.getDictionaryAttr(
      builder.getNamedAttr("pe.output", builder.getStringAttr("loss")))};
  for (pe::ParameterOp param : params) {
    Value grad = paramGrads.lookup(param.getSymNameAttr());
    if (!grad) {
      param.emitWarning() << "parameter '" << param.getSymName()
                          << "' does not affect the loss; its gradient is 0";
      grad = builder.create<arith::ConstantOp>(
          param.getLoc(), DenseElementsAttr::get(param.getTensorType(), 0.0f));
    }
    results.push_back(grad);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        "pe.grad", builder.getStringAttr(param.getSymName()))));
  }
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  gradients.setFunctionType(builder.getFunctionType(
      gradients.getArgumentTypes(), ValueRange(results).getTypes()));
  gradients.setAllResultAttrs(resultAttrs);

  // Forward values no gradient needs (other outputs, unused VJP results).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  // @forward is the evaluation program: dropout is the identity there.
  forward.walk([](pe::DropoutOp dropout) {
    dropout.getResult().replaceAllUsesWith(dropout.getX());
    dropout.erase();
  });
  LLVM_DEBUG(llvm::dbgs() << "pe-autodiff: " << params.size()
                          << " trainable parameters\n");
  return success();
}

void AutodiffPass::runOnOperation() {
  if (failed(differentiateModule(getOperation())))
    signalPassFailure();
}

} // namespace
