//===- Compilation.cpp - build, verify and run the passes -----------------===//
//
// See Compilation.h.
//
//===----------------------------------------------------------------------===//
#include "Compilation.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/CudaGen/CudaTarget.h"
#include "stringc/MLIRGen/MLIRGen.h"
#include "stringc/Transforms/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>
#include <map>

using namespace mlir;

namespace stringc {
namespace {

PipelineOptions pipelineOptions(const CompileOptions &options, bool explain) {
  PipelineOptions pipeline;
  pipeline.disabled = options.disabledPasses;
  pipeline.enabled = options.enabledPasses;
  pipeline.pipeline = options.passPipeline;
  pipeline.explain = explain;
  pipeline.approximate = options.approximate;
  pipeline.target = options.target;
  return pipeline;
}

} // namespace

bool checkPassOptions(const CompileOptions &options, std::string &error) {
  mlir::OpPassManager scratch(mlir::ModuleOp::getOperationName());
  return succeeded(buildPipeline(scratch, pipelineOptions(options, /*explain=*/false), error));
}

Compilation::Compilation(const ModelGraph &graph, std::ostream &diagOut,
                         const CompileOptions &options, bool withCuda)
    : graph(graph), options(options), diagStream(diagOut),
      diagnostics(sourceMgr, &context, diagStream) {
  if (withCuda) {
    DialectRegistry registry;
    registerCudaTargetDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
  // The op's generic form, which MLIR attaches to diagnostics by default,
  // would mean nothing to the author of the .pe file.
  context.printOpOnDiagnostic(false);
}

Compilation::Phase::Phase(Compilation &compilation, const char *name)
    : out(compilation.options.timePhases ? &compilation.diagStream : nullptr), name(name),
      start(std::chrono::steady_clock::now()) {}

Compilation::Phase::~Phase() {
  if (!out)
    return;
  std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", elapsed.count());
  *out << "stringc: time: " << name << ": " << text << "\n";
  out->flush();
}

FailureOr<OwningOpRef<ModuleOp>> Compilation::build(EmitStage stage, bool explain,
                                                  std::optional<std::string> disableAlso) {
  FailureOr<OwningOpRef<ModuleOp>> module = failure();
  {
    Phase phase(*this, "MLIR generation and verification");
    module = buildModule(context, graph);
    if (failed(module) || failed(verify(**module)))
      return failure();
  }
  if (stage == EmitStage::Forward)
    return module;

  PassManager pm(&context);
  // --pass-statistics counts the rewrites each pass reports. (MLIR's own
  // pass Statistic counters are compiled out of LLVM release builds such
  // as Debian's, so they would all read 0.)
  PipelineOptions pipeline = pipelineOptions(options, explain || options.passStatistics);
  std::map<std::string, int> rewrites;
  std::optional<ScopedDiagnosticHandler> counter;
  if (options.passStatistics)
    counter.emplace(&context, [&, explain](Diagnostic &diag) -> LogicalResult {
      std::string text = diag.str();
      if (diag.getSeverity() != DiagnosticSeverity::Remark || text.rfind("[", 0) != 0)
        return failure(); // not a rewrite report: the next handler prints it
      ++rewrites[text.substr(1, text.find(']') - 1)];
      return explain ? failure() : success();
    });
  if (disableAlso)
    pipeline.disabled.insert(*disableAlso);
  pipeline.skipAutodiff = stage == EmitStage::Optimized;
  std::string error;
  if (failed(buildPipeline(pm, pipeline, error))) {
    diagStream << "stringc: error: " << error << "\n";
    diagStream.flush();
    return failure();
  }
  if (options.printIRAfterAll) {
    // Printing needs the module to be single-threaded; it is small.
    context.disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, diagStream);
  }
  // Each pass's time, as MLIR's pass timing report (to stderr).
  if (options.timePhases)
    pm.enableTiming();
  {
    Phase phase(*this, "passes");
    if (failed(pm.run(**module)))
      return failure();
  }
  if (options.passStatistics) {
    diagStream << "stringc: pass statistics (rewrites that fired):\n";
    for (StringRef name : defaultPassNames(pipeline.target))
      if (!pipeline.disabled.count(name.str()))
        diagStream << "  " << name << std::string(name.size() < 28 ? 28 - name.size() : 1, ' ')
                   << rewrites[name.str()] << "\n";
    diagStream.flush();
  }
  return module;
}

} // namespace stringc
