//===- DistinctOffsets.cpp - one matrix exponential per distinct offset ---===//
//
// generator_exp(relative_positions(pos), L)
//   -> pair_gather(generator_exp(offset_table, L), index)
//
// with pos a pe.seq_positions / pe.grid_positions, evaluated here: only the
// U distinct offsets p_j - p_i are exponentiated (169 instead of 2500 for a
// 7x7 grid + CLS), then copied to every pair. docs/passes.md.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "DeadOps.h"
#include "GatherUtils.h"
#include "PositionTables.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <map>
#include <string>

#define DEBUG_TYPE "pe-distinct-offsets"

namespace stringc {
#define GEN_PASS_DEF_DISTINCTOFFSETS
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The distinct rows of relative_positions(pos) and each pair's row.
struct DistinctOffsetTable {
  int64_t count = 0;            // U
  SmallVector<int64_t> offsets; // [U, A], row-major
  SmallVector<int64_t> index;   // T*T, index[i*T + j] in [0, U)
};

/// First-appearance order over the row-major pairs (i, j).
DistinctOffsetTable distinctOffsets(const stringc::gather::PositionTable &pos) {
  DistinctOffsetTable table;
  std::map<std::vector<int64_t>, int64_t> rows;
  std::vector<int64_t> offset(pos.axes);
  for (int64_t i = 0; i < pos.tokens; ++i)
    for (int64_t j = 0; j < pos.tokens; ++j) {
      for (int64_t a = 0; a < pos.axes; ++a)
        offset[a] = pos.at(j, a) - pos.at(i, a);
      auto [it, added] = rows.emplace(offset, table.count);
      if (added) {
        ++table.count;
        table.offsets.append(offset.begin(), offset.end());
      }
      table.index.push_back(it->second);
    }
  return table;
}

struct DistinctOffsetsPass : stringc::impl::DistinctOffsetsBase<DistinctOffsetsPass> {
  using DistinctOffsetsBase::DistinctOffsetsBase;

  void runOnOperation() override {
    SmallVector<pe::GeneratorExpOp> candidates;
    getOperation().walk([&](pe::GeneratorExpOp op) { candidates.push_back(op); });
    for (pe::GeneratorExpOp exp : candidates)
      rewrite(exp);
  }

  void rewrite(pe::GeneratorExpOp exp) {
    auto relative = exp.getR().getDefiningOp<pe::RelativePositionsOp>();
    if (!relative)
      return;
    std::optional<stringc::gather::PositionTable> pos =
        stringc::gather::evaluatePositions(relative.getPos());
    if (!pos)
      return;
    DistinctOffsetTable table = distinctOffsets(*pos);
    int64_t pairs = pos->tokens * pos->tokens;
    if (table.count == pairs) // nothing repeats: the gather would only add work
      return;

    stringc::OpCost before;
    if (explain)
      before = stringc::estimateCost(
          stringc::gather::deadAfterDropping(exp, {exp.getR()}), 1);

    OpBuilder builder(exp);
    Location loc = exp.getLoc();
    auto rType = cast<RankedTensorType>(exp.getR().getType());
    auto expType = cast<RankedTensorType>(exp.getType());
    auto tableType = RankedTensorType::get({table.count, pos->axes}, rType.getElementType());
    auto offsets = builder.create<pe::OffsetTableOp>(loc, tableType,
                                                     builder.getDenseI64ArrayAttr(table.offsets));
    SmallVector<int64_t> perOffsetShape = {table.count};
    perOffsetShape.append(expType.getShape().begin() + 2, expType.getShape().end());
    auto perOffset = builder.create<pe::GeneratorExpOp>(
        loc, RankedTensorType::get(perOffsetShape, expType.getElementType()), offsets,
        exp.getGenerators());
    auto gather = builder.create<pe::PairGatherOp>(loc, expType, perOffset,
                                                   builder.getDenseI64ArrayAttr(table.index));
    exp.getResult().replaceAllUsesWith(gather.getResult());
    ++numTables;
    LLVM_DEBUG(llvm::dbgs() << "distinct offsets: " << table.count << " of " << pairs << "\n");
    if (explain) {
      Operation *created[] = {offsets, perOffset, gather};
      stringc::reportRewrite(gather, "pe-distinct-offsets",
                             "exponentiated the " + std::to_string(table.count) +
                                 " distinct offsets instead of all " + std::to_string(pairs) +
                                 " pairs, then gathered",
                             before, stringc::estimateCost(created, 1));
    }
    Value r = exp.getR();
    exp.erase();
    stringc::eraseDeadProducers({r});
  }
};

} // namespace
