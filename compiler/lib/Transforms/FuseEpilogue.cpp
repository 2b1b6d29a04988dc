//===- FuseEpilogue.cpp - GELU and residual epilogues of dense layers -----===//
//
//   gelu(linear(x, w, b))      -> linear_gelu(x, w, b)      (result #0)
//   add(r, linear(x, w, b))    -> linear_residual(r, x, w, b)
//   add(linear(x, w, b), r)    -> linear_residual(r, x, w, b)
//
// Each only when the linear's result feeds nothing else (it is not
// materialised any more) and, for the add, when neither side is broadcast.
// docs/passes.md.
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
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The linear defining `value` when `value` has exactly one use.
pe::LinearOp singleUseLinear(Value value) {
  auto linear = value.getDefiningOp<pe::LinearOp>();
  if (!linear || !value.hasOneUse())
    return nullptr;
  return linear;
}

struct FuseEpiloguePass : stringc::impl::FuseEpilogueBase<FuseEpiloguePass> {
  using FuseEpilogueBase::FuseEpilogueBase;

  void runOnOperation() override {
    SmallVector<pe::GeluOp> gelus;
    getOperation().walk([&](pe::GeluOp op) { gelus.push_back(op); });
    for (pe::GeluOp gelu : gelus)
      if (pe::LinearOp linear = singleUseLinear(gelu.getX()))
        fuseGelu(gelu, linear);

    SmallVector<pe::AddOp> adds;
    getOperation().walk([&](pe::AddOp op) { adds.push_back(op); });
    for (pe::AddOp add : adds)
      fuseResidual(add);
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

  void fuseResidual(pe::AddOp add) {
    Value residual;
    pe::LinearOp linear = singleUseLinear(add.getRhs());
    if (linear) {
      residual = add.getLhs();
    } else if ((linear = singleUseLinear(add.getLhs()))) {
      residual = add.getRhs();
    } else {
      return;
    }
    // Broadcasting adds (a [D] bias, a [T, D] table) keep their own kernel.
    if (residual.getType() != add.getType() ||
        linear.getType() != add.getType())
      return;
    Operation *matched[] = {linear, add};
    stringc::OpCost before = stringc::estimateCost(matched, 1);
    OpBuilder builder(add);
    auto fused = builder.create<pe::LinearResidualOp>(
        add.getLoc(), add.getType(), residual, linear.getX(), linear.getW(),
        linear.getB());
    add.replaceAllUsesWith(fused.getResult());
    add.erase();
    linear.erase();
    ++numResidual;
    if (explain)
      stringc::reportRewrite(
          fused, "pe-fuse-epilogue",
          "fused the residual add into the dense layer (the residual is the "
          "GEMM's accumulator)",
          before, stringc::estimateCost(fused.getOperation(), 1));
  }
};

} // namespace
