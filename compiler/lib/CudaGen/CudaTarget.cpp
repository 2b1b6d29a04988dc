//===- CudaTarget.cpp - stringc --target=cuda -----------------------------===//
//
// The pe training module comes from the compile driver, in its context, after
// the same passes as the CPU package; the kernels are planned from it,
// generated, lowered, serialized and packaged. The package (docs/package.md,
// "Target cuda") is the CPU package plus its `cuda` section (the kernel table,
// the step program, the constants) and each kernel's PTX and cubin: the
// compiler fills stringrt::CudaSection and the runtime's writePackage writes
// it, as it reads it.
//
//===----------------------------------------------------------------------===//
#include "stringc/CudaGen/CudaTarget.h"
#include "stringc/CudaGen/GPUKernels.h"
#include "stringc/CudaGen/GPUPipeline.h"
#include "stringc/CudaGen/LaunchReport.h"
#include "stringc/CudaGen/ScalingReport.h"

#include "stringc/Package/PackageBuilder.h"
#include "BiasGradients.h"
#include "GemmGroups.h"
#include "KernelGroups.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_os_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <array>
#include <optional>

using namespace mlir;

namespace stringc {
namespace {

/// A launch as the package holds it: its kernel by index in the section.
stringrt::CudaLaunch launch(const cudagen::Launch &launch,
                            const std::map<std::string, int64_t> &kernelIndex) {
  stringrt::CudaLaunch out;
  out.gemm = launch.gemm;
  if (launch.gemm)
    return out;
  out.kernel = kernelIndex.at(launch.kernel);
  out.args = launch.args;
  if (launch.grid)
    out.grid = std::array<stringrt::CudaAffine, 3>{launch.grid->x, launch.grid->y, launch.grid->z};
  out.groupSize = launch.groupSize;
  out.groupArgs = launch.groupArgs;
  return out;
}

/// The package's `cuda` section (stringrt/CudaSection.h, written by the
/// runtime's writePackage): the plan's kernels with their PTX and cubins, the
/// coverage, the step program and the constant arrays.
stringrt::CudaSection cudaSection(const cudagen::KernelPlan &plan, const std::string &arch,
                                  const std::string &precision,
                                  const std::map<std::string, std::string> &ptx,
                                  const std::map<std::string, std::string> &cubins) {
  stringrt::CudaSection section;
  section.arch = arch;
  section.precision = precision;
  std::map<std::string, int64_t> kernelIndex;
  for (const cudagen::GpuKernelSpec &spec : plan.kernels) {
    kernelIndex[spec.name] = int64_t(section.kernels.size());
    stringrt::CudaKernel &kernel = section.kernels.emplace_back();
    kernel.name = spec.name;
    kernel.op = spec.peOp;
    for (const auto &param : spec.params)
      kernel.params.push_back(param.second);
    kernel.grid = spec.grid;
    kernel.blockX = spec.blockX;
    kernel.blockY = spec.blockY;
    kernel.dynamicShared = spec.dynamicSharedBytes;
    kernel.ptx = ptx.at(spec.name);
    const std::string &cubin = cubins.at(spec.name);
    kernel.cubin.assign(cubin.begin(), cubin.end());
    for (const cudagen::KernelUse &use : spec.uses)
      kernel.uses.push_back({use.program, use.op});
  }
  section.ops = plan.totalOps;
  section.opsWithKernel = plan.coveredOps;
  section.opsWithoutKernel = plan.uncovered;
  for (const auto &[program, ops] : plan.steps) {
    stringrt::CudaProgramSteps &steps = section.steps.emplace_back();
    steps.program = program;
    for (const cudagen::OpSteps &op : ops) {
      stringrt::CudaOpSteps &out = steps.ops.emplace_back();
      out.op = op.op;
      out.scratchBytes = op.scratchBytes;
      for (const cudagen::Launch &l : op.launches)
        out.launches.push_back(launch(l, kernelIndex));
    }
  }
  section.constants = plan.constants;
  for (const auto &[program, dtypes] : plan.valueDTypes)
    for (stringrt::CudaProgramSteps &steps : section.steps)
      if (steps.program == program)
        steps.valueDTypes = dtypes;
  return section;
}

class CudaCompilation {
public:
  CudaCompilation(ModuleOp train, std::ostream &err)
      : train(train), context(*train.getContext()), errStream(err) {}

  int run(const CudaOptions &options, CudaEmit emit, std::ostream &out, const std::string &path) {
    std::string message;
    if (failed(cudagen::checkGpuArch(options.arch, message))) {
      errStream << "stringc: error: " << message << "\n";
      return 1;
    }
    std::optional<cudagen::GpuPrecision> precision = parsePrecision(options, message);
    if (!precision) {
      errStream << "stringc: error: " << message << "\n";
      return 1;
    }
    FailureOr<cudagen::KernelPlan> plan =
        cudagen::planKernels(train, options.allKernels, *precision, options.extraKernels);
    if (failed(plan))
      return 1;
    if (emit == CudaEmit::LaunchReport)
      return launchReport(*plan, *precision, options, out);
    OwningOpRef<ModuleOp> kernels = cudagen::buildKernelModule(context, *plan, options.arch);
    if (failed(verify(*kernels)) || failed(cudagen::lowerKernelsToNVVM(*kernels)))
      return 1;
    if (emit == CudaEmit::NVVM) {
      (*kernels)->print(llvmStream(out));
      outStream->flush();
      return 0;
    }
    std::map<std::string, std::string> ptx;
    if (failed(cudagen::serializeKernelsToPTX(*kernels, ptx)))
      return 1;
    if (emit == CudaEmit::PTX) {
      for (const cudagen::GpuKernelSpec &spec : plan->kernels)
        out << "// kernel: " << spec.name << "\n" << ptx[spec.name] << "\n";
      return 0;
    }

    std::map<std::string, std::string> cubins;
    for (const cudagen::GpuKernelSpec &spec : plan->kernels) {
      if (failed(cudagen::assembleCubin(spec.name, ptx[spec.name], options.arch,
                                    cubins[spec.name], message))) {
        errStream << "stringc: error: " << message << "\n";
        return 1;
      }
    }
    return writeCudaPackage(train, *plan, options, ptx, cubins, path);
  }

private:
  /// The launch report (LaunchReport.h), with each kernel's registers and
  /// shared memory from ptxas -v when the toolkit is there (else a note in
  /// the report and full occupancy).
  int launchReport(const cudagen::KernelPlan &plan, cudagen::GpuPrecision precision,
                   const CudaOptions &options, std::ostream &out) {
    std::string message;
    FailureOr<cudagen::GpuMachineModel> machine =
        cudagen::gpuMachineByName(options.reportMachine, message);
    if (failed(machine)) {
      errStream << "stringc: error: " << message << "\n";
      return 1;
    }
    cudagen::KernelResourceTable resources;
    std::string occupancy = "ptxas -v " + options.arch;
    {
      // The kernels' PTX, as for a package; failures are not the report's.
      OwningOpRef<ModuleOp> kernels = cudagen::buildKernelModule(context, plan, options.arch);
      std::map<std::string, std::string> ptx;
      ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &d) {
        message = d.str();
        return success();
      });
      if (failed(verify(*kernels)) || failed(cudagen::lowerKernelsToNVVM(*kernels)) ||
          failed(cudagen::serializeKernelsToPTX(*kernels, ptx)))
        occupancy = "not known (no PTX: " + message + ")";
      else if (failed(cudagen::measureKernelResources(ptx, options.arch, resources, message)))
        occupancy = "not known (" + message.substr(0, message.find('\n')) + ")";
    }
    if (occupancy.rfind("not known", 0) == 0)
      resources.clear();
    else // ptxas -v counts static shared memory only
      for (const cudagen::GpuKernelSpec &spec : plan.kernels)
        if (auto found = resources.find(spec.name); found != resources.end())
          found->second.sharedBytes += spec.dynamicSharedBytes;
    FailureOr<cudagen::StepEstimate> step = cudagen::estimateTrainingStep(
        train, plan, precision, options.reportBatch, *machine, resources.empty() ? nullptr : &resources);
    if (failed(step))
      return 1;
    step->occupancy = resources.empty() ? occupancy + ": every kernel counted as fully occupying"
                                        : occupancy;
    if (options.reportFormat == "json")
      cudagen::printLaunchReportJson(*step, *machine, llvmStream(out));
    else
      cudagen::printLaunchReport(*step, *machine, llvmStream(out));
    if (options.reportRanks > 0 &&
        failed(cudagen::reportScaling(train, *step, options.reportRanks,
                                      options.reportInterconnect, llvmStream(out))))
      return 1;
    outStream->flush();
    return 0;
  }

  /// The precision option, refused when unknown or (bf16) when the arch has
  /// no bf16 mma.sync (sm_80 and newer have it).
  static std::optional<cudagen::GpuPrecision> parsePrecision(const CudaOptions &options,
                                                             std::string &message) {
    if (options.precision == "fp32")
      return cudagen::GpuPrecision::F32;
    if (options.precision != "bf16") {
      message = "unknown GPU precision '" + options.precision + "' (expected fp32 or bf16)";
      return std::nullopt;
    }
    int sm = std::atoi(options.arch.c_str() + 3); // checkGpuArch: "sm_<digits>[a]"
    if (sm < 80) {
      message = "--gpu-precision=bf16 needs sm_80 or newer (bf16 mma.sync), not " + options.arch;
      return std::nullopt;
    }
    return cudagen::GpuPrecision::BF16;
  }

  llvm::raw_ostream &llvmStream(std::ostream &out) {
    outStream = std::make_unique<llvm::raw_os_ostream>(out);
    return *outStream;
  }

  int writeCudaPackage(ModuleOp train, const cudagen::KernelPlan &plan, const CudaOptions &options,
                       const std::map<std::string, std::string> &ptx,
                       const std::map<std::string, std::string> &cubins, const std::string &path) {
    FailureOr<stringrt::Manifest> manifest = buildPackageManifest(train);
    if (failed(manifest))
      return 1;
    // The arena plans keep each GEMM or kernel group's values apart (one
    // call runs its members at once; GemmGroups.h, KernelGroups.h), and
    // those of a weight GEMM and the sum_to whose result its bias-gradient
    // epilogue writes (BiasGradients.h); they size each value at its stored
    // type (a bf16 value at 2 bytes an element; KernelPlan::valueDTypes).
    for (const auto &[name, steps] : plan.steps) {
      ConcurrentOps groups = cudagen::gemmGroupRanges(steps);
      for (const auto &range : cudagen::kernelGroupRanges(steps))
        groups.push_back(range);
      for (const auto &range : cudagen::biasGradientRanges(steps))
        groups.push_back(range);
      StoredTypes stored;
      for (const auto &[program, dtypes] : plan.valueDTypes)
        if (program == name)
          stored = dtypes;
      if (groups.empty() && stored.empty())
        continue;
      auto func = train.lookupSymbol<func::FuncOp>(name);
      stringrt::Program &program = name == "forward" ? manifest->forward : manifest->gradients;
      if (std::optional<std::string> problem =
              packageArena(func, groups, program.arena.emplace(), stored)) {
        errStream << "stringc: internal error: invalid arena plan of @" << name << ": "
                  << *problem << "\n";
        return 1;
      }
    }
    stringrt::PackageContents contents;
    contents.target = stringrt::kCudaTarget;
    contents.manifest = std::move(*manifest);
    contents.cuda = cudaSection(plan, options.arch, options.precision, ptx, cubins);
    try {
      stringrt::writePackage(path, contents);
    } catch (const stringrt::Error &error) {
      errStream << "stringc: error: cannot write the package: " << error.what() << "\n";
      return 1;
    }
    return 0;
  }

  ModuleOp train;
  MLIRContext &context;
  std::ostream &errStream;
  std::unique_ptr<llvm::raw_os_ostream> outStream;
};

} // namespace

bool cudaTargetBuilt() { return true; }

void registerCudaTargetDialects(DialectRegistry &registry) {
  cudagen::registerGPUCodegenDialects(registry);
}

int compileForCuda(ModuleOp train, const CudaOptions &options, CudaEmit emit, std::ostream &out,
                   const std::string &path, std::ostream &err) {
  return CudaCompilation(train, err).run(options, emit, out, path);
}

} // namespace stringc
