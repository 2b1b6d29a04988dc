//===- LowerToLLVM.h - kernel funcs on memrefs -> LLVM dialect ---*- C++ -*-===//
//
// The second stage of the CPU code generator (docs/codegen.md). Lowers the
// kernel module of KernelGen.h in place to the LLVM dialect with upstream
// passes (math polynomial approximations, scf -> cf, math / arith / memref /
// func / cf -> LLVM, reconcile-unrealized-casts) and gives every kernel its
// C entry point, the ABI the runtime calls:
//
//   void SYMBOL(void *const *buffers, int64_t batch, int64_t begin, int64_t end);
//
// `buffers` holds the data pointers of the op's operands then results
// (row-major f32, the shapes the package's value table gives, with `batch`
// for the dynamic dimension 0); the call computes iterations [begin, end)
// of the kernel's parallel loop. The memref-level function becomes the
// internal SYMBOL_impl, which the entry point builds the memref
// descriptors for and calls (O3 inlines it).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CODEGEN_LOWERTOLLVM_H
#define STRINGC_CODEGEN_LOWERTOLLVM_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace stringc::codegen {

/// Lowers `kernels` (func.func on memrefs) to the LLVM dialect and adds the
/// entry points. Errors are emitted on the module.
mlir::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels);

} // namespace stringc::codegen

#endif // STRINGC_CODEGEN_LOWERTOLLVM_H
