//===- ReflectionToRotation.cpp - Householder pairs as RoPE ---------------===//
//
// householder(x, pos, f1, f2) -> rope(x, pos, scale(sub(f2, f1), 2))
//
// H(a) = I - 2 v v^T with v = (cos a, sin a) is [[-cos 2a, -sin 2a],
// [-sin 2a, cos 2a]], so H(a2) H(a1) = [[cos t, -sin t], [sin t, cos t]]
// with t = 2 (a2 - a1) = pos . (2 (f2 - f1)): the rotation pe.rope applies
// with frequencies 2 (f2 - f1). docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-reflection-to-rotation"

namespace stringc {
#define GEN_PASS_DEF_REFLECTIONTOROTATION
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The later of the ops defining `f1` and `f2` (both in one block), or null
/// when both are block arguments.
Operation *latestDefinition(Value f1, Value f2) {
  Operation *a = f1.getDefiningOp(), *b = f2.getDefiningOp();
  if (!a || !b)
    return a ? a : b;
  return a->isBeforeInBlock(b) ? b : a;
}

struct ReflectionToRotationPass
    : stringc::impl::ReflectionToRotationBase<ReflectionToRotationPass> {
  using ReflectionToRotationBase::ReflectionToRotationBase;

  /// The derived frequencies of each (f1, f2) pair, built once.
  DenseMap<std::pair<Value, Value>, Value> derived;

  void runOnOperation() override {
    derived.clear();
    SmallVector<pe::HouseholderOp> reflections;
    getOperation().walk([&](pe::HouseholderOp op) { reflections.push_back(op); });
    for (pe::HouseholderOp op : reflections)
      rewrite(op);
  }

  /// 2 (f2 - f1), and the ops built for it (none when it was shared). The
  /// frequencies go right after the later definition of f1 and f2, so that
  /// every householder op of the block can use them.
  Value frequencies(pe::HouseholderOp op, SmallVectorImpl<Operation *> &created) {
    Value f1 = op.getF1(), f2 = op.getF2();
    Block *block = op->getBlock();
    auto known = derived.find({f1, f2});
    if (known != derived.end() && known->second.getParentBlock() == block)
      return known->second;

    OpBuilder builder(op);
    bool shareable = f1.getParentBlock() == block && f2.getParentBlock() == block;
    if (shareable) {
      if (Operation *after = latestDefinition(f1, f2))
        builder.setInsertionPointAfter(after);
      else
        builder.setInsertionPointToStart(block);
    }
    Location loc = op.getLoc();
    auto diff = builder.create<pe::SubOp>(loc, f2.getType(), f2, f1);
    auto twice = builder.create<pe::ScaleOp>(loc, f2.getType(), diff, APFloat(2.0),
                                             APFloat(0.0));
    created.append({diff, twice});
    if (shareable)
      derived[{f1, f2}] = twice;
    return twice;
  }

  void rewrite(pe::HouseholderOp op) {
    stringc::OpCost before = stringc::estimateCost(op.getOperation(), 1);
    SmallVector<Operation *> created;
    Value freqs = frequencies(op, created);
    int64_t axes = cast<RankedTensorType>(op.getPos().getType()).getDimSize(1);
    pe::RopeMode mode = axes == 1 ? pe::RopeMode::Seq : pe::RopeMode::Mixed;
    OpBuilder builder(op);
    auto rope = builder.create<pe::RopeOp>(op.getLoc(), op.getType(), op.getX(), op.getPos(),
                                           freqs,
                                           pe::RopeModeAttr::get(op.getContext(), mode));
    created.push_back(rope);
    op.replaceAllUsesWith(rope.getResult());
    op.erase();

    ++numRewritten;
    LLVM_DEBUG(llvm::dbgs() << "rewrote a householder op as " << rope << "\n");
    if (explain)
      stringc::reportRewrite(rope, "pe-reflection-to-rotation",
                             created.size() > 1
                                 ? "two reflections per pair rewritten as the rotation by "
                                   "2 (a2 - a1): RoPE with frequencies 2 (f2 - f1)"
                                 : "two reflections per pair rewritten as the rotation by "
                                   "2 (a2 - a1): RoPE with the shared frequencies 2 (f2 - f1)",
                             before, stringc::estimateCost(created, 1));
  }
};

} // namespace
