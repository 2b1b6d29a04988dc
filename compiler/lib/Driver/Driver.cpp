//===- Driver.cpp - the compile driver's targets --------------------------===//
//
// One Compilation per run; the module it builds goes, in memory, to the
// target asked for (Driver.h).
//
//===----------------------------------------------------------------------===//
#include "Compilation.h"

#include "stringc/CpuGen/CpuCodegen.h"
#include "stringc/CudaGen/CudaTarget.h"
#include "stringc/Package/PackageBuilder.h"

using namespace mlir;

namespace stringc {

int printModelAsMLIR(const ModelGraph &graph, std::ostream &out, std::ostream &err,
                     EmitStage stage, const CompileOptions &options) {
  Compilation compilation(graph, err, options);
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(stage);
  if (failed(module))
    return 1;
  llvm::raw_os_ostream outStream(out);
  if (stage == EmitStage::Kernels || stage == EmitStage::LLVMIR) {
    Compilation::Phase phase(compilation, "CPU code generation");
    return failed(stage == EmitStage::Kernels ? codegen::printCpuKernels(**module, outStream)
                                              : codegen::printCpuLLVMIR(**module, outStream));
  }
  (*module)->print(outStream);
  outStream << "\n";
  return 0;
}

int writeModelPackage(const ModelGraph &graph, const std::string &path,
                      const std::string &target, std::ostream &err,
                      const CompileOptions &options) {
  // The target's own default passes, unless the caller chose another
  // target's (a test: the CPU target's passes on a cpu-reference package).
  CompileOptions forTarget = options;
  if (forTarget.target.empty())
    forTarget.target = target;
  Compilation compilation(graph, err, forTarget);
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(EmitStage::Train);
  if (failed(module))
    return 1;
  if (target == kCpuTarget) {
    // Compiler-generated kernels in a shared object (docs/codegen.md).
    FailureOr<PackageKernels> kernels = failure();
    {
      Compilation::Phase phase(compilation, "CPU code generation");
      kernels = codegen::compileCpuKernels(**module);
    }
    if (failed(kernels))
      return 1;
    Compilation::Phase phase(compilation, "package");
    return failed(writeModulePackage(**module, path, target, &*kernels)) ? 1 : 0;
  }
  Compilation::Phase phase(compilation, "package");
  return failed(writeModulePackage(**module, path, target)) ? 1 : 0;
}

int compileModelForCuda(const ModelGraph &graph, const CompileOptions &options,
                        const CudaOptions &cuda, CudaEmit emit, std::ostream &out,
                        const std::string &path, std::ostream &err) {
  if (!cudaTargetBuilt()) {
    err << "stringc: error: this stringc has no CUDA target: it was configured with "
           "-DSTRINGC_WITH_CUDA=OFF (scripts/main.sh does so on a fresh build directory, "
           "to build less); `bash scripts/build.sh` builds everything, the CUDA target "
           "included\n";
    return 1;
  }
  Compilation compilation(graph, err, options, /*withCuda=*/true);
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(EmitStage::Train);
  if (failed(module))
    return 1;
  Compilation::Phase phase(compilation, "CUDA code generation");
  return compileForCuda(**module, cuda, emit, out, path, err);
}

} // namespace stringc
