//===- HostObject.cpp - LLVM dialect -> optimised LLVM IR -> object -------===//
#include "HostCompile.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

namespace stringc::codegen {

HostTarget hostTarget() {
  HostTarget target;
  target.triple = llvm::Triple::normalize(llvm::sys::getDefaultTargetTriple());
  target.cpu = llvm::sys::getHostCPUName().str();
  llvm::SubtargetFeatures features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.first(), feature.second);
  target.features = features.getString();
  return target;
}

namespace detail {

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const HostTarget &target,
                                                         std::string &error) {
  static std::once_flag initialised;
  std::call_once(initialised, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(target.triple, error);
  if (!llvmTarget)
    return nullptr;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      target.triple, target.cpu, target.features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    error = "LLVM cannot create a target machine for " + target.triple + " (" + target.cpu + ")";
  return machine;
}

std::unique_ptr<llvm::Module> translateAndOptimize(mlir::ModuleOp module, llvm::LLVMContext &context,
                                                   llvm::TargetMachine &machine, std::string &error) {
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  module->getContext()->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, context, "stringc_kernels");
  if (!llvmModule) {
    error = "translating the kernels to LLVM IR failed";
    return nullptr;
  }
  llvmModule->setDataLayout(machine.createDataLayout());
  llvmModule->setTargetTriple(machine.getTargetTriple().str());
  // The CPU and its features on every function, so that the vectoriser's
  // cost model and the code generator see the same machine.
  for (llvm::Function &f : *llvmModule) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", machine.getTargetCPU());
    f.addFnAttr("target-features", machine.getTargetFeatureString());
  }

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes = builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  passes.run(*llvmModule, mam);
  return llvmModule;
}

bool emitObject(llvm::Module &module, llvm::TargetMachine &machine, std::string &object,
                std::string &error) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, stream, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  passes.run(module);
  object.assign(buffer.begin(), buffer.end());
  return true;
}

} // namespace detail
} // namespace stringc::codegen
