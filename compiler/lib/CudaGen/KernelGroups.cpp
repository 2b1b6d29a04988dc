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

/// Whether `op`, with steps `steps`, may join a group led by `leader`,
/// whose own steps are `own`: the same op name, types and attributes, one
/// launch of the same kernel with the same constants (a sparse support),
/// reading no result of the members before it (`written`).
bool joins(Operation &op, const OpSteps &steps, Operation &leader, const OpSteps &own,
           const llvm::DenseSet<Value> &written) {
  if (op.getName() != leader.getName() || op.getOperandTypes() != leader.getOperandTypes() ||
      op.getResultTypes() != leader.getResultTypes() ||
      op.getAttrDictionary() != leader.getAttrDictionary() || steps.launches.size() != 1 ||
      steps.launches[0].groupSize != 1 || steps.launches[0].kernel != own.launches[0].kernel)
    return false;
  const std::vector<LaunchArg> &args = steps.launches[0].args, &ownArgs = own.launches[0].args;
  if (args.size() != ownArgs.size())
    return false;
  for (size_t a = 0; a < args.size(); ++a)
    if (args[a].kind == LaunchArgKind::Constant &&
        (ownArgs[a].kind != LaunchArgKind::Constant || ownArgs[a].index != args[a].index))
      return false;
  return llvm::none_of(op.getOperands(), [&](Value v) { return written.count(v); });
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
    const OpSteps &own = steps[first];
    if (own.launches.size() != 1 || !cayleyGroupLaunch(leader, own.launches[0], 2)) {
      ++first;
      continue;
    }
    llvm::DenseSet<Value> written(leader.getResults().begin(), leader.getResults().end());
    size_t end = first + 1;
    for (; end < ops.size(); ++end) {
      Operation &op = *ops[end];
      if (nonFreeBefore[&op] != nonFreeBefore[ops[end - 1]] + 1 ||
          !joins(op, steps[end], leader, own, written))
        break;
      written.insert(op.getResults().begin(), op.getResults().end());
    }
    std::optional<Launch> launch;
    if (end - first >= 2)
      launch = cayleyGroupLaunch(leader, own.launches[0], int64_t(end - first));
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
