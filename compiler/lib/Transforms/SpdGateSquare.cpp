//===- SpdGateSquare.cpp - one squared SPD gate instead of two ------------===//
//
// attention(spd_gate(q', g), spd_gate(k', g), v)
//   -> attention(spd_gate(q', scale(g, 2)), k', v)
//
// The gate is the diagonal D = diag(exp(g)), so within every head
// (D q')^T (D k') = q'^T D^2 k' and D^2 = diag(exp(2 g)). docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "AlgebraicUtils.h"
#include "DeadOps.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "pe-spd-gate-square"

namespace stringc {
#define GEN_PASS_DEF_SPDGATESQUARE
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The two gates of an attention whose K gate can move onto Q.
struct GatePair {
  pe::SpdGateOp query, key;
};

/// The gates of `attention` when the rewrite is exact, else nothing.
std::optional<GatePair> matchGates(pe::AttentionOp attention) {
  // A rotation between the gates does not commute with them:
  // q^T D R D k != q^T D^2 R k.
  if (attention.getRel())
    return std::nullopt;
  auto query = attention.getQ().getDefiningOp<pe::SpdGateOp>();
  auto key = attention.getK().getDefiningOp<pe::SpdGateOp>();
  if (!query || !key || query.getGamma() != key.getGamma())
    return std::nullopt;
  // A per-position gate [T, D] differs between query i and key j.
  if (cast<RankedTensorType>(query.getGamma().getType()).getRank() != 1)
    return std::nullopt;
  if (!stringc::algebraic::onlyFeedsQueryKey(query.getResult(), attention) ||
      !stringc::algebraic::onlyFeedsQueryKey(key.getResult(), attention))
    return std::nullopt;
  return GatePair{query, key};
}

struct SpdGateSquarePass : stringc::impl::SpdGateSquareBase<SpdGateSquarePass> {
  using SpdGateSquareBase::SpdGateSquareBase;

  void runOnOperation() override {
    SmallVector<pe::AttentionOp> attentions;
    getOperation().walk([&](pe::AttentionOp op) { attentions.push_back(op); });
    for (pe::AttentionOp attention : attentions)
      if (std::optional<GatePair> gates = matchGates(attention))
        rewrite(attention, *gates);
  }

  void rewrite(pe::AttentionOp attention, GatePair gates) {
    SmallVector<Operation *> matched = {gates.query};
    if (gates.key != gates.query)
      matched.push_back(gates.key);
    stringc::OpCost before = stringc::estimateCost(matched, 1);

    OpBuilder builder(attention);
    Value gamma = gates.query.getGamma();
    auto squared = builder.create<pe::ScaleOp>(gates.query.getLoc(), gamma.getType(), gamma,
                                               APFloat(2.0), APFloat(0.0));
    auto gate = builder.create<pe::SpdGateOp>(gates.query.getLoc(), gates.query.getType(),
                                              gates.query.getX(), squared);
    Value key = gates.key.getX();
    attention.getQMutable().assign(gate);
    attention.getKMutable().assign(key);
    stringc::eraseDeadOps({gates.query, gates.key});

    Operation *created[] = {squared, gate};
    ++numSquared;
    LLVM_DEBUG(llvm::dbgs() << "squared the gate of " << attention << "\n");
    if (explain)
      stringc::reportRewrite(attention, "pe-spd-gate-square",
                             "moved the SPD gate of K onto Q, squared (one gate instead of two)",
                             before, stringc::estimateCost(created, 1));
  }
};

} // namespace
