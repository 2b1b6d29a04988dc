//===- SkipAttentionToGather.cpp - skip-n attention as a gather -----------===//
//
// attention(q, k, v) mask(skip) skip_base(n)  ->  skip_gather(v) skip_base(n)
//
// Head s of query i sees only key i - (n + s): a softmax over one key is 1,
// so the output is that key's value, independent of q, k and the scale.
// The producers of q and k are erased when nothing else uses them.
// docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "DeadOps.h"
#include "GatherUtils.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-skip-gather"

namespace stringc {
#define GEN_PASS_DEF_SKIPGATHER
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

struct SkipGatherPass : stringc::impl::SkipGatherBase<SkipGatherPass> {
  using SkipGatherBase::SkipGatherBase;

  void runOnOperation() override {
    SmallVector<pe::AttentionOp> attentions;
    getOperation().walk([&](pe::AttentionOp op) {
      if (op.getMask() == pe::MaskKind::Skip && op.getSkipBaseAttr() && !op.getLse())
        attentions.push_back(op);
    });
    for (pe::AttentionOp attention : attentions)
      rewrite(attention);
  }

  void rewrite(pe::AttentionOp attention) {
    // The operands that only feed the scores (rel too: a one-key softmax
    // ignores the score).
    SmallVector<Value> scoreOperands = {attention.getQ(), attention.getK()};
    if (Value rel = attention.getRel())
      scoreOperands.push_back(rel);
    stringc::OpCost before;
    if (explain)
      before = stringc::estimateCost(
          stringc::gather::deadAfterDropping(attention, scoreOperands), 1);

    OpBuilder builder(attention);
    auto gather = builder.create<pe::SkipGatherOp>(attention.getLoc(),
                                                   attention.getResult().getType(),
                                                   attention.getV(), attention.getHeadsAttr(),
                                                   attention.getSkipBaseAttr());
    attention.getResult().replaceAllUsesWith(gather.getResult());
    ++numGathers;
    LLVM_DEBUG(llvm::dbgs() << "gathered " << attention << "\n");
    if (explain)
      stringc::reportRewrite(gather, "pe-skip-gather",
                             "skip-n attention reads one key per query: a shift of v, "
                             "no scores (q, k and their producers are dead)",
                             before, stringc::estimateCost(gather.getOperation(), 1));
    attention.erase();
    stringc::eraseDeadProducers(scoreOperands);
  }
};

} // namespace
