//===- ClusterCayley.cpp - the layers' Cayley weights next to each other --===//
//
// pe-cluster-cayley (a default pass of --target=cuda only; docs/passes.md):
// each pe.cayley_weight after the first of its operand type moves to just
// after the last one moved (the first when none yet), when the ops its
// operand needs that come after that first one are only skew builders
// (pe.skew, pe.sparse_skew), parameters and constants: those move to just
// before the first. A layer's S = skew(s) reads only its parameter, so the
// model's Cayley weights become one run, which the CUDA step program
// computes in one launch (compiler/lib/CudaGen/KernelGroups.h). Pure
// reordering of side-effect-free ops: the numbers are unchanged.
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "pe-cluster-cayley"

namespace stringc {
#define GEN_PASS_DEF_CLUSTERCAYLEY
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The ops that may move ahead with a Cayley weight: cheap, pure, reading
/// only parameters.
bool movesAlong(Operation *op) {
  return isa<pe::SkewOp, pe::SparseSkewOp, pe::GetParamOp, arith::ConstantOp>(op);
}

/// The ops after `first` in its block that `op`'s operands need, in block
/// order; nullopt when one of them may not move (movesAlong).
std::optional<SmallVector<Operation *>> producers(Operation *op, Operation *first) {
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work(op->getOperands().begin(), op->getOperands().end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != first->getBlock() || def->isBeforeInBlock(first))
      continue; // a block argument or defined before the first
    if (def == first || !movesAlong(def))
      return std::nullopt;
    if (slice.insert(def))
      work.append(def->getOperands().begin(), def->getOperands().end());
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

struct ClusterCayleyPass : stringc::impl::ClusterCayleyBase<ClusterCayleyPass> {
  using ClusterCayleyBase::ClusterCayleyBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (!llvm::hasSingleElement(func.getBody()))
        return;
      SmallVector<pe::CayleyWeightOp> weights(func.getBody().front().getOps<pe::CayleyWeightOp>());
      // The run of each operand type: its first op and its last member.
      SmallVector<std::pair<Operation *, Operation *>> runs;
      for (pe::CayleyWeightOp weight : weights) {
        Operation *op = weight.getOperation();
        auto run = llvm::find_if(runs, [&](auto &r) {
          return r.first->getOperandTypes() == op->getOperandTypes() &&
                 r.first->getResultTypes() == op->getResultTypes();
        });
        if (run == runs.end()) {
          runs.push_back({op, op});
          continue;
        }
        std::optional<SmallVector<Operation *>> before = producers(op, run->first);
        if (!before)
          continue;
        for (Operation *p : *before)
          p->moveBefore(run->first);
        if (op->getPrevNode() != run->second) {
          op->moveAfter(run->second);
          ++numMoved;
          if (explain)
            stringc::reportRewrite(op, getArgument(),
                                   "moved next to the Cayley weight of another layer",
                                   stringc::estimateCost(op, 1), stringc::estimateCost(op, 1));
        }
        run->second = op;
      }
    });
  }
};

} // namespace
