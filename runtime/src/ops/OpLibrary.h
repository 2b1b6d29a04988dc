// The op library (docs/architecture.md, "The op library"): one file per
// forward op, `ops/<family>/<Op>.cpp` (the family as in the dialect's
// PE<Family>Ops.td, <Op> the forward op's OpCode), holding the op and its
// gradient ops side by side, each with
//   - its shape contract, written once: the argument checks every kernel of
//     the op runs first (shapes, attributes, index operands, with one set of
//     messages), and the executor runs before a compiled kernel, which
//     checks nothing itself (ExecutorCompiledOps.cpp);
//   - its reference kernel (the oracle; double accumulation);
//   - its fast kernel below it, where it has one (multi-threaded, float);
//   - its executor adapters and one registration, registerOps<OpCode::Op>.
// Tests run an op through its registration (runtime/tests/OpCall.h); the
// family's header (stringrt/ops/<Family>Ops.h) declares what others call. A fused
// op that is a composition of library ops has no reference kernel of its
// own: its composition is a row of Compositions.cpp, run by the generic
// runComposition (Compositions.h), and its op file, if it has one, holds its
// contract and its fast kernel.
//
// No op file is listed by hand: runtime/CMakeLists.txt lists the files of
// ops/*/ into OpLibraryFiles.inc (STRINGRT_OP_FILE(Op), one a file), and
// OpLibrary.cpp calls registerOps<OpCode::Op> for each. So a file whose name
// is not an op's fails to compile, an op file without its registration
// fails to link, and an op registered twice (by two files, or by a file and
// the executor's family tables) fails when the tables are built. Private to
// the runtime.
#pragma once

#include "execution/Executor.h"
#include "stringrt/OpCodes.h"

#include <array>

namespace stringrt::ops {

using detail::OpAdapter;
using detail::OpContext;

// One op's adapters. `reference` runs its reference kernel (KernelSet::
// Reference, and the other sets' fallback); null for a fused op that is a
// composition of library ops (Compositions.h), whose reference kernel is
// then the generic runComposition; `check` runs its shape contract alone
// (required for an op stringc generates kernels for, and run first by
// runComposition; null otherwise); `fast` runs its fast kernel in
// KernelSet::Fast and Compiled's fallback (null: the reference one runs
// there too).
struct OpKernels {
  OpAdapter reference = nullptr;
  OpAdapter check = nullptr;
  OpAdapter fast = nullptr;
};

// What the op files register into, indexed by op.
class OpRegistry {
public:
  // An op without a reference adapter gets runComposition (its
  // composition's). Throws Error for an op registered twice, for one with
  // neither a reference adapter nor a composition, and for one with both
  // (unless its composition says it keeps its own kernel).
  void add(OpCode code, const OpKernels &kernels);
  // Null when no op file registered `code`.
  const OpKernels *find(OpCode code) const;

private:
  std::array<OpKernels, kOpCodeCount> ops_{};
};

// Registers the op of `ops/<family>/<Op>.cpp` and its gradient ops; each op
// file defines the one of its own OpCode.
template <OpCode Op> void registerOps(OpRegistry &registry);

// Every op file's registrations, and each composition no op file
// registers (its reference kernel runComposition alone); built once, after
// checking every composition (checkComposition).
const OpRegistry &opLibrary();

} // namespace stringrt::ops
