//===- FuseEpilogue.cpp - GELU and residual epilogues of dense layers -----===//
//
//   gelu(linear(x, w, b))      -> linear_gelu(x, w, b)      (result #0)
//   add(r, linear(x, w, b))    -> linear_residual(r, x, w, b)
//   add(linear(x, w, b), r)    -> linear_residual(r, x, w, b)
//
// Each only when the linear's result feeds nothing else (it is not
// materialised any more) and, for the add, when neither side is broadcast.
// pe-fuse-epilogue (opt-in) does both, pe-fuse-residual (a default pass of
// --target=cpu, after pe-autodiff) the residual adds alone, and also
//
//   add(p, linear_grad_input(dy, w))     -> linear_grad_input_acc(p, dy, w)
//   add(p, layer_norm_grad(x, g, dy).dx) -> layer_norm_grad_acc(p, x, g, dy)
//
// (either order), the sums of input gradients of the backward. docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-fuse-epilogue"

namespace stringc {
#define GEN_PASS_DEF_FUSEEPILOGUE
#define GEN_PASS_DEF_FUSERESIDUAL
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The `Op` defining `value` as its result #0 when `value` has exactly one
/// use.
template <typename Op> Op singleUse(Value value) {
  auto op = value.getDefiningOp<Op>();
  if (!op || op->getResult(0) != value || !value.hasOneUse())
    return nullptr;
  return op;
}

/// Whether every use of `producer`'s results other than #0 (the one `add`
/// reads) comes after `add` in its block: the fused op, created at the add,
/// then dominates them.
bool otherResultsUsedAfter(Operation *producer, pe::AddOp add) {
  for (Value result : producer->getResults().drop_front())
    for (Operation *user : result.getUsers())
      if (user->getBlock() != add->getBlock() || !add->isBeforeInBlock(user))
        return false;
  return true;
}

/// `add(other, producer(...))` (either order), the producer's result #0
/// read only by the add and neither side broadcast, replaced by the op that
/// `build(builder, other, producer)` creates, whose results stand for the
/// producer's (result #0 for the sum; the others, if any, for the
/// producer's others). Returns whether it fused.
template <typename ProducerOp, typename Build>
bool fuseAddOf(pe::AddOp add, bool explain, StringRef passName, StringRef what, Build build) {
  Value other;
  ProducerOp producer = singleUse<ProducerOp>(add.getRhs());
  if (producer) {
    other = add.getLhs();
  } else if ((producer = singleUse<ProducerOp>(add.getLhs()))) {
    other = add.getRhs();
  } else {
    return false;
  }
  // Broadcasting adds (a [D] bias, a [T, D] table) keep their own kernel.
  if (other.getType() != add.getType() || producer->getResult(0).getType() != add.getType() ||
      !otherResultsUsedAfter(producer, add))
    return false;
  Operation *matched[] = {producer, add};
  stringc::OpCost before = stringc::estimateCost(matched, 1);
  OpBuilder builder(add);
  Operation *fused = build(builder, other, producer);
  add.replaceAllUsesWith(fused->getResult(0));
  add.erase();
  producer->replaceAllUsesWith(fused->getResults());
  producer.erase();
  if (explain)
    stringc::reportRewrite(fused, passName, what, before, stringc::estimateCost(fused, 1));
  return true;
}

/// `add(r, linear(x, w, b))` as `linear_residual(r, x, w, b)`.
bool fuseResidual(pe::AddOp add, bool explain, StringRef passName) {
  return fuseAddOf<pe::LinearOp>(
      add, explain, passName,
      "fused the residual add into the dense layer (the linear's result is never stored apart)",
      [&](OpBuilder &builder, Value residual, pe::LinearOp linear) {
        return builder.create<pe::LinearResidualOp>(add.getLoc(), add.getType(), residual,
                                                    linear.getX(), linear.getW(), linear.getB())
            .getOperation();
      });
}

/// Every residual add of `module` that fuses; returns how many did.
int fuseResiduals(ModuleOp module, bool explain, StringRef passName) {
  SmallVector<pe::AddOp> adds;
  module.walk([&](pe::AddOp op) { adds.push_back(op); });
  int fusedCount = 0;
  for (pe::AddOp add : adds)
    fusedCount += fuseResidual(add, explain, passName);
  return fusedCount;
}

/// `add(prior, linear_grad_input(dy, w))` as `linear_grad_input_acc(prior,
/// dy, w)`: the sums pe-autodiff builds for an activation that several
/// dense layers read.
bool fuseGradientSum(pe::AddOp add, bool explain, StringRef passName) {
  return fuseAddOf<pe::LinearGradInputOp>(
      add, explain, passName,
      "fused the sum of input gradients into the dense layer's backward (the input gradient "
      "is never stored apart)",
      [&](OpBuilder &builder, Value prior, pe::LinearGradInputOp gradInput) {
        return builder.create<pe::LinearGradInputAccOp>(add.getLoc(), add.getType(), prior,
                                                        gradInput.getDy(), gradInput.getW())
            .getOperation();
      });
}

/// `add(prior, layer_norm_grad(x, g, dy).dx)` as `layer_norm_grad_acc(prior,
/// x, g, dy)`: the residual stream's sums, the gradient through a block's
/// pre-norm and the one that skips the block.
bool fuseNormGradientSum(pe::AddOp add, bool explain, StringRef passName) {
  return fuseAddOf<pe::LayerNormGradOp>(
      add, explain, passName,
      "fused the residual stream's gradient sum into the layer norm's backward (its input "
      "gradient is never stored apart)",
      [&](OpBuilder &builder, Value prior, pe::LayerNormGradOp grad) {
        return builder
            .create<pe::LayerNormGradAccOp>(add.getLoc(), grad->getResultTypes(), prior,
                                            grad.getX(), grad.getGamma(), grad.getDy(),
                                            grad.getEpsilonAttr())
            .getOperation();
      });
}

struct FuseEpiloguePass : stringc::impl::FuseEpilogueBase<FuseEpiloguePass> {
  using FuseEpilogueBase::FuseEpilogueBase;

  void runOnOperation() override {
    SmallVector<pe::GeluOp> gelus;
    getOperation().walk([&](pe::GeluOp op) { gelus.push_back(op); });
    for (pe::GeluOp gelu : gelus)
      if (auto linear = singleUse<pe::LinearOp>(gelu.getX()))
        fuseGelu(gelu, linear);

    numResidual += fuseResiduals(getOperation(), explain, getArgument());
  }

  void fuseGelu(pe::GeluOp gelu, pe::LinearOp linear) {
    Operation *matched[] = {linear, gelu};
    stringc::OpCost before = stringc::estimateCost(matched, 1);
    OpBuilder builder(gelu);
    Type type = linear.getType();
    auto fused = builder.create<pe::LinearGeluOp>(
        gelu.getLoc(), type, type, linear.getX(), linear.getW(),
        linear.getB(), gelu.getApproximateAttr());
    gelu.replaceAllUsesWith(fused.getResult());
    gelu.erase();
    linear.erase();
    ++numGelu;
    if (explain)
      stringc::reportRewrite(fused, "pe-fuse-epilogue",
                             "fused the GELU into the dense layer's epilogue",
                             before,
                             stringc::estimateCost(fused.getOperation(), 1));
  }
};

struct FuseResidualPass : stringc::impl::FuseResidualBase<FuseResidualPass> {
  using FuseResidualBase::FuseResidualBase;

  void runOnOperation() override {
    numResidual += fuseResiduals(getOperation(), explain, getArgument());
    SmallVector<pe::AddOp> adds;
    getOperation().walk([&](pe::AddOp op) { adds.push_back(op); });
    for (pe::AddOp add : adds) {
      if (fuseGradientSum(add, explain, getArgument()))
        ++numGradientSum;
      else if (fuseNormGradientSum(add, explain, getArgument()))
        ++numNormGradientSum;
    }
  }
};

} // namespace
