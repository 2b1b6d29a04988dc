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

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

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
  Block &block = func.getBody().front();
  // Each op's position in the block and how many non-free ops precede it:
  // two covered ops are adjacent when no non-free op lies between them.
  llvm::DenseMap<Operation *, int64_t> nonFreeBefore;
  int64_t nonFree = 0;
  for (Operation &op : block.without_terminator()) {
    nonFreeBefore[&op] = nonFree;
    if (!isa<pe::GetParamOp, arith::ConstantOp>(op))
      ++nonFree;
  }
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

  int64_t groups = 0;
  for (size_t first = 0; first < ops.size();) {
    const GemmCall *leader = groupable(steps[first]);
    if (!leader) {
      ++first;
      continue;
    }
    Matrices m0 = matrices(first, *leader);
    std::set<int64_t> written{m0.c};
    size_t end = first + 1;
    for (; end < ops.size(); ++end) {
      if (nonFreeBefore[ops[end]] != nonFreeBefore[ops[end - 1]] + 1)
        break; // a non-free op (uncovered) lies between
      const GemmCall *g = groupable(steps[end]);
      if (!g || !sameShape(*g, *leader))
        break;
      Matrices m = matrices(end, *g);
      if (typeKey(m) != typeKey(m0) || written.count(m.a) || written.count(m.b) ||
          written.count(m.c))
        break;
      written.insert(m.c);
    }
    if (end - first >= 2) {
      steps[first].launches[0].gemm->groupSize = int64_t(end - first);
      ++groups;
    }
    first = end;
  }
  return groups;
}

ConcurrentOps gemmGroupRanges(const std::vector<OpSteps> &steps) {
  ConcurrentOps ranges;
  for (size_t s = 0; s < steps.size(); ++s)
    if (steps[s].launches.size() == 1 && steps[s].launches[0].gemm &&
        steps[s].launches[0].gemm->groupSize > 1) {
      size_t last = s + size_t(steps[s].launches[0].gemm->groupSize) - 1;
      ranges.push_back({steps[s].op, steps[last].op});
      s = last;
    }
  return ranges;
}

} // namespace stringc::cudagen
