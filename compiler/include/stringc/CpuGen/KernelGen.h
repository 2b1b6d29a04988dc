//===- KernelGen.h - pe ops -> CPU kernels on memrefs ------------*- C++ -*-===//
//
// The first stage of the CPU code generator (docs/codegen.md): for each op of
// the train programs (@forward and @gradients after pe-autodiff) of a kind it
// supports, one or two kernel `func.func`s on memrefs, built from scf, arith,
// math and memref ops. Identical ops (same kind, attributes and shapes) share
// one kernel.
//
// A kernel's arguments are the op's operands then its results, each as a
// row-major memref *view* of the tensor (the same bytes, a shape chosen for
// the loops, e.g. [B, 50, 64] + [64] seen as [B, 50, 64] and [64], a unary
// op's [B, 50, 256] as [B, 12800]), followed by two `index` values `begin`
// and `end`: the kernel computes the iterations [begin, end) of its outer,
// parallel loop. Only dimension 0 of a view may be dynamic, and it is then
// the batch size. The exported C entry point is added by the lowering
// (LowerToLLVM.h).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CPUGEN_KERNELGEN_H
#define STRINGC_CPUGEN_KERNELGEN_H

#include "stringc/Package/PackageBuilder.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace stringc::codegen {

/// The kernels of a pe module's programs.
struct KernelPlan {
  /// One `func.func` per kernel, on memrefs (in the pe module's context).
  mlir::OwningOpRef<mlir::ModuleOp> kernels;
  /// For each pe op that runs on generated kernels: the calls, in order.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<stringrt::ProgramKernel, 2>> calls;
  /// How many ops of the programs run on a kernel, and how many ops there are.
  int64_t coveredOps = 0, totalOps = 0;
};

/// Whether kernels are generated for ops of `op`'s class (pe.add, ...).
bool hasKernelFor(mlir::Operation *op);

/// Generates the kernels of @forward and @gradients of `module` (which must
/// have been through pe-autodiff). Ops it does not support, or whose shapes
/// it does not handle (a dynamic dimension other than dimension 0), are left
/// to the runtime's kernel library. Fails only on a malformed module.
mlir::FailureOr<KernelPlan> generateKernels(mlir::ModuleOp module);

} // namespace stringc::codegen

#endif // STRINGC_CPUGEN_KERNELGEN_H
