//===- GroupRuns.cpp - runs of ops one call computes ----------------------===//
//
// GroupRuns.h.
//
//===----------------------------------------------------------------------===//
#include "GroupRuns.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace stringc::cudagen {

int64_t markRuns(func::FuncOp func, const std::vector<Operation *> &ops, const RunRule &rule) {
  Block &block = func.getBody().front();
  // How many non-free ops precede each op: two covered ops are adjacent
  // when no non-free op lies between them.
  llvm::DenseMap<Operation *, int64_t> nonFreeBefore;
  int64_t nonFree = 0;
  for (Operation &op : block.without_terminator()) {
    nonFreeBefore[&op] = nonFree;
    if (!isa<pe::GetParamOp, arith::ConstantOp>(op))
      ++nonFree;
  }
  int64_t runs = 0;
  for (size_t first = 0; first < ops.size();) {
    if (!rule.leads(first)) {
      ++first;
      continue;
    }
    size_t end = first + 1;
    while (end < ops.size() && nonFreeBefore[ops[end]] == nonFreeBefore[ops[end - 1]] + 1 &&
           rule.joins(end))
      ++end;
    if (end - first >= 2 && rule.mark(first, end))
      ++runs;
    first = end;
  }
  return runs;
}

ConcurrentOps groupRanges(const std::vector<OpSteps> &steps,
                          llvm::function_ref<int64_t(const OpSteps &)> size) {
  ConcurrentOps ranges;
  for (size_t s = 0; s < steps.size(); ++s)
    if (int64_t n = size(steps[s]); n > 1) {
      size_t last = s + size_t(n) - 1;
      ranges.push_back({steps[s].op, steps[last].op});
      s = last;
    }
  return ranges;
}

} // namespace stringc::cudagen
