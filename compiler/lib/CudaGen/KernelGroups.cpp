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
#include "stringrt/cuda/StepBinding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

/// Whether `op`, with steps `steps`, may join a group led by `leader`,
/// whose own steps are `own`: the same op name, types and attributes, as
/// many launches, the first of the same kernel with the same constants (a
/// sparse support), reading no result of the members before it (`written`).
bool joins(Operation &op, const OpSteps &steps, Operation &leader, const OpSteps &own,
           const llvm::DenseSet<Value> &written) {
  if (op.getName() != leader.getName() || op.getOperandTypes() != leader.getOperandTypes() ||
      op.getResultTypes() != leader.getResultTypes() ||
      op.getAttrDictionary() != leader.getAttrDictionary() ||
      steps.launches.size() != own.launches.size() || steps.launches[0].groupSize != 1 ||
      steps.launches[0].kernel != own.launches[0].kernel)
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

/// Whether every scratch buffer of `steps` has a size independent of the
/// batch (what placeScratchApart can lay out).
bool fixedScratch(const OpSteps &steps) {
  return llvm::all_of(steps.scratchBytes,
                      [](const BatchAffine &b) { return b.perBatch == 0 && b.constant >= 0; });
}

/// The bytes the runtime's layout of `steps`' scratch takes (each buffer
/// at a multiple of stringrt::cuda::kDeviceAlignment; fixedScratch).
int64_t scratchLayoutBytes(const OpSteps &steps) {
  constexpr int64_t align = int64_t(stringrt::cuda::kDeviceAlignment);
  int64_t bytes = 0;
  for (const BatchAffine &b : steps.scratchBytes)
    bytes += (b.constant + align - 1) / align * align;
  return bytes;
}

/// Renumbers `arg` when it names a scratch buffer: one more in front.
void shiftScratch(LaunchArg &arg) {
  if (arg.kind == LaunchArgKind::Scratch)
    ++arg.index;
}

/// The members `steps[first, end)` of a group of first launches: each
/// member's scratch buffers get a new buffer 0 in front, as large as the
/// members' before it take (0 for the first), so that no two members'
/// buffers meet in the runtime's scratch memory, which every op's layout
/// starts at: the group's launch writes every member's scratch before the
/// members' own launches read it.
void placeScratchApart(std::vector<OpSteps> &steps, size_t first, size_t end) {
  int64_t before = 0;
  for (size_t m = first; m < end; ++m) {
    OpSteps &member = steps[m];
    member.scratchBytes.insert(member.scratchBytes.begin(), BatchAffine::fixed(before));
    for (Launch &launch : member.launches) {
      for (LaunchArg &arg : launch.args)
        shiftScratch(arg);
      for (LaunchArg &arg : launch.groupArgs)
        shiftScratch(arg);
      if (launch.gemm) {
        for (LaunchArg *arg : {&launch.gemm->a, &launch.gemm->b, &launch.gemm->c})
          shiftScratch(*arg);
        if (launch.gemm->addend)
          shiftScratch(*launch.gemm->addend);
        if (launch.gemm->epilogue == GemmEpilogue::Bias)
          shiftScratch(launch.gemm->bias);
      }
    }
    before = scratchLayoutBytes(member);
  }
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
    // A group of first launches (the op has more) needs its members'
    // scratch laid out apart: sizes fixed.
    bool firstLaunches = own.launches.size() > 1;
    if (own.launches.empty() || (firstLaunches && !fixedScratch(own)) ||
        !cayleyGroupLaunch(leader, own.launches[0], 2)) {
      ++first;
      continue;
    }
    llvm::DenseSet<Value> written(leader.getResults().begin(), leader.getResults().end());
    size_t end = first + 1;
    for (; end < ops.size(); ++end) {
      Operation &op = *ops[end];
      if (nonFreeBefore[&op] != nonFreeBefore[ops[end - 1]] + 1 ||
          !joins(op, steps[end], leader, own, written) ||
          (firstLaunches && !fixedScratch(steps[end])))
        break;
      written.insert(op.getResults().begin(), op.getResults().end());
    }
    std::optional<Launch> launch;
    if (end - first >= 2)
      launch = cayleyGroupLaunch(leader, own.launches[0], int64_t(end - first));
    if (launch && !firstLaunches) {
      steps[first].launches = {std::move(*launch)};
      steps[first].scratchBytes.clear();
      ++groups;
    } else if (launch) {
      steps[first].launches[0] = std::move(*launch);
      placeScratchApart(steps, first, end);
      ++groups;
    }
    first = end;
  }
  return groups;
}

ConcurrentOps kernelGroupRanges(const std::vector<OpSteps> &steps) {
  ConcurrentOps ranges;
  for (size_t s = 0; s < steps.size(); ++s)
    if (!steps[s].launches.empty() && steps[s].launches[0].groupSize > 1) {
      size_t last = s + size_t(steps[s].launches[0].groupSize) - 1;
      ranges.push_back({steps[s].op, steps[last].op});
      s = last;
    }
  return ranges;
}

} // namespace stringc::cudagen
