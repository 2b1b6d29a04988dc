//===- CancelOrthogonal.cpp - transforms that cancel in q^T k -------------===//
//
// attention(cayley(q', S), cayley(k', S), v) -> attention(q', k', v)
//
// U = cayley(S) is orthogonal for a skew S, so (U q)^T (U k) = q^T U^T U k =
// q^T k whenever U maps every head onto itself (heads = 1, or S
// block-diagonal per head). The transform then has no effect on the model,
// which is almost certainly not what its author meant: the pass warns, and
// points at the STRING order rope(cayley(x, S)), which does not cancel.
// docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "AlgebraicUtils.h"
#include "DeadOps.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <string>

#define DEBUG_TYPE "pe-cancel-orthogonal"

namespace stringc {
#define GEN_PASS_DEF_CANCELORTHOGONAL
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kPass = "pe-cancel-orthogonal";

/// The transforms of Q and K, and why they do not cancel (empty when they
/// do).
struct Match {
  pe::CayleyOp query, key;
  std::string whyNot;
};

/// The first support entry of `skew` whose pair (i, j) crosses two heads of
/// `headDim` columns, as "(i, j)"; empty when S is block-diagonal per head.
std::string crossingEntry(pe::SparseSkewOp skew, int64_t headDim) {
  int64_t dim = skew.getDim();
  ArrayRef<int64_t> support = skew.getSupport();
  // Walk the upper triangle in pe.skew's row-major order, index k = (i, j).
  size_t next = 0;
  int64_t k = 0;
  for (int64_t i = 0; i < dim && next < support.size(); ++i)
    for (int64_t j = i + 1; j < dim && next < support.size(); ++j, ++k) {
      if (support[next] != k)
        continue;
      ++next;
      if (i / headDim != j / headDim)
        return "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
    }
  return {};
}

/// Why U = cayley(s) does not act within every head of `attention`; empty
/// when it does.
std::string whyNotPerHead(Value s, pe::AttentionOp attention) {
  int64_t heads = attention.getHeads();
  int64_t dim = cast<RankedTensorType>(s.getType()).getDimSize(0);
  if (auto sparse = s.getDefiningOp<pe::SparseSkewOp>()) {
    if (heads == 1)
      return {};
    std::string entry = crossingEntry(sparse, dim / heads);
    if (entry.empty())
      return {};
    return "the sparse S couples two heads (support entry " + entry + ", heads of " +
           std::to_string(dim / heads) + " columns), so U is not orthogonal per head";
  }
  if (s.getDefiningOp<pe::SkewOp>()) {
    if (heads == 1)
      return {};
    return "the dense S mixes the " + std::to_string(heads) +
           " heads, so U is not orthogonal per head";
  }
  return "S is not built by pe.skew or pe.sparse_skew, so U is not known to be orthogonal";
}

/// The Cayley transforms on Q and K of `attention`, when both exist.
std::optional<Match> matchTransforms(pe::AttentionOp attention) {
  auto query = attention.getQ().getDefiningOp<pe::CayleyOp>();
  auto key = attention.getK().getDefiningOp<pe::CayleyOp>();
  if (!query || !key)
    return std::nullopt;
  Match match{query, key, {}};
  if (query.getS() != key.getS())
    match.whyNot = "Q and K use different S";
  else if (attention.getRel())
    match.whyNot = "a relative rotation sits between them (U^T R U != R)";
  else if (!stringc::algebraic::onlyFeedsQueryKey(query.getResult(), attention) ||
           !stringc::algebraic::onlyFeedsQueryKey(key.getResult(), attention))
    match.whyNot = "the transformed Q or K has other uses";
  else
    match.whyNot = whyNotPerHead(query.getS(), attention);
  return match;
}

struct CancelOrthogonalPass : stringc::impl::CancelOrthogonalBase<CancelOrthogonalPass> {
  using CancelOrthogonalBase::CancelOrthogonalBase;

  void runOnOperation() override {
    SmallVector<pe::AttentionOp> attentions;
    getOperation().walk([&](pe::AttentionOp op) { attentions.push_back(op); });
    for (pe::AttentionOp attention : attentions) {
      std::optional<Match> match = matchTransforms(attention);
      if (!match)
        continue;
      if (!match->whyNot.empty()) {
        if (explain)
          attention.emitRemark() << "[" << kPass << ": not applied] the Cayley transform on Q and K does "
                                 << "not cancel: " << match->whyNot;
        continue;
      }
      cancel(attention, *match);
    }
  }

  void cancel(pe::AttentionOp attention, Match match) {
    SmallVector<Operation *> matched = {match.query};
    if (match.key != match.query)
      matched.push_back(match.key);
    stringc::OpCost before = stringc::estimateCost(matched, 1);

    match.query.emitWarning()
        << "the Cayley transform is applied to both Q and K over whole heads, so it "
           "cancels in the attention scores ((U q)^T (U k) = q^T k) and has no effect; "
           "apply it before RoPE (the STRING order, rope(cayley(x, S), pos, freqs)), "
           "which does not cancel";
    if (explain)
      stringc::reportRewrite(attention, kPass,
                             "removed the Cayley transform of Q and K: it cancels in q^T k",
                             before, stringc::OpCost{});

    attention.getQMutable().assign(match.query.getX());
    attention.getKMutable().assign(match.key.getX());
    stringc::eraseDeadOps({match.query, match.key});
    ++numCancelled;
    LLVM_DEBUG(llvm::dbgs() << "cancelled the transforms of " << attention << "\n");
  }
};

} // namespace
