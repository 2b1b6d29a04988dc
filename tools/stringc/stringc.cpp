//===- stringc.cpp - the stringc driver -----------------------------------===//
//
//   stringc model.pe [--emit=graph|mlir|pe|pe-opt|pe-train] [-o FILE]
//   stringc model.pe --target=cpu -o model.pkg     (also --emit=package)
//   stringc model.pe --emit=kernels|llvm           (the CPU kernels)
//   stringc model.pe --target=cuda [--gpu-arch=sm_90] -o model.pkg | --emit=nvvm|ptx
//   stringc model.pe --explain                     (what the passes do)
//   stringc model.pe -D NAME=VALUE ...             (a constant set anew)
//
// Exit status: 0 on success, 1 when the model has errors (or output fails),
// 2 on a usage error (bad flag, unreadable input file).
//
//===----------------------------------------------------------------------===//

#include "stringc/Frontend/ConstantOverrides.h"
#include "stringc/Frontend/Frontend.h"
#include "stringc/Frontend/Graph.h"
#include "stringc/Driver/Driver.h"
#include "stringc/EmitPytorch/EmitPytorch.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

namespace {

/// The largest --batch of --explain and --launch-report.
constexpr long long kMaxBatch = 1LL << 24;

constexpr const char *kUsage = R"(usage: stringc MODEL.pe [options]

Compiles a .pe model description.

options:
  --emit=mlir    print the model in the pe dialect as written (default;
                 also --emit=pe)
  --emit=pe-opt  print it after the optimisation passes (docs/passes.md)
  --emit=pe-train
                 print it after the passes with @gradients added: the loss
                 and the gradient of every trainable parameter (the
                 pe-autodiff pass, docs/autodiff.md); what a package runs
  --emit=graph   print the checked model graph (a readable dump)
  --emit=pytorch write the model as a PyTorch module (docs/pytorch.md)
  --target=cpu   compile to a model package (docs/package.md) for the CPU
                 runtime, with compiler-generated kernels for the
                 elementwise ops and layer norm (docs/codegen.md) in a
                 shared object for this machine's CPU; needs -o (packages
                 are binary). Runs the CPU target's own default passes
                 (pe-fuse-residual) after pe-autodiff; with --emit=pe-opt,
                 --emit=pe-train or --explain, prints what such a package
                 runs instead of writing it (any --target does so)
  --emit=package the same as --target=cpu
  --target=cpu-reference
                 a CPU package without generated kernels (the runtime's
                 kernel library runs every op)
  --emit=kernels print the CPU kernels on memrefs (scf/arith/math/memref)
  --emit=llvm    print the CPU kernels' LLVM IR, optimised (O3) for this CPU
  --target=cuda  compile to a package for NVIDIA GPUs (docs/cuda.md): the
                 CPU package plus GPU kernels as PTX and cubin; needs -o
  --gpu-arch=ARCH
                 the GPU architecture of --target=cuda (default sm_90)
  --gpu-all-kernels
                 with --target=cuda, also generate the kernels no op uses
                 (every kernel the generator has; for testing it)
  --gpu-kernel=NAME
                 with --target=cuda, also generate kernel NAME, or a
                 bf16-storage variant NAME__[bf]... (a letter per storage
                 parameter), with no uses (for testing it); repeatable
  --gpu-precision=fp32|bf16
                 the attention kernels of --target=cuda: f32 FMA (default)
                 or tensor cores, bf16 operands and f32 accumulation
                 (sm_80 and newer; recorded in the package)
  --emit=nvvm    print the GPU kernels lowered to the NVVM dialect
  --emit=ptx     print the GPU kernels' PTX
  --launch-report
                 with --target=cuda: print every launch of one training
                 step (grid, bytes, FLOPs) with its roofline time on an
                 H100 model, the share of each op kind and the step's
                 predicted time and bound (docs/cuda.md); --batch=N sets
                 the batch (default 128); no package is written;
                 --launch-report=json prints it as one JSON object
  --gpu-model=h100|h200[,KEY=VALUE...]
                 the GPU the launch report predicts for (default h100);
                 KEY: bandwidth, latency_ns, min_us, f32, tf32, bf16, sms
  --ranks=N      with --launch-report: add the data-parallel scaling on N
                 GPUs (--batch each): the gradients' all-reduce, how much
                 hides behind the backward, the scaling efficiency
                 (docs/distributed.md)
  --interconnect=nvlink|ib
                 with --ranks: the link (default nvlink up to 8 GPUs, ib
                 beyond)
  -o FILE        write the output to FILE instead of standard output
                 (written only on success, atomically)
  -D NAME=VALUE  set the top-level constant NAME to VALUE (a number) in
                 place of the file's value, e.g. -D image_size=40 (repeatable;
                 also -DNAME=VALUE): the constants computed from it follow
                 and the file's checks apply; a NAME that is no top-level
                 constant is an error

pass options (docs/passes.md):
  --explain      print each rewrite that fires (source location, what it did,
                 forward FLOPs and bytes per example before and after), the
                 warnings, and the training step's cost with all passes, with
                 none and with each one switched off
  --batch=N      the batch size of --explain's and --launch-report's step
                 figures (default 128)
  --disable-pass=NAME[,NAME...]
                 leave these optimisation passes out (repeatable)
  --enable-pass=NAME[,NAME...]
                 also run these opt-in passes (pe-fuse-epilogue)
  --pass-pipeline=PIPELINE
                 run this textual MLIR pipeline instead of the optimisation
                 passes, e.g. 'pe-hoist,pe-fuse-attention' ('' for none);
                 pe-autodiff still follows for pe-train and packages
  --approximate  allow the opt-in approximate rewrites (commuting-generator
                 factorisation of generators that do not commute exactly)
  --pass-statistics
                 print each pass's statistics (to stderr)
  --print-ir-after-all
                 print the module after every pass (to stderr)
  --time-phases  print the time of each compilation phase and pass (stderr)
  --help         show this help
  --version      show the version
)";

enum class Emit {
  Mlir, Graph, PeOpt, PeTrain, Package, Explain, Nvvm, Ptx, Kernels, Llvm, LaunchReport,
  Pytorch
};

/// The outputs that show the module after the passes, which may name the
/// target whose passes to run (--target=cpu adds its own).
bool isPassView(Emit emit) {
  return emit == Emit::PeOpt || emit == Emit::PeTrain || emit == Emit::Explain;
}

struct Options {
  std::string input;
  std::optional<std::string> output;
  Emit emit = Emit::Mlir;
  bool emitGiven = false;
  std::optional<std::string> target; // --target=NAME as given
  std::optional<std::string> gpuArch; // --gpu-arch=ARCH as given
  bool gpuAllKernels = false;          // --gpu-all-kernels
  std::vector<std::string> gpuKernels; // --gpu-kernel=NAME, in order
  std::optional<std::string> gpuPrecision; // --gpu-precision=fp32|bf16 as given
  std::string reportFormat = "text";       // --launch-report[=text|json]
  std::optional<std::string> gpuModel;     // --gpu-model=h100|h200[,KEY=VALUE...]
  stringc::CompileOptions compile;
  int64_t explainBatch = 128;
  std::vector<stringc::ConstantOverride> overrides; // -D NAME=VALUE
  int64_t ranks = 0;        // --ranks=N (--launch-report)
  std::string interconnect; // --interconnect=nvlink|ib
};

/// Splits "a,b" into its non-empty names.
void addPassNames(const std::string &list, std::set<std::string> &names) {
  std::stringstream stream(list);
  std::string name;
  while (std::getline(stream, name, ','))
    if (!name.empty())
      names.insert(name);
}

int usageError(const std::string &message) {
  std::cerr << "stringc: error: " << message << "\n";
  return 2;
}

/// Parses argv; returns an exit status when the driver should stop now.
std::optional<int> parseOptions(int argc, char **argv, Options &options) {
  bool haveInput = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--version") {
      std::cout << "stringc " << STRINGC_VERSION << "\n";
      return 0;
    }
    if (arg == "--emit=mlir" || arg == "--emit=pe") {
      options.emit = Emit::Mlir;
      options.emitGiven = true;
    } else if (arg == "--emit=graph") {
      options.emit = Emit::Graph;
      options.emitGiven = true;
    } else if (arg == "--emit=pytorch") {
      options.emit = Emit::Pytorch;
      options.emitGiven = true;
    } else if (arg == "--emit=pe-opt") {
      options.emit = Emit::PeOpt;
      options.emitGiven = true;
    } else if (arg == "--explain") {
      options.emit = Emit::Explain;
      options.emitGiven = true;
    } else if (arg.rfind("--batch=", 0) == 0) {
      std::string value = arg.substr(8);
      char *end = nullptr;
      errno = 0;
      long long batch = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || batch <= 0)
        return usageError("--batch needs a positive integer, got '" + value + "'");
      if (errno == ERANGE || batch > kMaxBatch)
        return usageError("--batch " + value + " is too large (at most " +
                          std::to_string(kMaxBatch) + ")");
      options.explainBatch = batch;
    } else if (arg == "--ranks" || arg.rfind("--ranks=", 0) == 0) {
      std::string value = arg.size() > 7 ? arg.substr(8) : i + 1 < argc ? argv[++i] : "";
      char *end = nullptr;
      errno = 0;
      long long ranks = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || ranks <= 0 || errno == ERANGE || ranks > 1000000)
        return usageError("--ranks needs a positive integer (at most 1000000), got '" + value +
                          "'");
      options.ranks = ranks;
    } else if (arg == "--interconnect" || arg.rfind("--interconnect=", 0) == 0) {
      options.interconnect = arg.size() > 14 ? arg.substr(15) : i + 1 < argc ? argv[++i] : "";
      if (options.interconnect != "nvlink" && options.interconnect != "ib")
        return usageError("unknown --interconnect '" + options.interconnect +
                          "' (expected nvlink or ib)");
    } else if (arg.rfind("--disable-pass=", 0) == 0) {
      addPassNames(arg.substr(15), options.compile.disabledPasses);
    } else if (arg.rfind("--enable-pass=", 0) == 0) {
      addPassNames(arg.substr(14), options.compile.enabledPasses);
    } else if (arg.rfind("--pass-pipeline=", 0) == 0) {
      options.compile.passPipeline = arg.substr(16);
    } else if (arg == "--approximate") {
      options.compile.approximate = true;
    } else if (arg == "--pass-statistics") {
      options.compile.passStatistics = true;
    } else if (arg == "--print-ir-after-all") {
      options.compile.printIRAfterAll = true;
    } else if (arg == "--time-phases") {
      options.compile.timePhases = true;
    } else if (arg == "--emit=pe-train") {
      options.emit = Emit::PeTrain;
      options.emitGiven = true;
    } else if (arg == "--launch-report" || arg.rfind("--launch-report=", 0) == 0) {
      options.emit = Emit::LaunchReport;
      options.emitGiven = true;
      if (arg.size() > 15)
        options.reportFormat = arg.substr(16);
      if (options.reportFormat != "text" && options.reportFormat != "json")
        return usageError("unknown --launch-report format '" + options.reportFormat +
                          "' (expected text or json)");
    } else if (arg.rfind("--gpu-model=", 0) == 0) {
      options.gpuModel = arg.substr(12);
    } else if (arg == "--emit=nvvm" || arg == "--emit=ptx") {
      options.emit = arg == "--emit=nvvm" ? Emit::Nvvm : Emit::Ptx;
      options.emitGiven = true;
    } else if (arg.rfind("--gpu-arch=", 0) == 0) {
      options.gpuArch = arg.substr(11);
    } else if (arg == "--gpu-all-kernels") {
      options.gpuAllKernels = true;
    } else if (arg.rfind("--gpu-kernel=", 0) == 0) {
      if (arg.size() == 13)
        return usageError("--gpu-kernel needs a kernel name");
      options.gpuKernels.push_back(arg.substr(13));
    } else if (arg.rfind("--gpu-precision=", 0) == 0) {
      options.gpuPrecision = arg.substr(16);
      if (*options.gpuPrecision != "fp32" && *options.gpuPrecision != "bf16")
        return usageError("unknown --gpu-precision '" + *options.gpuPrecision +
                          "' (expected fp32 or bf16)");
    } else if (arg == "--emit=kernels" || arg == "--emit=llvm") {
      options.emit = arg == "--emit=kernels" ? Emit::Kernels : Emit::Llvm;
      options.emitGiven = true;
    } else if (arg == "--emit=package") {
      options.emit = Emit::Package;
      options.emitGiven = true;
    } else if (arg.rfind("--emit=", 0) == 0) {
      return usageError("unknown --emit kind '" + arg.substr(7) +
                        "' (expected graph, mlir, pe, pe-opt, pe-train, kernels, llvm, nvvm, "
                        "ptx or package)");
    } else if (arg.rfind("--target=", 0) == 0) {
      options.target = arg.substr(9);
      if (*options.target != "cpu" && *options.target != "cpu-reference" &&
          *options.target != "cuda")
        return usageError("unknown target '" + *options.target +
                          "' (expected cpu, cpu-reference or cuda)");
    } else if (arg == "-o") {
      if (i + 1 >= argc || !*argv[i + 1])
        return usageError("-o needs a file name");
      options.output = argv[++i];
    } else if (arg.rfind("-D", 0) == 0) {
      if (arg == "-D" && (i + 1 >= argc || !*argv[i + 1]))
        return usageError("-D needs NAME=VALUE");
      std::string error;
      std::optional<stringc::ConstantOverride> given =
          stringc::parseConstantOverride(arg == "-D" ? argv[++i] : arg.substr(2), error);
      if (!given)
        return usageError(error);
      for (const stringc::ConstantOverride &other : options.overrides)
        if (other.name == given->name)
          return usageError("-D " + given->name + " given twice");
      options.overrides.push_back(*given);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usageError("unknown option '" + arg + "' (see stringc --help)");
    } else if (haveInput) {
      return usageError("more than one input file ('" + options.input + "' and '" + arg + "')");
    } else {
      options.input = arg;
      haveInput = true;
    }
  }
  if (!haveInput)
    return usageError("no input file (see stringc --help)");
  bool gpuEmit = options.emit == Emit::Nvvm || options.emit == Emit::Ptx ||
                 options.emit == Emit::LaunchReport;
  if (gpuEmit && options.target && *options.target != "cuda")
    return usageError("--emit=nvvm, --emit=ptx and --launch-report are for --target=cuda");
  if (gpuEmit)
    options.target = "cuda";
  if ((options.ranks > 0 || !options.interconnect.empty()) && options.emit != Emit::LaunchReport)
    return usageError(options.ranks > 0 ? "--ranks is for --launch-report"
                                        : "--interconnect is for --launch-report --ranks=N");
  if (!options.interconnect.empty() && options.ranks == 0)
    return usageError("--interconnect is for --launch-report --ranks=N");
  if (options.ranks > 0 && options.reportFormat == "json")
    return usageError("--ranks is for the text launch report, not --launch-report=json");
  const bool gpuKernelOptions = options.gpuArch || options.gpuAllKernels ||
                                options.gpuPrecision || !options.gpuKernels.empty();
  const char *gpuKernelOption = options.gpuArch         ? "--gpu-arch"
                                : options.gpuPrecision ? "--gpu-precision"
                                : options.gpuAllKernels ? "--gpu-all-kernels"
                                                        : "--gpu-kernel";
  if (gpuKernelOptions && (!options.target || *options.target != "cuda"))
    return usageError(std::string(gpuKernelOption) + " is for --target=cuda");
  if (options.gpuModel && options.emit != Emit::LaunchReport)
    return usageError("--gpu-model is for --launch-report");
  bool cpuEmit = options.emit == Emit::Kernels || options.emit == Emit::Llvm;
  if (cpuEmit && options.target && *options.target != "cpu")
    return usageError("--emit=kernels and --emit=llvm are for --target=cpu");
  // The passes' view of a target: --emit=pe-opt, pe-train and --explain
  // show what that target's package runs (--target=cpu adds its own passes).
  bool passView = isPassView(options.emit);
  if (options.target && !gpuEmit && !cpuEmit && !passView) {
    if (options.emitGiven && options.emit != Emit::Package)
      return usageError("--target=" + *options.target +
                        " writes a package; it cannot be combined with another --emit kind "
                        "than pe-opt, pe-train or --explain");
    options.emit = Emit::Package;
  }
  if (passView && gpuKernelOptions)
    return usageError(std::string(gpuKernelOption) +
                      " shapes the GPU kernels, which --emit=pe-opt, --emit=pe-train and "
                      "--explain do not show");
  if (cpuEmit)
    options.compile.target = "cpu";
  else if (options.target)
    options.compile.target = *options.target;
  if (options.emit == Emit::Package && (!options.output || *options.output == "-"))
    return usageError("a package is a binary file: give it a name with -o FILE");
  return std::nullopt;
}

/// Writes `text` to standard output; a failed write (a full disk, a closed
/// pipe) is an error with a message, not lost output.
int writeStandardOutput(const std::string &text) {
  std::cout << text;
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0)
    return 0;
  std::cerr << "stringc: error: cannot write to standard output"
            << (errno ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
  return 1;
}

/// Whether `a` and `b` name the same file: the same device and inode when
/// both exist, else the same normalised absolute path.
bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ec;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

/// Refuses an output path that is one of the compilation's inputs: the .pe
/// file or a weights file a parameter loads.
std::optional<int> refuseOutputOverInput(const Options &options,
                                         const stringc::ModelGraph &graph) {
  if (!options.output || *options.output == "-")
    return std::nullopt;
  std::vector<std::string> inputs = {options.input};
  for (const stringc::GraphParam &param : graph.params)
    if (const stringc::AttrValue *file = stringc::findAttr(param.initAttrs, "file"))
      if (const std::string *path = std::get_if<std::string>(file))
        inputs.push_back(*path);
  for (const std::string &input : inputs)
    if (sameFile(*options.output, input))
      return usageError("-o " + *options.output + " is an input of the compilation (" + input +
                        "); writing it would destroy it");
  return std::nullopt;
}

/// Writes `text` to `path` through a temporary file renamed over it, so a
/// reader never sees a partial file and a failure leaves the old one intact.
bool writeAtomically(const std::string &path, const std::string &text) {
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (out)
      out << text;
    out.flush();
    if (!out) {
      int error = errno;
      std::remove(temp.c_str());
      std::cerr << "stringc: error: cannot write '" << path << "': " << std::strerror(error) << "\n";
      return false;
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(temp.c_str());
    std::cerr << "stringc: error: cannot write '" << path << "': " << std::strerror(error) << "\n";
    return false;
  }
  return true;
}

int emitMlir(const stringc::ModelGraph &graph, std::ostream &out, Emit emit,
             const Options &options) {
  if (emit == Emit::Explain)
    return stringc::explainModel(graph, out, std::cerr, options.compile, options.explainBatch) == 0 ? 0 : 1;
  stringc::EmitStage stage = emit == Emit::PeTrain   ? stringc::EmitStage::Train
                             : emit == Emit::PeOpt   ? stringc::EmitStage::Optimized
                             : emit == Emit::Kernels ? stringc::EmitStage::Kernels
                             : emit == Emit::Llvm    ? stringc::EmitStage::LLVMIR
                                                     : stringc::EmitStage::Forward;
  return stringc::printModelAsMLIR(graph, out, std::cerr, stage, options.compile) == 0 ? 0 : 1;
}

/// Compiles to a model package (docs/package.md) at `path`.
int emitPackage(const stringc::ModelGraph &graph, const std::string &path,
                const Options &options) {
  // "cpu" (with generated kernels) unless --target=cpu-reference.
  const std::string target = options.target.value_or("cpu");
  return stringc::writeModelPackage(graph, path, target, std::cerr, options.compile) == 0 ? 0 : 1;
}

/// --target=cuda: the pe-train module compiled to GPU kernels (docs/cuda.md):
/// a package at -o, or NVVM / PTX / the launch report as text.
int emitCuda(const stringc::ModelGraph &graph, const Options &options) {
  stringc::CudaOptions cuda;
  if (options.gpuArch)
    cuda.arch = *options.gpuArch;
  cuda.allKernels = options.gpuAllKernels;
  cuda.extraKernels = options.gpuKernels;
  if (options.gpuPrecision)
    cuda.precision = *options.gpuPrecision;
  cuda.reportFormat = options.reportFormat;
  if (options.gpuModel)
    cuda.reportMachine = *options.gpuModel;
  cuda.reportBatch = options.explainBatch;
  cuda.reportRanks = options.ranks;
  cuda.reportInterconnect = options.interconnect;
  stringc::CudaEmit what = options.emit == Emit::Nvvm           ? stringc::CudaEmit::NVVM
                           : options.emit == Emit::Ptx          ? stringc::CudaEmit::PTX
                           : options.emit == Emit::LaunchReport ? stringc::CudaEmit::LaunchReport
                                                                : stringc::CudaEmit::Package;
  std::ostringstream text;
  if (stringc::compileModelForCuda(graph, options.compile, cuda, what, text,
                                   options.output.value_or(""), std::cerr) != 0)
    return 1;
  if (what == stringc::CudaEmit::Package)
    return 0;
  if (options.output && *options.output != "-")
    return writeAtomically(*options.output, text.str()) ? 0 : 1;
  return writeStandardOutput(text.str());
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (std::optional<int> status = parseOptions(argc, argv, options))
    return *status;
  // Pass switches are checked whatever is emitted: a typo is never silent.
  if (std::string error; !stringc::checkPassOptions(options.compile, error))
    return usageError(error);

  std::string readError;
  std::optional<stringc::SourceManager> sources = stringc::SourceManager::fromFile(options.input, readError);
  if (!sources)
    return usageError("cannot open '" + options.input + "': " + readError);

  stringc::DiagnosticEngine diags(*sources);
  auto frontendStart = std::chrono::steady_clock::now();
  std::optional<stringc::ModelGraph> graph =
      stringc::compileModel(*sources, diags, stringc::modelBaseDir(options.input), options.overrides);
  if (options.compile.timePhases) {
    std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - frontendStart;
    char text[32];
    std::snprintf(text, sizeof text, "%.1f ms", elapsed.count());
    std::cerr << "stringc: time: frontend (parse, check, graph): " << text << "\n";
  }
  if (!graph) {
    diags.print(std::cerr);
    diags.printSummary(std::cerr);
    return 1;
  }
  if (std::optional<int> refused = refuseOutputOverInput(options, *graph))
    return *refused;

  if (options.target && *options.target == "cuda" && !isPassView(options.emit))
    return emitCuda(*graph, options);
  if (options.emit == Emit::Package)
    return emitPackage(*graph, *options.output, options);

  std::ostringstream text;
  if (options.emit == Emit::Graph) {
    stringc::printGraph(*graph, text);
  } else if (options.emit == Emit::Pytorch) {
    if (!stringc::emitPytorch(*graph, text, std::cerr))
      return 1;
  } else if (int status = emitMlir(*graph, text, options.emit, options)) {
    return status;
  }
  if (options.output && *options.output != "-")
    return writeAtomically(*options.output, text.str()) ? 0 : 1;
  return writeStandardOutput(text.str());
}
