//===- FoldTransform.cpp - a Cayley transform folded into W ---------------===//
//
// cayley(linear(h, W [, b]), S) -> linear(h, cayley(W, S) [, cayley(b, S)])
//
// pe.cayley applies U to every vector of its last dimension: for the rows
// of a linear layer, U (W^T h + b) = (W U^T)^T h + U b, and cayley(W, S)
// is exactly W U^T (U applied to each row of W). U is then applied to the
// [I, O] weight once per step instead of to every token of the batch: the
// STRING order rope(cayley(linear(h, W_Q), S)) becomes RoPE of a plain
// projection. docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <string>

#define DEBUG_TYPE "pe-fold-transform"

namespace stringc {
#define GEN_PASS_DEF_FOLDTRANSFORM
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

struct FoldTransformPass : stringc::impl::FoldTransformBase<FoldTransformPass> {
  using FoldTransformBase::FoldTransformBase;

  void runOnOperation() override {
    SmallVector<pe::CayleyOp> transforms;
    getOperation().walk([&](pe::CayleyOp op) { transforms.push_back(op); });
    for (pe::CayleyOp transform : transforms) {
      auto linear = transform.getX().getDefiningOp<pe::LinearOp>();
      // Another use of the projection would still need it untransformed.
      if (linear && linear->hasOneUse())
        fold(transform, linear);
    }
  }

  void fold(pe::CayleyOp transform, pe::LinearOp linear) {
    Operation *matched[] = {linear, transform};
    stringc::OpCost before = stringc::estimateCost(matched, 1);

    // Everything the new ops read (h, W, b, S) is defined before the
    // transform, which follows the linear layer.
    OpBuilder builder(transform);
    Location loc = transform.getLoc();
    Value s = transform.getS();
    SmallVector<Operation *> created;
    auto weight = builder.create<pe::CayleyOp>(loc, linear.getW().getType(), linear.getW(), s);
    created.push_back(weight);
    Value bias;
    if (Value b = linear.getB()) {
      auto folded = builder.create<pe::CayleyOp>(loc, b.getType(), b, s);
      created.push_back(folded);
      bias = folded;
    }
    auto projection = builder.create<pe::LinearOp>(linear.getLoc(), transform.getType(),
                                                   linear.getX(), weight, bias);
    created.push_back(projection);

    transform.replaceAllUsesWith(projection.getResult());
    transform.erase();

    std::string weightName;
    if (auto param = linear.getW().getDefiningOp<pe::GetParamOp>())
      weightName = " @" + param.getParam().str();
    linear.erase();
    ++numFolded;
    LLVM_DEBUG(llvm::dbgs() << "folded a Cayley transform into " << projection << "\n");
    if (!explain)
      return;
    std::string what = "folded the Cayley transform into the weights" + weightName +
                       " of the linear layer (U applied to W once per step, not to every token)";
    stringc::reportRewrite(projection, "pe-fold-transform", what, before,
                           stringc::estimateCost(created, 1));
  }
};

} // namespace
