//===- HostCompile.h - LLVM IR -> object -> shared object --------*- C++ -*-===//
//
// Private to compiler/lib/CpuGen: the LLVM half of the CPU code generator.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CPUGEN_HOSTCOMPILE_H
#define STRINGC_CPUGEN_HOSTCOMPILE_H

#include "stringc/CpuGen/CpuCodegen.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <memory>
#include <string>

namespace stringc::codegen::detail {

/// A TargetMachine for `target` (PIC, O3); null with `error` set on failure.
std::unique_ptr<llvm::TargetMachine> createTargetMachine(const HostTarget &target,
                                                         std::string &error);

/// Translates a module in the LLVM dialect to LLVM IR for `machine` and runs
/// LLVM's O3 pipeline on it. Null with `error` set on failure.
std::unique_ptr<llvm::Module> translateAndOptimize(mlir::ModuleOp module, llvm::LLVMContext &context,
                                                   llvm::TargetMachine &machine, std::string &error);

/// Compiles `module` to an ELF object in memory. False with `error` set on failure.
bool emitObject(llvm::Module &module, llvm::TargetMachine &machine, std::string &object,
                std::string &error);

/// Links an ELF object into an ELF shared object with lld, in-process.
/// False with `error` set (lld's messages) on failure.
bool linkSharedObject(const std::string &object, std::string &sharedObject, std::string &error);

} // namespace stringc::codegen::detail

#endif // STRINGC_CPUGEN_HOSTCOMPILE_H
