//===- GemmGroups.cpp - runs of GEMMs one cuBLAS call computes ------------===//
//
// GemmGroups.h. The decision is the compiler's; the package's arena plan
// keeps a group's values apart (gemmGroupRanges, ArenaPlanner.h's
// ConcurrentOps), the package loader checks the same rules by value id
// (CudaSectionSteps.cpp, checkGemmGroups) and the runtime refuses a group
// whose bound matrices overlap (StepBinding.h, checkGemmGroup).
//
//===----------------------------------------------------------------------===//
#include "GemmGroups.h"
#include "GroupRuns.h"

#include <array>
#include <set>

using namespace mlir;

namespace stringc::cudagen {
namespace {

/// The GEMM of steps that are one GEMM launch alone, of the form a group can
/// hold; else null.
const GemmCall *groupable(const OpSteps &steps) {
  if (steps.launches.size() != 1 || !steps.launches[0].gemm || !steps.scratchBytes.empty())
    return nullptr;
  const GemmCall &g = *steps.launches[0].gemm;
  if (!(g.count == BatchAffine::fixed(1)) || g.epilogue != GemmEpilogue::None || g.addend ||
      g.a.kind != LaunchArgKind::Operand || g.b.kind != LaunchArgKind::Operand ||
      g.c.kind != LaunchArgKind::Result)
    return nullptr;
  return &g;
}

bool sameShape(const GemmCall &a, const GemmCall &b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.transA == b.transA &&
         a.transB == b.transB && a.alpha == b.alpha && a.beta == b.beta;
}

} // namespace

int64_t groupGemms(func::FuncOp func, const std::vector<Operation *> &ops,
                   std::vector<OpSteps> &steps, const llvm::DenseMap<Value, int64_t> &ids,
                   const std::vector<bool> &bf16) {
  struct Matrices {
    int64_t a, b, c;
  };
  auto matrices = [&](size_t o, const GemmCall &g) {
    Operation &op = *ops[o];
    return Matrices{ids.lookup(op.getOperand(unsigned(g.a.index))),
                    ids.lookup(op.getOperand(unsigned(g.b.index))),
                    ids.lookup(op.getResult(unsigned(g.c.index)))};
  };
  auto typeKey = [&](const Matrices &m) {
    return std::array<bool, 3>{bf16[size_t(m.a)], bf16[size_t(m.b)], bf16[size_t(m.c)]};
  };

  // The run being formed: its first GEMM, that GEMM's matrices and the
  // values its members write.
  const GemmCall *leader = nullptr;
  Matrices m0{};
  std::set<int64_t> written;
  auto leads = [&](size_t first) {
    leader = groupable(steps[first]);
    if (!leader)
      return false;
    m0 = matrices(first, *leader);
    written = {m0.c};
    return true;
  };
  auto joins = [&](size_t o) {
    const GemmCall *g = groupable(steps[o]);
    if (!g || !sameShape(*g, *leader))
      return false;
    Matrices m = matrices(o, *g);
    if (typeKey(m) != typeKey(m0) || written.count(m.a) || written.count(m.b) ||
        written.count(m.c))
      return false;
    written.insert(m.c);
    return true;
  };
  auto mark = [&](size_t first, size_t end) {
    steps[first].launches[0].gemm->groupSize = int64_t(end - first);
    return true;
  };
  return markRuns(func, ops, {leads, joins, mark});
}

ConcurrentOps gemmGroupRanges(const std::vector<OpSteps> &steps) {
  return groupRanges(steps, [](const OpSteps &s) -> int64_t {
    return s.launches.size() == 1 && s.launches[0].gemm ? s.launches[0].gemm->groupSize : 1;
  });
}

} // namespace stringc::cudagen
