//===- FuseAttention.cpp - RoPE in the attention kernel's prologue --------===//
//
//   attention(rope_apply(q, t), rope_apply(k, t), v)
//     -> rope_attention(q, k, v, t)
//
// The fused kernel rotates each (batch, head) tile of q and k as it loads
// it, so the rotated Q / K never reach memory (docs/passes.md). Fires only
// when the rotated values feed nothing else, the table is not trainable
// (the fused backward gives no table gradient), and the mask is none or
// causal without `rel`.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-fuse-attention"

namespace stringc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// True when a trainable (not frozen) parameter flows into `value`.
bool dependsOnTrainable(Value value) {
  SmallVector<Value> worklist = {value};
  llvm::SmallPtrSet<Operation *, 16> visited;
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !visited.insert(def).second)
      continue;
    if (auto read = dyn_cast<pe::GetParamOp>(def)) {
      auto param = SymbolTable::lookupNearestSymbolFrom<pe::ParameterOp>(
          read, read.getParamAttr());
      if (!param || !param.getFrozen())
        return true;
      continue;
    }
    worklist.append(def->operand_begin(), def->operand_end());
  }
  return false;
}

/// Every use of `value` is operand q or k of `attention`.
bool onlyFeedsQueryKey(Value value, pe::AttentionOp attention) {
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    return use.getOwner() == attention.getOperation() &&
           use.getOperandNumber() <= 1;
  });
}

/// The rotations of q and k that the fused op takes in.
struct RotatedQueryKey {
  pe::RopeApplyOp query, key;
};

std::optional<RotatedQueryKey> match(pe::AttentionOp attention) {
  if (attention.getRel() || attention.getMask() == pe::MaskKind::Skip)
    return std::nullopt;
  auto query = attention.getQ().getDefiningOp<pe::RopeApplyOp>();
  auto key = attention.getK().getDefiningOp<pe::RopeApplyOp>();
  if (!query || !key || query.getTable() != key.getTable() ||
      query.getInverse() || key.getInverse())
    return std::nullopt;
  // The fused kernel rotates whole pairs inside each head's tile.
  int64_t width = attention.getResult().getType().getDimSize(2);
  if ((width / attention.getHeads()) % 2 != 0)
    return std::nullopt;
  if (!onlyFeedsQueryKey(query.getResult(), attention) ||
      !onlyFeedsQueryKey(key.getResult(), attention))
    return std::nullopt;
  if (dependsOnTrainable(query.getTable())) {
    LLVM_DEBUG(llvm::dbgs() << "not fusing " << attention
                            << ": the table is trainable\n");
    return std::nullopt;
  }
  return RotatedQueryKey{query, key};
}

struct FuseAttentionPass
    : stringc::impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<pe::AttentionOp> attentions;
    // Not an op returning its log-sum-exp (pe-autodiff's, in @gradients):
    // this pass runs before pe-autodiff.
    module.walk([&](pe::AttentionOp op) {
      if (!op.getLse())
        attentions.push_back(op);
    });
    for (pe::AttentionOp attention : attentions)
      if (std::optional<RotatedQueryKey> m = match(attention))
        rewrite(attention, *m);
  }

  void rewrite(pe::AttentionOp attention, RotatedQueryKey m) {
    SmallVector<Operation *> matched = {m.query, attention};
    if (m.key != m.query)
      matched.push_back(m.key);
    stringc::OpCost before = stringc::estimateCost(matched, 1);

    OpBuilder builder(attention);
    auto fused = builder.create<pe::RopeAttentionOp>(
        attention.getLoc(), attention.getResult().getType(), /*lse=*/Type(), m.query.getX(),
        m.key.getX(), attention.getV(), m.query.getTable(),
        attention.getHeadsAttr(), attention.getScaleAttr(),
        attention.getMaskAttr());
    attention.getResult().replaceAllUsesWith(fused.getResult());
    attention.erase();
    if (m.query.use_empty())
      m.query.erase();
    if (m.key != m.query && m.key.use_empty())
      m.key.erase();

    ++numFused;
    LLVM_DEBUG(llvm::dbgs() << "fused " << fused << "\n");
    if (explain)
      stringc::reportRewrite(
          fused, "pe-fuse-attention",
          "fused RoPE on Q and K into the attention kernel's prologue (the "
          "rotated Q and K are never written to memory)",
          before, stringc::estimateCost(fused.getOperation(), 1));
  }
};

} // namespace
