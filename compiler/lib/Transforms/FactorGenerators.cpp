//===- FactorGenerators.cpp - relative rotations as absolute ones ---------===//
//
// attention(q, k, v, generator_exp(relative_positions(pos), L))
//   -> attention(apply_rotation(q, R), apply_rotation(k, R), v),
//      R = generator_exp(pos, L)
//
// exp((p_j - p_i) . L) = exp(p_i . L)^T exp(p_j . L) when the skew
// generators L_k commute. Exact for one generator (K = 1); for K >= 2 only
// with the `approximate` option, which warns and reports the error bound in
// terms of the commutator. docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "DeadOps.h"
#include "GatherUtils.h"
#include "PositionTables.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <algorithm>
#include <string>
#include <tuple>

#define DEBUG_TYPE "pe-factor-generators"

namespace stringc {
#define GEN_PASS_DEF_FACTORGENERATORS
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// A relative rotation table generator_exp(relative_positions(pos), L).
struct RelativeRotation {
  pe::GeneratorExpOp exp;
  Value pos, generators;
  int64_t count; // K
};

std::optional<RelativeRotation> matchRelative(pe::AttentionOp attention) {
  Value rel = attention.getRel();
  auto exp = rel ? rel.getDefiningOp<pe::GeneratorExpOp>() : pe::GeneratorExpOp();
  if (!exp)
    return std::nullopt;
  auto relative = exp.getR().getDefiningOp<pe::RelativePositionsOp>();
  // R(p)^T = exp(-p . L) needs skew generators: built by pe.skew.
  if (!relative || !exp.getGenerators().getDefiningOp<pe::SkewOp>())
    return std::nullopt;
  int64_t count = cast<RankedTensorType>(exp.getGenerators().getType()).getDimSize(0);
  return RelativeRotation{exp, relative.getPos(), exp.getGenerators(), count};
}

/// max over the pairs (i, j) of (1/2) sum_{a<b} |p_ia p_jb - p_ib p_ja|:
/// with A = -p_i . L, B = p_j . L, [A, B] = -sum_{a<b} (p_ia p_jb - p_ib p_ja)
/// [L_a, L_b], so (1/2) ||[A, B]||_F <= that * max_{a<b} ||[L_a, L_b]||_F.
double worstWedge(const stringc::gather::PositionTable &pos) {
  double worst = 0;
  for (int64_t i = 0; i < pos.tokens; ++i)
    for (int64_t j = 0; j < pos.tokens; ++j) {
      double sum = 0;
      for (int64_t a = 0; a < pos.axes; ++a)
        for (int64_t b = a + 1; b < pos.axes; ++b)
          sum += std::fabs(double(pos.at(i, a)) * double(pos.at(j, b)) -
                           double(pos.at(i, b)) * double(pos.at(j, a)));
      worst = std::max(worst, 0.5 * sum);
    }
  return worst;
}

/// The error bound of the approximate rewrite, as text.
std::string approximationBound(RelativeRotation match, ModuleOp module) {
  std::string bound;
  llvm::raw_string_ostream os(bound);
  os << "K = " << match.count
     << " generators commute only approximately; for skew A = -p_i.L, B = p_j.L, "
        "||exp(A+B) - exp(A)exp(B)||_F <= (1/2)||[A,B]||_F <= ";
  if (std::optional<stringc::gather::PositionTable> pos =
          stringc::gather::evaluatePositions(match.pos))
    os << llvm::format("%g", worstWedge(*pos)) << " * eps over these positions";
  else
    os << "(1/2) sum_{a<b} |p_ia p_jb - p_ib p_ja| * eps";
  os << ", eps = max_{a<b} ||[L_a, L_b]||_F";
  bool measured = false;
  module.walk([&](pe::CommutatorNormOp norm) {
    measured |= norm.getGenerators() == match.generators;
  });
  if (measured)
    os << " (the learned value, unknown to the compiler: the model's "
          "pe.commutator_norm penalty measures it at run time)";
  else
    os << " (the learned value, unknown to the compiler; this model does not "
          "compute pe.commutator_norm of these generators)";
  return bound;
}

struct FactorGeneratorsPass : stringc::impl::FactorGeneratorsBase<FactorGeneratorsPass> {
  using FactorGeneratorsBase::FactorGeneratorsBase;

  void runOnOperation() override {
    absoluteOf.clear();
    rotatedOf.clear();
    SmallVector<pe::AttentionOp> attentions;
    getOperation().walk([&](pe::AttentionOp op) {
      if (!op.getLse()) // before pe-autodiff, which adds the log-sum-exp
        attentions.push_back(op);
    });
    for (pe::AttentionOp attention : attentions) {
      std::optional<RelativeRotation> match = matchRelative(attention);
      if (!match)
        continue;
      bool exact = match->count == 1;
      if (!exact && !approximate) {
        if (explain)
          attention.emitRemark()
              << "[pe-factor-generators: not applied] " << match->count
              << " learned generators need not commute (exact only for K = 1); "
                 "--approximate factors them within the commutator bound";
        continue;
      }
      rewrite(attention, *match, exact);
    }
    // The relative tables and positions no attention reads any more.
    for (auto &[exp, absolute] : absoluteOf) {
      (void)absolute;
      if (exp->use_empty())
        stringc::eraseDeadProducers({exp->getResult(0)});
    }
    absoluteOf.clear();
    rotatedOf.clear();
  }

  /// The absolute rotations R = generator_exp(pos, L) of `match`, built once
  /// right after the relative table (which pos and L dominate).
  Value absoluteRotations(RelativeRotation match, bool &created) {
    auto [it, inserted] = absoluteOf.try_emplace(match.exp.getOperation(), Value());
    created = inserted;
    if (!inserted)
      return it->second;
    auto relType = cast<RankedTensorType>(match.exp.getType());
    int64_t tokens = relType.getDimSize(0), d = relType.getDimSize(2);
    OpBuilder builder(match.exp);
    builder.setInsertionPointAfter(match.exp);
    it->second = builder.create<pe::GeneratorExpOp>(
        match.exp.getLoc(), RankedTensorType::get({tokens, d, d}, relType.getElementType()),
        match.pos, match.generators);
    return it->second;
  }

  void rewrite(pe::AttentionOp attention, RelativeRotation match, bool exact) {
    bool createdTable = false;
    Value rotations = absoluteRotations(match, createdTable);
    SmallVector<Operation *> removed = {attention};
    if (createdTable && explain) {
      removed.push_back(match.exp);
      if (Operation *relative = match.exp.getR().getDefiningOp())
        removed.push_back(relative);
    }
    stringc::OpCost before = explain ? stringc::estimateCost(removed, 1) : stringc::OpCost();

    OpBuilder builder(attention);
    Location loc = attention.getLoc();
    SmallVector<Operation *> added;
    // R x, built once per (x, R, heads): attentions that share k share R k.
    auto rotate = [&](Value x) -> Value {
      auto key = std::make_tuple(x, rotations, attention.getHeads());
      auto [it, inserted] = rotatedOf.try_emplace(key, Value());
      if (inserted) {
        auto op = builder.create<pe::ApplyRotationOp>(loc, x.getType(), x, rotations,
                                                      attention.getHeadsAttr());
        added.push_back(op);
        it->second = op.getResult();
      }
      return it->second;
    };
    Value q = rotate(attention.getQ());
    Value k = rotate(attention.getK());
    auto factored = builder.create<pe::AttentionOp>(
        loc, attention.getResult().getType(), /*lse=*/Type(), q, k, attention.getV(),
        /*rel=*/Value(),
        attention.getHeadsAttr(), attention.getScaleAttr(), attention.getMaskAttr(),
        attention.getSkipBaseAttr());
    attention.getResult().replaceAllUsesWith(factored.getResult());
    attention.erase();
    ++numFactored;

    std::string what = "factored relative attention into absolute rotations R(p_t) of q "
                       "and k (T instead of T*T matrix exponentials, no per-pair rotation)";
    if (!exact) {
      ++numApproximate;
      std::string bound = approximationBound(match, getOperation());
      factored.emitWarning() << "pe-factor-generators: approximate rewrite (--approximate): "
                             << bound;
      what += "; approximate: " + bound;
    }
    LLVM_DEBUG(llvm::dbgs() << "factored " << factored << "\n");
    if (explain) {
      added.push_back(factored);
      if (createdTable)
        added.push_back(rotations.getDefiningOp());
      stringc::reportRewrite(factored, "pe-factor-generators", what, before,
                             stringc::estimateCost(added, 1));
    }
  }

  /// Relative table -> its absolute rotations, shared by every attention
  /// that reads the table.
  llvm::DenseMap<Operation *, Value> absoluteOf;
  /// (x, R, heads) -> apply_rotation(x, R).
  llvm::DenseMap<std::tuple<Value, Value, uint64_t>, Value> rotatedOf;
};

} // namespace
