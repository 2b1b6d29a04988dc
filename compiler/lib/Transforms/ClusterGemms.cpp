//===- ClusterGemms.cpp - twin dense-layer GEMMs next to each other -------===//
//
// pe-cluster-gemms (a default pass of --target=cuda only; docs/passes.md):
// moves a pe.linear without bias, pe.linear_grad_input or
// pe.linear_grad_weight next to a TWIN, an op of the same name, attributes,
// operand and result types that reads one of the same values (the Q, K and V
// projections read one activation, their weight gradients too; vit_cayley's
// two products with U read U):
//   - up, to just after the nearest earlier twin, when each of its operands
//     is defined before that twin (in program order);
//   - else down, to just before the nearest later twin, when none of its
//     results is used before or by that twin.
// Pure reordering of side-effect-free ops: the numbers are unchanged. The
// CUDA step program runs a run of such ops as one cuBLAS call
// (compiler/lib/CudaGen/GemmGroups.h).
//
//===----------------------------------------------------------------------===//

#include "stringc/Transforms/Passes.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "pe-cluster-gemms"

namespace stringc {
#define GEN_PASS_DEF_CLUSTERGEMMS
#include "stringc/Transforms/Passes.h.inc"
} // namespace stringc

using namespace mlir;

namespace {

/// The ops the pass moves: the dense layers' GEMMs with nothing fused in.
bool isGemmOp(Operation *op) {
  if (auto linear = dyn_cast<pe::LinearOp>(op))
    return !linear.getB();
  return isa<pe::LinearGradInputOp, pe::LinearGradWeightOp>(op);
}

/// Same op, attributes and types, and some operand value in common.
bool twins(Operation *a, Operation *b) {
  if (a == b || a->getName() != b->getName() || a->getAttrDictionary() != b->getAttrDictionary() ||
      a->getOperandTypes() != b->getOperandTypes() || a->getResultTypes() != b->getResultTypes())
    return false;
  for (Value x : a->getOperands())
    if (llvm::is_contained(b->getOperands(), x))
      return true;
  return false;
}

bool isFree(Operation *op) { return isa<pe::GetParamOp, arith::ConstantOp>(op); }

/// The nearest op before (`up`) or after `op` in its block that is not free.
Operation *neighbour(Operation *op, bool up) {
  for (Operation *at = up ? op->getPrevNode() : op->getNextNode(); at;
       at = up ? at->getPrevNode() : at->getNextNode())
    if (!isFree(at))
      return at;
  return nullptr;
}

/// Whether `value` is defined before `op` in `op`'s block (a block argument
/// or an op of the block before it).
bool definedBefore(Value value, Operation *op) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return value.getParentBlock() == op->getBlock();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

/// Moves `op` up next to its nearest earlier twin; true when it moved.
bool hoist(Operation *op) {
  for (Operation *at = op->getPrevNode(); at; at = at->getPrevNode()) {
    if (!isGemmOp(at) || !twins(at, op))
      continue;
    if (!llvm::all_of(op->getOperands(), [&](Value v) { return definedBefore(v, at); }))
      return false;
    if (neighbour(op, /*up=*/true) == at)
      return false; // only free ops between: already together
    op->moveAfter(at);
    return true;
  }
  return false;
}

/// Moves `op` down next to its nearest later twin; true when it moved.
bool sink(Operation *op) {
  for (Operation *at = op->getNextNode(); at; at = at->getNextNode()) {
    if (!isGemmOp(at) || !twins(at, op))
      continue;
    for (Operation *user : op->getUsers()) {
      Operation *inBlock = op->getBlock()->findAncestorOpInBlock(*user);
      if (!inBlock || inBlock == at || inBlock->isBeforeInBlock(at))
        return false;
    }
    if (neighbour(op, /*up=*/false) == at)
      return false;
    op->moveBefore(at);
    return true;
  }
  return false;
}

struct ClusterGemmsPass : stringc::impl::ClusterGemmsBase<ClusterGemmsPass> {
  using ClusterGemmsBase::ClusterGemmsBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (!llvm::hasSingleElement(func.getBody()))
        return;
      Block &block = func.getBody().front();
      auto gemms = [&] {
        SmallVector<Operation *> list;
        for (Operation &op : block)
          if (isGemmOp(&op))
            list.push_back(&op);
        return list;
      };
      auto report = [&](Operation *op, StringRef what) {
        if (explain)
          stringc::reportRewrite(op, getArgument(), what, stringc::estimateCost(op, 1),
                                 stringc::estimateCost(op, 1));
      };
      for (Operation *op : gemms())
        if (hoist(op)) {
          ++numHoisted;
          report(op, "moved up next to a GEMM of the same shape reading the same value");
        }
      // Down, last first, the ops not yet beside a twin.
      SmallVector<Operation *> rest = gemms();
      for (Operation *op : llvm::reverse(rest)) {
        Operation *before = neighbour(op, true), *after = neighbour(op, false);
        if ((before && isGemmOp(before) && twins(before, op)) ||
            (after && isGemmOp(after) && twins(after, op)))
          continue;
        if (sink(op)) {
          ++numSunk;
          report(op, "moved down next to a GEMM of the same shape reading the same value");
        }
      }
    });
  }
};

} // namespace
