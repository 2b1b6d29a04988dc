//===- CudaTarget.cpp - stringc --target=cuda -----------------------------===//
//
// The pe training module comes from the compile driver, in its context, after
// the same passes as the CPU package; the kernels are planned from it,
// generated, lowered, serialized and packaged. The package (docs/package.md, "Target cuda") is the CPU package
// plus a `cuda` metadata entry (the kernel table, JSON) and two U8 tensors
// per kernel: `ptx.<kernel>` and `cubin.<kernel>`.
//
//===----------------------------------------------------------------------===//
#include "stringc/GPU/CudaTarget.h"
#include "stringc/GPU/GPUKernels.h"
#include "stringc/GPU/GPUPipeline.h"
#include "stringc/GPU/LaunchReport.h"

#include "stringc/Target/PackageWriter.h"

#include "stringrt/Error.h"
#include "stringrt/JsonText.h"
#include "stringrt/Safetensors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_os_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

using namespace mlir;

namespace stringc {
namespace {

void appendString(std::string &out, const std::string &text) {
  stringrt::appendJsonString(out, text);
}

std::string affineJson(const cudagen::BatchAffine &value) {
  return "[" + std::to_string(value.perBatch) + "," + std::to_string(value.constant) + "]";
}

/// A float that reads back as the same f32 (9 significant digits).
std::string realJson(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", double(value));
  return text;
}

std::string argJson(const cudagen::LaunchArg &arg) {
  using Kind = cudagen::LaunchArg::Kind;
  switch (arg.kind) {
  case Kind::Operand:
    return "{\"operand\":" + std::to_string(arg.index) + "}";
  case Kind::Result:
    return "{\"result\":" + std::to_string(arg.index) + "}";
  case Kind::Scratch:
    return "{\"scratch\":" + std::to_string(arg.index) + "}";
  case Kind::I64:
    return "{\"i64\":" + affineJson(arg.integer) + "}";
  case Kind::F32:
    return "{\"f32\":" + realJson(arg.real) + "}";
  case Kind::Constant:
    return "{\"constant\":" + std::to_string(arg.index) + "}";
  }
  return "{}";
}

/// [{"type": "i32" | "f32", "values": [...]}] (docs/package.md, "Target cuda").
std::string constantsJson(const std::vector<cudagen::ConstantArray> &constants) {
  std::string out = "[";
  for (size_t c = 0; c < constants.size(); ++c) {
    const cudagen::ConstantArray &array = constants[c];
    bool ints = array.type == cudagen::ConstantArray::Type::I32;
    out += std::string(c ? "," : "") + "{\"type\":\"" + (ints ? "i32" : "f32") + "\",\"values\":[";
    for (size_t i = 0; i < array.size(); ++i)
      out += (i ? "," : "") + (ints ? std::to_string(array.i32[i]) : realJson(array.f32[i]));
    out += "]}";
  }
  return out + "]";
}

std::string launchJson(const cudagen::Launch &launch) {
  if (launch.gemm) {
    const cudagen::GemmCall &g = *launch.gemm;
    return "{\"gemm\":{\"a\":" + argJson(g.a) + ",\"b\":" + argJson(g.b) + ",\"c\":" +
           argJson(g.c) + ",\"m\":" + affineJson(g.m) + ",\"n\":" + affineJson(g.n) +
           ",\"k\":" + affineJson(g.k) + ",\"count\":" + affineJson(g.count) +
           ",\"stride_a\":" + affineJson(g.strideA) + ",\"stride_b\":" + affineJson(g.strideB) +
           ",\"stride_c\":" + affineJson(g.strideC) +
           ",\"trans_a\":" + (g.transA ? "true" : "false") +
           ",\"trans_b\":" + (g.transB ? "true" : "false") + ",\"alpha\":" + realJson(g.alpha) +
           ",\"beta\":" + realJson(g.beta) +
           (g.epilogue == cudagen::GemmCall::Epilogue::Bias
                ? ",\"epilogue\":\"bias\",\"bias\":" + argJson(g.bias)
                : std::string()) +
           "}}";
  }
  std::string out = "{\"kernel\":";
  appendString(out, launch.kernel);
  out += ",\"args\":[";
  for (size_t a = 0; a < launch.args.size(); ++a)
    out += (a ? "," : "") + argJson(launch.args[a]);
  out += "]";
  if (launch.grid)
    out += ",\"grid\":[" + affineJson(launch.grid->x) + "," + affineJson(launch.grid->y) + "," +
           affineJson(launch.grid->z) + "]";
  return out + "}";
}

/// {"forward": [{"op", "scratch": [[perBatch, constant] bytes], "launches"}],
///  "gradients": [...]} (docs/package.md, "Target cuda").
std::string stepsJson(const cudagen::KernelPlan &plan) {
  std::string out = "{";
  for (size_t p = 0; p < plan.steps.size(); ++p) {
    out += p ? "," : "";
    appendString(out, plan.steps[p].first);
    out += ":[";
    const std::vector<cudagen::OpSteps> &ops = plan.steps[p].second;
    for (size_t i = 0; i < ops.size(); ++i) {
      out += (i ? ",{\"op\":" : "{\"op\":") + std::to_string(ops[i].op) + ",\"scratch\":[";
      for (size_t s = 0; s < ops[i].scratchBytes.size(); ++s)
        out += (s ? "," : "") + affineJson(ops[i].scratchBytes[s]);
      out += "],\"launches\":[";
      for (size_t l = 0; l < ops[i].launches.size(); ++l)
        out += (l ? "," : "") + launchJson(ops[i].launches[l]);
      out += "]}";
    }
    out += "]";
  }
  return out + "}";
}

/// The `cuda` metadata entry: {"arch", "kernels": [{name, op, params,
/// grid, block, ptx, cubin, uses}], "coverage": {...}, "steps": {...},
/// "constants": [...]}.
std::string kernelTableJson(const cudagen::KernelPlan &plan, const std::string &arch,
                            const std::string &precision) {
  std::string out = "{\"arch\":";
  appendString(out, arch);
  out += ",\"precision\":";
  appendString(out, precision);
  out += ",\"kernels\":[";
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const cudagen::KernelSpec &spec = plan.kernels[k];
    out += k ? ",{" : "{";
    out += "\"name\":";
    appendString(out, spec.name);
    out += ",\"op\":";
    appendString(out, spec.peOp);
    out += ",\"params\":[";
    for (size_t p = 0; p < spec.params.size(); ++p) {
      out += p ? "," : "";
      appendString(out, cudagen::paramKindName(spec.params[p].second));
    }
    out += "],\"grid\":";
    appendString(out, cudagen::gridRuleName(spec.grid));
    out += ",\"block\":[" + std::to_string(spec.blockX) + "," + std::to_string(spec.blockY) + "]";
    out += ",\"ptx\":";
    appendString(out, "ptx." + spec.name);
    out += ",\"cubin\":";
    appendString(out, "cubin." + spec.name);
    out += ",\"uses\":[";
    for (size_t u = 0; u < spec.uses.size(); ++u) {
      out += u ? ",{" : "{";
      out += "\"program\":";
      appendString(out, spec.uses[u].program);
      out += ",\"op\":" + std::to_string(spec.uses[u].op) + "}";
    }
    out += "]}";
  }
  out += "],\"coverage\":{\"ops\":" + std::to_string(plan.totalOps) +
         ",\"with_kernel\":" + std::to_string(plan.coveredOps) + ",\"without_kernel\":{";
  for (size_t p = 0; p < plan.uncovered.size(); ++p) {
    out += p ? "," : "";
    appendString(out, plan.uncovered[p].first);
    out += ":[";
    for (size_t i = 0; i < plan.uncovered[p].second.size(); ++i) {
      out += i ? "," : "";
      appendString(out, plan.uncovered[p].second[i]);
    }
    out += "]";
  }
  out += "}},\"steps\":" + stepsJson(plan) + ",\"constants\":" + constantsJson(plan.constants) + "}";
  return out;
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
        cudagen::planKernels(train, options.allKernels, *precision);
    if (failed(plan))
      return 1;
    if (emit == CudaEmit::LaunchReport) {
      FailureOr<cudagen::StepEstimate> step =
          cudagen::estimateTrainingStep(train, *plan, *precision, options.reportBatch);
      if (failed(step))
        return 1;
      cudagen::printLaunchReport(*step, cudagen::GpuMachineModel{}, llvmStream(out));
      outStream->flush();
      return 0;
    }
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
      for (const cudagen::KernelSpec &spec : plan->kernels)
        out << "// kernel: " << spec.name << "\n" << ptx[spec.name] << "\n";
      return 0;
    }

    std::map<std::string, std::string> cubins;
    for (const cudagen::KernelSpec &spec : plan->kernels) {
      if (failed(cudagen::assembleCubin(spec.name, ptx[spec.name], options.arch,
                                    cubins[spec.name], message))) {
        errStream << "stringc: error: " << message << "\n";
        return 1;
      }
    }
    return writeCudaPackage(train, *plan, options, ptx, cubins, path);
  }

private:
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
    FailureOr<std::string> manifest = buildPackageManifest(train);
    if (failed(manifest))
      return 1;
    std::map<std::string, std::string> metadata = {
        {"format", "stringc-package"},
        {"version", std::to_string(kPackageVersion)},
        {"target", "cuda"},
        {"manifest", *manifest},
        {"cuda", kernelTableJson(plan, options.arch, options.precision)},
    };
    std::vector<stringrt::TensorView> tensors;
    auto add = [&](const std::string &name, const std::string &bytes) {
      tensors.push_back({name, stringrt::DType::U8, {int64_t(bytes.size())}, bytes.data()});
    };
    for (const cudagen::KernelSpec &spec : plan.kernels) {
      add("ptx." + spec.name, ptx.at(spec.name));
      add("cubin." + spec.name, cubins.at(spec.name));
    }
    try {
      stringrt::writeSafetensors(path, tensors, metadata);
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

void registerCudaTargetDialects(DialectRegistry &registry) {
  cudagen::registerGPUCodegenDialects(registry);
}

int compileForCuda(ModuleOp train, const CudaOptions &options, CudaEmit emit, std::ostream &out,
                   const std::string &path, std::ostream &err) {
  return CudaCompilation(train, err).run(options, emit, out, path);
}

} // namespace stringc
