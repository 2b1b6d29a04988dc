//===- ClusterCayley.cpp - the layers' Cayley weights next to each other --===//
//
// pe-cluster-cayley (a default pass of --target=cuda only; docs/passes.md):
// each pe.cayley_weight after the first of its operand type moves to just
// after the last one moved (the first when none yet), when the ops its
// operand needs that come after that first one are only skew builders
// (pe.skew, pe.sparse_skew), parameters and constants: those move to just
// before the first. A layer's S = skew(s) reads only its parameter, so the
// model's Cayley weights become one run, which the CUDA step program
// computes in one launch (compiler/lib/CudaGen/KernelGroups.h); and so do
// its skew builders, which now lie next to each other too. In the backward,
// each skew gradient (pe.skew_grad, pe.sparse_skew_grad) before the last of
// its kind (name, types and attributes) moves to just before that last one
// when no op before it reads its result: a layer's ds is done when its
// backward is, its dparams read only at the end, so the layers' skew
// gradients become one run, one launch too. Then each Cayley weight
// gradient (pe.cayley_weight_grad) likewise: its ds is read only by its
// layer's skew gradient, now at the end, so the layers' Cayley weight
// gradients become one run too, whose first launches (M from each W) are
// one launch. vit_string's folded weights (pe-fold-transform's W_Q U and
// W_K U: a weight-sized pe.linear without bias reading a Cayley weight) move
// next to each other the same way, after the Cayley weights, so that the
// layers' products are one grouped GEMM (CudaGen/GemmGroups.h); and their
// gradients, consumers first, sink to just before the last of their kind:
// the sums W_Q^T dW_Q' + W_K^T dW_K' that a Cayley weight gradient reads as
// dw, their products, then the parameters' gradients dW' U^T: one grouped
// GEMM each instead of a layer's. Pure reordering of side-effect-free ops:
// the numbers are unchanged.
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

/// Whether `a` and `b` are gradients of one kind (one launch can compute
/// both, or both first launches).
bool sameKind(Operation *a, Operation *b) {
  return a->getName() == b->getName() && a->getOperandTypes() == b->getOperandTypes() &&
         a->getResultTypes() == b->getResultTypes() &&
         a->getAttrDictionary() == b->getAttrDictionary();
}

/// Whether every operand and result of `op` is a tensor of static shape:
/// weights and their gradients, no batch dimension.
bool weightSized(Operation *op) {
  auto isStatic = [](Type t) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    return tensor && tensor.hasStaticShape();
  };
  return llvm::all_of(op->getOperandTypes(), isStatic) &&
         llvm::all_of(op->getResultTypes(), isStatic);
}

/// A folded weight (pe-fold-transform's W_Q U): a weight-sized pe.linear
/// without bias whose second operand is a Cayley weight.
bool foldProduct(Operation *op) {
  auto linear = dyn_cast<pe::LinearOp>(op);
  return linear && !linear.getB() && weightSized(op) &&
         linear->getOperand(1).getDefiningOp<pe::CayleyWeightOp>();
}

/// Whether every user of `op`'s results reads one as the `dw` of a Cayley
/// weight gradient, or is a weight-sized pe.add that does (so feeds one).
bool feedsCayleyWeightGrad(Operation *op) {
  if (op->use_empty())
    return false;
  return llvm::all_of(op->getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<pe::CayleyWeightGradOp>(user))
      return use.getOperandNumber() == 1;
    return isa<pe::AddOp>(user) && weightSized(user) && feedsCayleyWeightGrad(user);
  });
}

/// A folded weight's gradient: a weight-sized pe.linear_grad_input through a
/// Cayley weight (dW = dW' U^T, a parameter's gradient), a weight-sized
/// pe.linear_grad_weight feeding only Cayley weight gradients' dw (W^T dW'),
/// or a weight-sized pe.add of two such that does (the layer's sum of them).
bool foldGradient(Operation *op) {
  if (!weightSized(op))
    return false;
  if (isa<pe::LinearGradInputOp>(op))
    return op->getOperand(1).getDefiningOp<pe::CayleyWeightOp>() != nullptr;
  auto product = [](Value v) {
    Operation *def = v.getDefiningOp();
    return def && isa<pe::LinearGradWeightOp>(def) && weightSized(def);
  };
  if (isa<pe::AddOp>(op) && !llvm::all_of(op->getOperands(), product))
    return false;
  return isa<pe::LinearGradWeightOp, pe::AddOp>(op) && feedsCayleyWeightGrad(op);
}

/// Moves each op of `ops` (in block order) after the first of its operand
/// and result types to just after the last one moved (the first when none
/// yet), when the ops its operands need that come after that first one
/// may move along (movesAlong): those move to just before the first.
/// Returns the ops moved.
SmallVector<Operation *> clusterAfterFirst(ArrayRef<Operation *> ops) {
  // The run of each operand type: its first op and its last member.
  SmallVector<std::pair<Operation *, Operation *>> runs;
  SmallVector<Operation *> moved;
  for (Operation *op : ops) {
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
      moved.push_back(op);
    }
    run->second = op;
  }
  return moved;
}

/// Moves each op of `block` of kinds `Ops` (and, when given, for which
/// `only` holds) to just before the last of its kind when every user of its
/// results comes after that last one; returns the ops moved.
template <typename... Ops>
SmallVector<Operation *> sinkToLastOfKind(Block &block,
                                          llvm::function_ref<bool(Operation *)> only = nullptr) {
  SmallVector<Operation *> grads;
  for (Operation &op : block)
    if (isa<Ops...>(op) && (!only || only(&op)))
      grads.push_back(&op);
  SmallVector<Operation *> moved;
  for (size_t g = 0; g < grads.size(); ++g) {
    Operation *op = grads[g], *last = nullptr;
    for (size_t h = g + 1; h < grads.size(); ++h)
      if (sameKind(op, grads[h]))
        last = grads[h];
    if (!last || op->getNextNode() == last)
      continue;
    bool usersAfter = llvm::all_of(op->getUsers(), [&](Operation *user) {
      Operation *inBlock = block.findAncestorOpInBlock(*user);
      return inBlock && last->isBeforeInBlock(inBlock);
    });
    if (!usersAfter)
      continue;
    op->moveBefore(last);
    moved.push_back(op);
  }
  return moved;
}

struct ClusterCayleyPass : stringc::impl::ClusterCayleyBase<ClusterCayleyPass> {
  using ClusterCayleyBase::ClusterCayleyBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (!llvm::hasSingleElement(func.getBody()))
        return;
      Block &block = func.getBody().front();
      SmallVector<Operation *> weights, products;
      for (Operation &op : block)
        if (isa<pe::CayleyWeightOp>(op))
          weights.push_back(&op);
      for (Operation *op : clusterAfterFirst(weights)) {
        ++numMoved;
        if (explain)
          stringc::reportRewrite(op, getArgument(),
                                 "moved next to the Cayley weight of another layer",
                                 stringc::estimateCost(op, 1), stringc::estimateCost(op, 1));
      }
      // Then the folded weights (W_Q U, W_K U): each reads a Cayley weight,
      // now all at the first, and a parameter.
      for (Operation &op : block)
        if (foldProduct(&op))
          products.push_back(&op);
      for (Operation *op : clusterAfterFirst(products)) {
        ++numMovedProducts;
        if (explain)
          stringc::reportRewrite(op, getArgument(),
                                 "moved next to the folded weight of another layer",
                                 stringc::estimateCost(op, 1), stringc::estimateCost(op, 1));
      }
      // The skew gradients first: a Cayley weight gradient's result is read
      // by its layer's skew gradient, which then lies past the last one.
      for (Operation *op : sinkToLastOfKind<pe::SkewGradOp, pe::SparseSkewGradOp>(block)) {
        ++numMovedGrads;
        if (explain)
          stringc::reportRewrite(op, getArgument(),
                                 "moved next to the skew gradient of another layer",
                                 stringc::estimateCost(op, 1), stringc::estimateCost(op, 1));
      }
      for (Operation *op : sinkToLastOfKind<pe::CayleyWeightGradOp>(block)) {
        ++numMovedWeightGrads;
        if (explain)
          stringc::reportRewrite(op, getArgument(),
                                 "moved next to the Cayley weight gradient of another layer",
                                 stringc::estimateCost(op, 1), stringc::estimateCost(op, 1));
      }
      // Then the folded weights' gradients, consumers first: the sums of a
      // layer's two products' gradients of U (read by its Cayley weight
      // gradient, now at the end), the products W^T dW' they sum, and the
      // parameters' gradients dW' U^T (read after the backward).
      auto sinkFoldGradients = [&](auto kind) {
        using Op = decltype(kind);
        for (Operation *op : sinkToLastOfKind<Op>(block, foldGradient)) {
          ++numMovedFoldGrads;
          if (explain)
            stringc::reportRewrite(op, getArgument(),
                                   "moved next to the folded weight gradient of another layer",
                                   stringc::estimateCost(op, 1), stringc::estimateCost(op, 1));
        }
      };
      sinkFoldGradients(pe::AddOp());
      sinkFoldGradients(pe::LinearGradWeightOp());
      sinkFoldGradients(pe::LinearGradInputOp());
    });
  }
};

} // namespace
