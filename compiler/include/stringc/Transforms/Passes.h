//===- Passes.h - the passes of stringc -------------------------*- C++ -*-===//

#ifndef STRINGC_TRANSFORMS_PASSES_H
#define STRINGC_TRANSFORMS_PASSES_H

#include "stringc/Dialect/PE/PEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace stringc {

#define GEN_PASS_DECL
#include "stringc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "stringc/Transforms/Passes.h.inc"

/// Registers every stringc pass with the global pass registry (string-opt).
inline void registerPasses() { registerTransformsPasses(); }

} // namespace stringc

#endif // STRINGC_TRANSFORMS_PASSES_H
