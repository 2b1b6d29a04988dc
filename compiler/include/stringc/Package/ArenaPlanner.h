//===- ArenaPlanner.h - the memory plan of a package program ----*- C++ -*-===//
//
// The arena plan (docs/package.md, "The arena plan"): every intermediate
// value of a program (an f32 op result other than pe.get_param's, which is a
// view of the flat parameter buffer) gets a SLOT of one arena; two values
// whose liveness intervals overlap never share a slot. The batch size is
// symbolic, so a value's size is affine in it, a*B + c bytes at its stored
// type (a: the product of the other dimensions of a shape with -1 times the
// element's bytes, c = 0; a static shape: a = 0, c its bytes); 4 bytes an
// element, 2 for the values a cuda package stores in bf16. A slot's size is
// (max a, max c) over its members, which bounds every member for every
// B >= 1, so one plan is valid for every batch. The runtime lays the slots
// out back to back in one allocation, each rounded up to
// stringrt::kArenaSlotAlignment (16) bytes at the run's batch, so that every
// slot starts 16-byte aligned at every batch.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_TARGET_ARENAPLANNER_H
#define STRINGC_TARGET_ARENAPLANNER_H

#include "stringrt/Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace stringc {

/// The batch size the plan's figures (bytes) are reported at.
constexpr int64_t kArenaReportBatch = 128;

/// One value of a program as the planner sees it. `start` is the index of its
/// defining op; `end` the index of its last reading op (its defining op when
/// nothing reads it; the number of ops for a program output, which lives to
/// the end). Both inclusive: an op's results never share with its operands.
struct ArenaValue {
  bool planned = false; // false: a program input or a parameter view
  int64_t start = 0, end = 0;
  int64_t perBatch = 0, fixed = 0; // size in bytes: perBatch*B + fixed

  int64_t bytes(int64_t batch) const { return perBatch * batch + fixed; }
};

struct ArenaSlot {
  int64_t perBatch = 0, fixed = 0; // bytes
  int64_t bytes(int64_t batch) const { return perBatch * batch + fixed; }
};

struct ArenaPlan {
  std::vector<ArenaSlot> slots;
  std::vector<int64_t> valueSlot; // per value id; -1 for unplanned values

  /// The arena's bytes at `batch`: the slots back to back, each rounded up
  /// to stringrt::kArenaSlotAlignment bytes.
  int64_t arenaBytes(int64_t batch) const;
};

/// Greedy interval assignment: values in order of definition; a slot is
/// free again once its last member's interval has ended; a value takes the
/// free slot whose size grows least at kArenaReportBatch (ties: the smaller
/// slot), or a new slot when none is free.
ArenaPlan planArena(llvm::ArrayRef<ArenaValue> values);

/// The bytes at `batch` of every planned value together (no reuse, no
/// rounding).
int64_t noReuseBytes(llvm::ArrayRef<ArenaValue> values, int64_t batch);

/// Checks that `plan` is valid for `values`: every planned value has a slot
/// in range whose size bounds it, unplanned ones have -1, and no two values
/// of a slot have overlapping intervals. Returns the problem, or nullopt.
std::optional<std::string> verifyArenaPlan(llvm::ArrayRef<ArenaValue> values,
                                           const ArenaPlan &plan);

/// Ops that run at once (op indices of the block, first and last,
/// inclusive): the CUDA target's grouped GEMMs, one cuBLAS call for several
/// ops. Every value such an op reads or writes stays live from its start
/// to the range's last op, so that no op of the range writes where another
/// reads or writes.
using ConcurrentOps = std::vector<std::pair<int64_t, int64_t>>;

/// The values a program stores in another type than f32 (a cuda package's
/// bf16 values: stringrt::CudaProgramSteps::valueDTypes), by value id.
using StoredTypes = std::vector<std::pair<int64_t, stringrt::DType>>;

/// The planner's view of `func`'s single block, numbered as the package
/// writer numbers values (arguments, then op results in order), each sized
/// at its stored type (`stored`; f32 otherwise), with the intervals of
/// `concurrent` ranges' values extended to their last op.
std::vector<ArenaValue> arenaValues(mlir::func::FuncOp func,
                                    const ConcurrentOps &concurrent = {},
                                    const StoredTypes &stored = {});

/// The package's arena plan of `func` (docs/package.md, "The arena plan"),
/// with `concurrent` ranges of ops kept apart and values sized at their
/// `stored` types (arenaValues), into `arena`; the problem when
/// verifyArenaPlan finds one (an internal error).
std::optional<std::string> packageArena(mlir::func::FuncOp func, const ConcurrentOps &concurrent,
                                        stringrt::ProgramArena &arena,
                                        const StoredTypes &stored = {});

} // namespace stringc

#endif // STRINGC_TARGET_ARENAPLANNER_H
