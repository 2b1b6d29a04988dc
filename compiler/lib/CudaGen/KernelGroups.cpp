//===- KernelGroups.cpp - runs of ops one kernel launch computes ----------===//
//
// KernelGroups.h. The decision is the compiler's; the package's arena plan
// keeps a group's values apart (kernelGroupRanges, ArenaPlanner.h's
// ConcurrentOps) and the package loader checks the members by value id
// (CudaSectionSteps.cpp, checkKernelGroups).
//
//===----------------------------------------------------------------------===//
#include "KernelGroups.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

/// Whether `op`'s steps are the lowering's own factor launch, which a group
/// can take over.
bool groupable(Operation &op, const OpSteps &steps) {
  return isa<pe::CayleyWeightOp>(op) && steps.launches.size() == 1 &&
         steps.launches[0].kernel == "pe_cayley_factors" && steps.launches[0].groupSize == 1;
}

} // namespace

int64_t groupKernels(func::FuncOp func, const std::vector<Operation *> &ops,
                     std::vector<OpSteps> &steps) {
  Block &block = func.getBody().front();
  // Two covered ops are adjacent when no non-free op lies between them.
  llvm::DenseMap<Operation *, int64_t> nonFreeBefore;
  int64_t nonFree = 0;
  for (Operation &op : block.without_terminator()) {
    nonFreeBefore[&op] = nonFree;
    if (!isa<pe::GetParamOp, arith::ConstantOp>(op))
      ++nonFree;
  }
  int64_t groups = 0;
  for (size_t first = 0; first < ops.size();) {
    Operation &leader = *ops[first];
    if (!groupable(leader, steps[first])) {
      ++first;
      continue;
    }
    llvm::DenseSet<Value> written{leader.getResult(0)};
    size_t end = first + 1;
    for (; end < ops.size(); ++end) {
      Operation &op = *ops[end];
      if (nonFreeBefore[&op] != nonFreeBefore[ops[end - 1]] + 1 || !groupable(op, steps[end]) ||
          op.getOperandTypes() != leader.getOperandTypes() ||
          op.getResultTypes() != leader.getResultTypes() || written.count(op.getOperand(0)))
        break;
      written.insert(op.getResult(0));
    }
    std::optional<Launch> launch;
    if (end - first >= 2)
      launch = cayleyWeightsGroupLaunch(leader, int64_t(end - first));
    if (launch) {
      steps[first].launches = {std::move(*launch)};
      steps[first].scratchBytes.clear();
      ++groups;
    }
    first = end;
  }
  return groups;
}

ConcurrentOps kernelGroupRanges(const std::vector<OpSteps> &steps) {
  ConcurrentOps ranges;
  for (size_t s = 0; s < steps.size(); ++s)
    if (steps[s].launches.size() == 1 && steps[s].launches[0].groupSize > 1) {
      size_t last = s + size_t(steps[s].launches[0].groupSize) - 1;
      ranges.push_back({steps[s].op, steps[last].op});
      s = last;
    }
  return ranges;
}

} // namespace stringc::cudagen
