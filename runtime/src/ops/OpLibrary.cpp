// The op library's registry and its entry in the executor's tables
// (OpLibrary.h).
#include "OpLibrary.h"

#include "Compositions.h"

#include "stringrt/Error.h"

#include <string>

namespace stringrt::ops {

// The op files, as the build lists them (runtime/CMakeLists.txt).
#define STRINGRT_OP_FILE(Op) template <> void registerOps<OpCode::Op>(OpRegistry &);
#include "OpLibraryFiles.inc"
#undef STRINGRT_OP_FILE

void OpRegistry::add(OpCode code, const OpKernels &kernels) {
  OpKernels &entry = ops_[static_cast<size_t>(code)];
  const std::string op = std::string("op library: '") + opName(code) + "'";
  if (entry.reference)
    throw Error(op + " is registered twice");
  const Composition *composition = findComposition(code);
  const bool composed = composition && !composition->ownReferenceKernel;
  if (!kernels.reference && !composed)
    throw Error(op + (composition ? " has no reference kernel, which its composition says it keeps"
                                  : " has neither a reference kernel nor a composition"));
  if (kernels.reference && composed)
    throw Error(op + " has both a reference kernel and a composition (ops/Compositions.cpp)");
  entry = kernels;
  if (!entry.reference)
    entry.reference = runComposition;
}

const OpKernels *OpRegistry::find(OpCode code) const {
  const OpKernels &entry = ops_[static_cast<size_t>(code)];
  return entry.reference ? &entry : nullptr;
}

const OpRegistry &opLibrary() {
  static const OpRegistry registry = [] {
    OpRegistry r;
#define STRINGRT_OP_FILE(Op) registerOps<OpCode::Op>(r);
#include "OpLibraryFiles.inc"
#undef STRINGRT_OP_FILE
    for (const Composition &composition : compositions()) {
      checkComposition(composition);
      if (!r.find(composition.op)) // no op file: the composition alone
        r.add(composition.op, {});
    }
    return r;
  }();
  return registry;
}

} // namespace stringrt::ops

namespace stringrt::detail {

void addLibraryOps(OpTable &table, KernelSet kernels) {
  const ops::OpRegistry &library = ops::opLibrary();
  for (size_t i = 0; i < kOpCodeCount; ++i) {
    const OpCode code = static_cast<OpCode>(i);
    const ops::OpKernels *op = library.find(code);
    if (!op)
      continue;
    if (table.find(code))
      throw Error(std::string("executor: '") + opName(code) +
                  "' is both in the op library and in a family's table");
    const bool fast = kernels != KernelSet::Reference && op->fast;
    table[code] = {fast ? op->fast : op->reference, op->check};
  }
}

} // namespace stringrt::detail
