//===- Hoist.cpp - position/parameter-only tables once per step -----------===//
//
//   rope(x, pos, freqs)  -> rope_apply(x, rope_table(pos, freqs))
//   cayley(x, S)         -> linear(x, cayley_weight(S))
//
// then every op that reads no activation (nothing derived from a function
// argument flows into it) is merged with an earlier identical one: the same
// op on the same operands with the same attributes. Q and K of every layer
// then share one cos/sin table and one Cayley weight per S. The new tables
// are placed right after their operands' definitions, so the earliest copy
// dominates every use. docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-hoist"

namespace stringc {
#define GEN_PASS_DEF_HOIST
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// An insertion point right after the definitions of `values` (all in
/// `block` or its arguments): after the latest defining op, or at the
/// start of the block when all are block arguments.
OpBuilder afterDefinitions(Block &block, ArrayRef<Value> values) {
  Operation *latest = nullptr;
  for (Value value : values) {
    Operation *def = value.getDefiningOp();
    if (def && (!latest || latest->isBeforeInBlock(def)))
      latest = def;
  }
  OpBuilder builder(block.getParentOp()->getContext());
  if (latest)
    builder.setInsertionPointAfter(latest);
  else
    builder.setInsertionPointToStart(&block);
  return builder;
}

/// Hashing and equality of ops "by value": the same name, attributes,
/// operands and result types (OperationEquivalence, as mlir's CSE uses).
struct OpByValue : DenseMapInfo<Operation *> {
  static unsigned getHashValue(const Operation *op) {
    return OperationEquivalence::computeHash(
        const_cast<Operation *>(op), OperationEquivalence::directHashValue,
        OperationEquivalence::ignoreHashValue,
        OperationEquivalence::IgnoreLocations);
  }
  static bool isEqual(const Operation *lhs, const Operation *rhs) {
    if (lhs == rhs)
      return true;
    if (lhs == getEmptyKey() || lhs == getTombstoneKey() ||
        rhs == getEmptyKey() || rhs == getTombstoneKey())
      return false;
    return OperationEquivalence::isEquivalentTo(
        const_cast<Operation *>(lhs), const_cast<Operation *>(rhs),
        OperationEquivalence::IgnoreLocations);
  }
};

struct HoistPass : stringc::impl::HoistBase<HoistPass> {
  using HoistBase::HoistBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (func.isDeclaration() || !func.getBody().hasOneBlock())
        return;
      Block &body = func.getBody().front();
      SmallVector<pe::RopeOp> ropes;
      SmallVector<pe::CayleyOp> cayleys;
      for (Operation &op : body) {
        if (auto rope = dyn_cast<pe::RopeOp>(op))
          ropes.push_back(rope);
        else if (auto cayley = dyn_cast<pe::CayleyOp>(op))
          cayleys.push_back(cayley);
      }
      for (pe::RopeOp rope : ropes)
        splitRope(body, rope);
      for (pe::CayleyOp cayley : cayleys)
        splitCayley(body, cayley);
      mergeInvariantOps(body);
    });
  }

  void splitRope(Block &body, pe::RopeOp rope) {
    stringc::OpCost before = stringc::estimateCost(rope, 1);
    auto pos = cast<RankedTensorType>(rope.getPos().getType());
    auto freqs = cast<RankedTensorType>(rope.getFreqs().getType());
    auto tableType = RankedTensorType::get(
        {pos.getDimSize(0), freqs.getDimSize(0), 2}, pos.getElementType());
    OpBuilder tableBuilder =
        afterDefinitions(body, {rope.getPos(), rope.getFreqs()});
    auto table = tableBuilder.create<pe::RopeTableOp>(
        rope.getLoc(), tableType, rope.getPos(), rope.getFreqs());
    OpBuilder builder(rope);
    auto apply = builder.create<pe::RopeApplyOp>(
        rope.getLoc(), rope.getType(), rope.getX(), table,
        builder.getBoolAttr(false));
    rope.replaceAllUsesWith(apply.getResult());
    rope.erase();
    ++numRopeSplit;
    if (explain)
      stringc::reportRewrite(
          apply, "pe-hoist",
          "split RoPE into a cos/sin table (computed once per step, shared "
          "by every rotation with these positions and frequencies) and its "
          "application",
          before, stringc::estimateCost(apply.getOperation(), 1));
  }

  void splitCayley(Block &body, pe::CayleyOp cayley) {
    stringc::OpCost before = stringc::estimateCost(cayley, 1);
    OpBuilder weightBuilder = afterDefinitions(body, {cayley.getS()});
    auto weight = weightBuilder.create<pe::CayleyWeightOp>(
        cayley.getLoc(), cayley.getS().getType(), cayley.getS());
    OpBuilder builder(cayley);
    auto linear = builder.create<pe::LinearOp>(
        cayley.getLoc(), cayley.getType(), cayley.getX(), weight, Value());
    cayley.replaceAllUsesWith(linear.getResult());
    cayley.erase();
    ++numCayleySplit;
    if (explain)
      stringc::reportRewrite(
          linear, "pe-hoist",
          "hoisted the Cayley matrix U = (I - S)(I + S)^-1 (one "
          "factorisation per step per S); the transform is now a GEMM",
          before, stringc::estimateCost(linear.getOperation(), 1));
  }

  /// Merges duplicate ops whose operands are all activation-free. Walking
  /// in order, the first copy of each op is kept: it comes before the
  /// others in the block, so it dominates their uses.
  void mergeInvariantOps(Block &body) {
    DenseSet<Value> activations(body.args_begin(), body.args_end());
    DenseSet<Operation *, OpByValue> seen;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      bool readsActivation = llvm::any_of(
          op.getOperands(), [&](Value v) { return activations.contains(v); });
      if (readsActivation || op.getNumRegions() != 0 ||
          op.hasTrait<OpTrait::IsTerminator>() || !isPure(&op)) {
        activations.insert(op.result_begin(), op.result_end());
        continue;
      }
      auto [it, inserted] = seen.insert(&op);
      if (inserted)
        continue;
      Operation *kept = *it;
      LLVM_DEBUG(llvm::dbgs() << "merging " << op << " into " << *kept
                              << "\n");
      ++numMerged;
      if (explain)
        stringc::reportRewrite(kept, "pe-hoist",
                               "merged a duplicate " +
                                   op.getName().getStringRef().str() +
                                   " (computed once per step)",
                               stringc::estimateCost(&op, 1),
                               stringc::OpCost{});
      op.replaceAllUsesWith(kept->getResults());
      op.erase();
    }
  }
};

} // namespace
