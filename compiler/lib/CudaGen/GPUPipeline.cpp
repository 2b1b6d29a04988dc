//===- GPUPipeline.cpp - kernel module -> NVVM -> PTX -> cubin ------------===//
#include "stringc/CudaGen/GPUPipeline.h"
#include "stringc/CudaGen/GPUKernels.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <regex>

using namespace mlir;

namespace stringc::cudagen {

void registerGPUCodegenDialects(DialectRegistry &registry) {
  registry.insert<mlir::gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect,
                  arith::ArithDialect, math::MathDialect, scf::SCFDialect,
                  cf::ControlFlowDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
}

std::string cudaToolkitPath() {
  for (const char *name : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *value = std::getenv(name); value && *value)
      return value;
  return "/usr/local/cuda";
}

LogicalResult checkGpuArch(const std::string &arch, std::string &message) {
  // LLVM 19's NVPTX backend knows sm_50 .. sm_90a.
  static const std::regex pattern("sm_([0-9]{2,3})(a?)");
  std::smatch match;
  if (std::regex_match(arch, match, pattern)) {
    int number = std::stoi(match[1].str());
    bool accelerated = !match[2].str().empty();
    if (number >= 50 && number <= 90 && (!accelerated || number == 90))
      return success();
  }
  message = "unknown GPU architecture '" + arch +
            "' (expected sm_NN with NN from 50 to 90, or sm_90a)";
  return failure();
}

std::string ptxFeatureFor(const std::string &arch) {
  // PTX ISA 8.0 (CUDA 12.0) covers every chip LLVM 19 targets, sm_90a too.
  (void)arch;
  return "+ptx80";
}

LogicalResult lowerKernelsToNVVM(ModuleOp module) {
  PassManager pm(module.getContext());
  OpPassManager &kernels = pm.nest<mlir::gpu::GPUModuleOp>();
  kernels.addPass(createConvertSCFToCFPass());
  ConvertGpuOpsToNVVMOpsOptions options;
  options.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(options));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}

LogicalResult serializeKernelsToPTX(ModuleOp module, std::map<std::string, std::string> &ptx) {
  std::string toolkit = cudaToolkitPath();
  llvm::SmallString<256> libdevice(toolkit);
  llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
  // erf, tanh, exp and sqrt lower to libdevice calls (__nv_erff, ...);
  // without it the PTX would call undefined functions.
  if (!llvm::sys::fs::exists(libdevice))
    return module.emitError() << "CUDA libdevice not found at '" << libdevice
                              << "' (set CUDA_HOME to the CUDA toolkit)";
  PassManager pm(module.getContext());
  GpuModuleToBinaryPassOptions options;
  options.toolkitPath = toolkit;
  options.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(options));
  if (failed(pm.run(module)))
    return failure();
  for (auto binary : module.getOps<mlir::gpu::BinaryOp>()) {
    auto objects = binary.getObjects();
    if (objects.size() != 1)
      return binary.emitError() << "expected one object per kernel module";
    auto object = cast<mlir::gpu::ObjectAttr>(objects[0]);
    std::string text = object.getObject().getValue().str();
    // The NVPTX backend's output ends in a NUL for C consumers.
    while (!text.empty() && text.back() == '\0')
      text.pop_back();
    ptx[binary.getSymName().str()] = std::move(text);
  }
  return success();
}

namespace {

/// A temporary file removed when this goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

std::string readWhole(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

} // namespace

std::string ptxasPath() {
  llvm::SmallString<256> inToolkit(cudaToolkitPath());
  llvm::sys::path::append(inToolkit, "bin", "ptxas");
  if (llvm::sys::fs::can_execute(inToolkit))
    return inToolkit.str().str();
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return "";
}

LogicalResult runPtxas(const std::string &kernel, const std::string &ptx, const std::string &arch,
                       bool verbose, std::string &cubin, std::string &log, std::string &message) {
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) {
    message = "ptxas not found (looked in '" + cudaToolkitPath() +
              "/bin/ptxas' and PATH; set CUDA_HOME to the CUDA toolkit), needed " +
              (verbose ? "for the registers of" : "to build the cubin of") + " kernel '" +
              kernel + "'";
    return failure();
  }
  TempFile input, output, logFile;
  if (llvm::sys::fs::createTemporaryFile("stringc-" + kernel, "ptx", input.path) ||
      llvm::sys::fs::createTemporaryFile("stringc-" + kernel, "cubin", output.path) ||
      llvm::sys::fs::createTemporaryFile("stringc-" + kernel, "log", logFile.path)) {
    message = "cannot create temporary files for ptxas";
    return failure();
  }
  {
    std::error_code error;
    llvm::raw_fd_ostream out(input.path, error);
    if (error) {
      message = "cannot write '" + input.path.str().str() + "': " + error.message();
      return failure();
    }
    out << ptx;
  }
  std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> args = {ptxas};
  if (verbose)
    args.push_back("-v");
  args.append({archFlag, "-O3", input.path, "-o", output.path});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logFile.path.str(),
                                                logFile.path.str()};
  std::string execError;
  int status = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects,
                                         /*SecondsToWait=*/120, 0, &execError);
  log = readWhole(logFile.path);
  if (status != 0) {
    message = std::string("ptxas ") + (verbose ? "-v " : "") + archFlag + " failed on kernel '" +
              kernel + "'" + (execError.empty() ? "" : " (" + execError + ")") + ":\n" + log;
    return failure();
  }
  cubin = readWhole(output.path);
  if (cubin.empty()) {
    message = "ptxas produced no cubin for kernel '" + kernel + "'";
    return failure();
  }
  return success();
}

LogicalResult assembleCubin(const std::string &kernel, const std::string &ptx,
                            const std::string &arch, std::string &cubin, std::string &message) {
  std::string log;
  return runPtxas(kernel, ptx, arch, /*verbose=*/false, cubin, log, message);
}

} // namespace stringc::cudagen
