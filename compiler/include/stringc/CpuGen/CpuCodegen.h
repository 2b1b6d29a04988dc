//===- CpuCodegen.h - compiler-generated CPU kernels -------------*- C++ -*-===//
//
// The CPU code generator end to end (docs/codegen.md):
//
//   pe module (after pe-autodiff)
//     -> kernels: func.func on memrefs, one per supported op kind/shape (KernelGen.h)
//     -> LLVM dialect + C entry points                                  (LowerToLLVM.h)
//     -> LLVM IR, optimised at O3 for the host CPU                      (HostObject.cpp)
//     -> an ELF object in memory (LLVM TargetMachine)
//     -> an ELF shared object, linked in-process by lld                 (SharedObject.cpp)
//
// The result is what a "cpu" package carries (PackageBuilder.h).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CPUGEN_CPUCODEGEN_H
#define STRINGC_CPUGEN_CPUCODEGEN_H

#include "stringc/Package/PackageBuilder.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace stringc::codegen {

/// What the kernels are compiled for: an LLVM triple, CPU name and feature
/// string ("+avx2,+fma,-avx512f,...").
struct HostTarget {
  std::string triple, cpu, features;
};

/// The machine stringc runs on.
HostTarget hostTarget();

/// Generates, lowers, optimises, compiles and links the kernels of `module`
/// (@forward and @gradients) for the host. Errors are emitted on the module.
mlir::FailureOr<PackageKernels> compileCpuKernels(mlir::ModuleOp module);

/// `stringc --emit=kernels`: the kernel module on memrefs.
mlir::LogicalResult printCpuKernels(mlir::ModuleOp module, llvm::raw_ostream &os);

/// `stringc --emit=llvm`: the kernels' LLVM IR after O3 for the host.
mlir::LogicalResult printCpuLLVMIR(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace stringc::codegen

#endif // STRINGC_CPUGEN_CPUCODEGEN_H
