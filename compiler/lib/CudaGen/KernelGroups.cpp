//===- KernelGroups.cpp - runs of ops one kernel launch computes ----------===//
//
// KernelGroups.h. The decision is the compiler's; the package's arena plan
// keeps a group's values apart (kernelGroupRanges, ArenaPlanner.h's
// ConcurrentOps) and the package loader checks the members by value id
// (CudaSectionSteps.cpp, checkKernelGroups).
//
//===----------------------------------------------------------------------===//
#include "KernelGroups.h"
#include "GroupRuns.h"

#include "stringrt/cuda/StepBinding.h"

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

/// Whether `g` and `h` are one GEMM but for the group: shape, transposes,
/// alpha, beta, count, arguments (kind and index), epilogue and addend.
bool sameGemm(const GemmCall &g, const GemmCall &h) {
  auto same = [](const LaunchArg &a, const LaunchArg &b) {
    return a.kind == b.kind && a.index == b.index;
  };
  return g.m == h.m && g.n == h.n && g.k == h.k && g.transA == h.transA &&
         g.transB == h.transB && g.alpha == h.alpha && g.beta == h.beta && g.count == h.count &&
         same(g.a, h.a) && same(g.b, h.b) && same(g.c, h.c) && g.epilogue == h.epilogue &&
         g.addend.has_value() == h.addend.has_value() &&
         (!g.addend || same(*g.addend, *h.addend));
}

/// In a group of first launches `steps[first, end)` (scratch placed apart),
/// marks each later launch l that is, in every member, one plain GEMM (count
/// 1, no epilogue, no addend, not grouped) like the first member's, as a
/// grouped GEMM of the group's size on the first member (GemmCall::
/// groupSize): one cublasGemmBatchedEx over the members' launch l, which the
/// runtime then skips in each member. The members read no earlier member's
/// result (groupKernels) and their scratch lies apart, so each member's
/// launch l reads what its own earlier launches wrote, as it would at its
/// own place.
void groupLaterGemms(std::vector<OpSteps> &steps, size_t first, size_t end) {
  std::vector<Launch> &leader = steps[first].launches;
  for (size_t l = 1; l < leader.size(); ++l) {
    if (!leader[l].gemm)
      continue;
    const GemmCall &g0 = *leader[l].gemm;
    if (!(g0.count == BatchAffine::fixed(1)) || g0.epilogue != GemmEpilogue::None ||
        g0.addend || g0.groupSize != 1)
      continue;
    bool all = true;
    for (size_t m = first + 1; m < end && all; ++m) {
      const Launch &own = steps[m].launches[l];
      all = own.gemm && own.gemm->groupSize == 1 && sameGemm(*own.gemm, g0);
    }
    if (all)
      leader[l].gemm->groupSize = int64_t(end - first);
  }
}

} // namespace

int64_t groupKernels(func::FuncOp func, const std::vector<Operation *> &ops,
                     std::vector<OpSteps> &steps) {
  // The run being formed: its first op, whether it is a group of first
  // launches (the op has more: its members' scratch laid out apart, sizes
  // fixed), the results its members write.
  size_t leaderIndex = 0;
  bool firstLaunches = false;
  llvm::DenseSet<Value> written;
  auto leads = [&](size_t first) {
    const OpSteps &own = steps[first];
    firstLaunches = own.launches.size() > 1;
    if (own.launches.empty() || (firstLaunches && !fixedScratch(own)) ||
        !cayleyGroupLaunch(*ops[first], own.launches[0], 2))
      return false;
    leaderIndex = first;
    written.clear();
    written.insert(ops[first]->getResults().begin(), ops[first]->getResults().end());
    return true;
  };
  auto joinsRun = [&](size_t o) {
    Operation &op = *ops[o];
    if (!joins(op, steps[o], *ops[leaderIndex], steps[leaderIndex], written) ||
        (firstLaunches && !fixedScratch(steps[o])))
      return false;
    written.insert(op.getResults().begin(), op.getResults().end());
    return true;
  };
  auto mark = [&](size_t first, size_t end) {
    std::optional<Launch> launch =
        cayleyGroupLaunch(*ops[first], steps[first].launches[0], int64_t(end - first));
    if (!launch)
      return false;
    if (!firstLaunches) {
      steps[first].launches = {std::move(*launch)};
      steps[first].scratchBytes.clear();
    } else {
      steps[first].launches[0] = std::move(*launch);
      placeScratchApart(steps, first, end);
      groupLaterGemms(steps, first, end);
    }
    return true;
  };
  return markRuns(func, ops, {leads, joinsRun, mark});
}

ConcurrentOps kernelGroupRanges(const std::vector<OpSteps> &steps) {
  return groupRanges(steps, [](const OpSteps &s) -> int64_t {
    return s.launches.empty() ? 1 : s.launches[0].groupSize;
  });
}

} // namespace stringc::cudagen
