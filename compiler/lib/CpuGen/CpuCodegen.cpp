//===- CpuCodegen.cpp - the CPU code generator end to end ------------------===//
#include "stringc/CpuGen/CpuCodegen.h"

#include "HostCompile.h"
#include "stringc/CpuGen/KernelGen.h"
#include "stringc/CpuGen/LowerToLLVM.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"

#include <iterator>

using namespace mlir;

namespace stringc::codegen {
namespace {

/// Kernels generated, verified and lowered to the LLVM dialect.
FailureOr<KernelPlan> lowerPlan(ModuleOp module) {
  FailureOr<KernelPlan> plan = generateKernels(module);
  if (failed(plan) || failed(verify(*plan->kernels)) ||
      failed(lowerKernelsToLLVM(*plan->kernels)))
    return failure();
  return plan;
}

/// The optimised LLVM IR of the lowered kernels for `target`.
std::unique_ptr<llvm::Module> optimise(ModuleOp module, ModuleOp kernels, llvm::LLVMContext &context,
                                       std::unique_ptr<llvm::TargetMachine> &machine,
                                       const HostTarget &target) {
  std::string error;
  machine = detail::createTargetMachine(target, error);
  if (!machine) {
    module.emitError() << "CPU code generation: " << error;
    return nullptr;
  }
  std::unique_ptr<llvm::Module> ir = detail::translateAndOptimize(kernels, context, *machine, error);
  if (!ir)
    module.emitError() << "CPU code generation: " << error;
  return ir;
}

} // namespace

FailureOr<PackageKernels> compileCpuKernels(ModuleOp module) {
  FailureOr<KernelPlan> plan = lowerPlan(module);
  if (failed(plan))
    return failure();
  HostTarget target = hostTarget();
  llvm::LLVMContext context;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<llvm::Module> ir = optimise(module, *plan->kernels, context, machine, target);
  if (!ir)
    return failure();
  PackageKernels kernels;
  std::string object, error;
  if (!detail::emitObject(*ir, *machine, object, error) ||
      !detail::linkSharedObject(object, kernels.sharedObject, error))
    return module.emitError() << "CPU code generation: " << error;
  kernels.calls = std::move(plan->calls);
  kernels.triple = target.triple;
  kernels.cpu = target.cpu;
  kernels.features = target.features;
  return kernels;
}

LogicalResult printCpuKernels(ModuleOp module, llvm::raw_ostream &os) {
  FailureOr<KernelPlan> plan = generateKernels(module);
  if (failed(plan) || failed(verify(*plan->kernels)))
    return failure();
  auto funcs = plan->kernels->getOps<func::FuncOp>();
  os << "// " << std::distance(funcs.begin(), funcs.end()) << " kernels for " << plan->coveredOps << " of " << plan->totalOps
     << " ops of @forward and @gradients\n";
  plan->kernels->print(os);
  os << "\n";
  return success();
}

LogicalResult printCpuLLVMIR(ModuleOp module, llvm::raw_ostream &os) {
  FailureOr<KernelPlan> plan = lowerPlan(module);
  if (failed(plan))
    return failure();
  llvm::LLVMContext context;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<llvm::Module> ir = optimise(module, *plan->kernels, context, machine, hostTarget());
  if (!ir)
    return failure();
  ir->print(os, nullptr);
  return success();
}

} // namespace stringc::codegen
