//===- stringc.cpp - the stringc driver -----------------------------------===//
//
//   stringc model.pe [--emit=graph|mlir|pe-train] [-o FILE]
//   stringc model.pe --target=cpu -o model.pkg     (also --emit=package)
//
// Exit status: 0 on success, 1 when the model has errors (or output fails),
// 2 on a usage error (bad flag, unreadable input file).
//
//===----------------------------------------------------------------------===//

#include "stringc/Frontend/Frontend.h"
#include "stringc/Frontend/Graph.h"
#include "stringc/MLIRGen/MLIRGen.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

constexpr const char *kUsage = R"(usage: stringc MODEL.pe [options]

Compiles a .pe model description.

options:
  --emit=mlir    print the model in the pe dialect (default)
  --emit=pe-train
                 print the model in the pe dialect with @gradients added: the
                 loss and the gradient of every trainable parameter (the
                 pe-autodiff pass, docs/autodiff.md)
  --emit=graph   print the checked model graph (a readable dump)
  --target=cpu   compile to a model package (docs/package.md) for the CPU
                 runtime; needs -o (packages are binary)
  --emit=package the same as --target=cpu
  -o FILE        write the output to FILE instead of standard output
                 (written only on success, atomically)
  --help         show this help
  --version      show the version
)";

enum class Emit { Mlir, Graph, PeTrain, Package };

struct Options {
  std::string input;
  std::optional<std::string> output;
  Emit emit = Emit::Mlir;
  bool emitGiven = false;
  std::optional<std::string> target; // --target=NAME as given
};

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
    if (arg == "--emit=mlir") {
      options.emit = Emit::Mlir;
      options.emitGiven = true;
    } else if (arg == "--emit=graph") {
      options.emit = Emit::Graph;
      options.emitGiven = true;
    } else if (arg == "--emit=pe-train") {
      options.emit = Emit::PeTrain;
      options.emitGiven = true;
    } else if (arg == "--emit=package") {
      options.emit = Emit::Package;
      options.emitGiven = true;
    } else if (arg.rfind("--emit=", 0) == 0) {
      return usageError("unknown --emit kind '" + arg.substr(7) +
                        "' (expected graph, mlir, pe-train or package)");
    } else if (arg.rfind("--target=", 0) == 0) {
      options.target = arg.substr(9);
      if (*options.target != "cpu")
        return usageError("unknown target '" + *options.target + "' (expected cpu)");
    } else if (arg == "-o") {
      if (i + 1 >= argc)
        return usageError("-o needs a file name");
      options.output = argv[++i];
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
  if (options.target) {
    if (options.emitGiven && options.emit != Emit::Package)
      return usageError("--target=" + *options.target +
                        " writes a package; it cannot be combined with another --emit kind");
    options.emit = Emit::Package;
  }
  if (options.emit == Emit::Package && (!options.output || *options.output == "-"))
    return usageError("a package is a binary file: give it a name with -o FILE");
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

int emitMlir(const stringc::ModelGraph &graph, std::ostream &out, Emit emit) {
#ifdef STRINGC_HAVE_MLIRGEN
  stringc::EmitStage stage =
      emit == Emit::PeTrain ? stringc::EmitStage::Train : stringc::EmitStage::Forward;
  return stringc::printModelAsMLIR(graph, out, std::cerr, stage) == 0 ? 0 : 1;
#else
  (void)graph;
  (void)out;
  std::cerr << "stringc: error: --emit=" << (emit == Emit::PeTrain ? "pe-train" : "mlir")
            << " is not available: the MLIR generator was not built "
               "(use --emit=graph)\n";
  return 1;
#endif
}

/// Compiles to a model package (docs/package.md) at `path`.
int emitPackage(const stringc::ModelGraph &graph, const std::string &path) {
#ifdef STRINGC_HAVE_MLIRGEN
  // The CPU runtime runs packages of the reference target.
  return stringc::writeModelPackage(graph, path, "cpu-reference", std::cerr) == 0 ? 0 : 1;
#else
  (void)graph;
  (void)path;
  std::cerr << "stringc: error: --target=cpu is not available: the MLIR generator was not built\n";
  return 1;
#endif
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (std::optional<int> status = parseOptions(argc, argv, options))
    return *status;

  std::string readError;
  std::optional<stringc::SourceManager> sources = stringc::SourceManager::fromFile(options.input, readError);
  if (!sources)
    return usageError("cannot open '" + options.input + "': " + readError);

  stringc::DiagnosticEngine diags(*sources);
  std::optional<stringc::ModelGraph> graph =
      stringc::compileModel(*sources, diags, stringc::modelBaseDir(options.input));
  if (!graph) {
    diags.print(std::cerr);
    diags.printSummary(std::cerr);
    return 1;
  }

  if (options.emit == Emit::Package)
    return emitPackage(*graph, *options.output);

  std::ostringstream text;
  if (options.emit == Emit::Graph) {
    stringc::printGraph(*graph, text);
  } else if (int status = emitMlir(*graph, text, options.emit)) {
    return status;
  }
  if (options.output && *options.output != "-")
    return writeAtomically(*options.output, text.str()) ? 0 : 1;
  std::cout << text.str();
  std::cout.flush();
  return std::cout ? 0 : 1;
}
