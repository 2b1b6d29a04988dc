//===- Explain.h - what a rewrite did, for `stringc --explain` ---*- C++ -*-===//
//
// Every rewrite pass reports each rewrite that fires through reportRewrite
// when its `explain` option is set. The report is an MLIR remark on the
// anchor op (so it carries the .pe source location) in one fixed format:
//
//   remark: [pe-fold-transform] folded the Cayley transform into W_Q
//           (forward per example: 1.2 MFLOP, 48 KB -> 0.3 MFLOP, 16 KB)
//
// The cost is the forward cost, per example (batch 1), of the ops the
// rewrite removed against the ops it created (estimateCost). A pass that
// explains why it did NOT rewrite a match tags its remark
// "[pe-x: not applied] ..." so that --pass-statistics, which counts the
// "[pe-x] ..." remarks, does not count it.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_EXPLAIN_H
#define STRINGC_TRANSFORMS_EXPLAIN_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace stringc {

/// Arithmetic and memory traffic of some ops.
struct OpCost {
  double flops = 0; // floating-point operations (a multiply-add counts 2)
  double bytes = 0; // bytes read and written (operands + results, f32)

  OpCost &operator+=(const OpCost &other) {
    flops += other.flops;
    bytes += other.bytes;
    return *this;
  }
};

/// The cost of running `op` once with the symbolic batch dimension (the `?`
/// in tensor<?x...>) set to `batch`. Ops with regions or of other dialects
/// cost their operand and result traffic only.
OpCost estimateCost(mlir::Operation *op, int64_t batch);
OpCost estimateCost(llvm::ArrayRef<mlir::Operation *> ops, int64_t batch);
/// The cost of every op in `func` (one call of it).
OpCost estimateFunctionCost(mlir::Operation *func, int64_t batch);

/// "1.20 MFLOP", "48.0 KB": the figures as --explain prints them.
std::string formatCost(const OpCost &cost);

/// Emits the explain remark for one rewrite on `anchor` (see the file
/// comment). `before` and `after` are per-example forward costs; compute
/// `before` from the matched ops before rewriting them.
void reportRewrite(mlir::Operation *anchor, llvm::StringRef pass, llvm::StringRef what,
                   const OpCost &before, const OpCost &after);

} // namespace stringc

#endif // STRINGC_TRANSFORMS_EXPLAIN_H
