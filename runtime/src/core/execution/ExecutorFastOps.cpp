// Executor adapters of the ops that have a fast CPU kernel
// (stringrt/cpu/FastKernels.h), for KernelSet::Fast: each reads the op's
// attributes exactly as its reference adapter does (ExecutorPositionOps.cpp)
// and calls the fast kernel of the same name, which has the reference
// kernel's shapes and semantics.
// Every other op keeps its reference adapter; the ops of the op library
// (runtime/src/ops) register their fast adapters themselves.
#include "execution/Executor.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/FastKernels.h"

namespace stringrt::detail {
namespace {

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

void runApplyRotation(const OpContext &c) {
  cpu::applyRotation(c.in(0), c.in(1), c.op().getInt("heads"), c.out(0));
}

void runApplyRotationGrad(const OpContext &c) {
  cpu::applyRotationGrad(c.in(0), c.in(1), c.in(2), c.op().getInt("heads"), c.out(0),
                         c.out(1));
}

} // namespace

void addFastOps(OpTable &table) {
  const std::pair<OpCode, OpAdapter> fast[] = {
      {OpCode::ApplyRotation, runApplyRotation},
      {OpCode::ApplyRotationGrad, runApplyRotationGrad},
  };
  for (const auto &[code, run] : fast) {
    if (!table.find(code)) // a fast adapter must override a reference one
      throw Error(std::string("executor: fast adapter for '") + opName(code) +
                  "', which has no reference adapter");
    table[code].run = run;
  }
}

} // namespace stringrt::detail
