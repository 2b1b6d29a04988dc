//===- Explain.cpp - stringc --explain ------------------------------------===//
//
// Every rewrite that fires (its remark at the .pe source line), the warnings,
// and the training step's cost with all passes, with none, and with each one
// switched off (docs/passes.md).
//
//===----------------------------------------------------------------------===//
#include "Compilation.h"

#include "stringc/Transforms/Explain.h"
#include "stringc/Transforms/Pipeline.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

using namespace mlir;

namespace stringc {
namespace {

/// The training step's cost: @forward and @gradients, at `batch`.
OpCost stepCost(ModuleOp module, int64_t batch) {
  OpCost total;
  for (StringRef name : {"forward", "gradients"})
    if (Operation *func = module.lookupSymbol(name))
      total += estimateFunctionCost(func, batch);
  return total;
}

/// A block instantiated once per layer rewrites the same source line once
/// per layer: print each distinct diagnostic (its first line and the source
/// excerpt under it) once, in first-seen order, with how many times it came.
std::string mergeRepeats(const std::string &text) {
  std::vector<std::string> order;
  std::map<std::string, int> counts;
  std::istringstream lines(text);
  std::string line, block;
  auto flush = [&] {
    if (block.empty())
      return;
    if (counts[block]++ == 0)
      order.push_back(block);
    block.clear();
  };
  auto startsDiagnostic = [](const std::string &line) {
    for (const char *kind : {": remark: ", ": warning: ", ": error: "})
      if (line.find(kind) != std::string::npos && line[0] != ' ')
        return true;
    return false;
  };
  while (std::getline(lines, line)) {
    if (startsDiagnostic(line))
      flush();
    block += line + "\n";
  }
  flush();
  std::string merged;
  for (const std::string &each : order) {
    int count = counts[each];
    size_t endOfFirstLine = each.find('\n');
    merged += each.substr(0, endOfFirstLine);
    if (count > 1)
      merged += " [" + std::to_string(count) + " times]";
    merged += each.substr(endOfFirstLine);
  }
  return merged;
}

std::string ratio(double before, double after) {
  if (after <= 0)
    return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", before / after);
  return text;
}

} // namespace

int explainModel(const ModelGraph &graph, std::ostream &out, std::ostream &err,
                 const CompileOptions &options, int64_t batch) {
  // The remarks of every rewrite that fires, and the warnings, go to `out`.
  OpCost withAll;
  {
    // Remarks and warnings go to `out`; on failure, with the errors, to `err`.
    std::ostringstream printed;
    Compilation compilation(graph, printed, options);
    FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(EmitStage::Train, /*explain=*/true);
    compilation.diagnosticStream().flush();
    (failed(module) ? err : out) << (failed(module) ? printed.str() : mergeRepeats(printed.str()));
    if (failed(module))
      return 1;
    withAll = stepCost(**module, batch);
  }
  OpCost without;
  {
    CompileOptions none = options;
    none.passPipeline = std::string();
    none.printIRAfterAll = none.passStatistics = none.timePhases = false;
    Compilation compilation(graph, err, none);
    FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(EmitStage::Train);
    if (failed(module))
      return 1;
    without = stepCost(**module, batch);
  }

  out << "\ntraining step (forward + gradients), batch " << batch << ":\n";
  out << "  without the passes: " << formatCost(without) << "\n";
  out << "  with the passes:    " << formatCost(withAll) << "  (FLOPs " << ratio(without.flops, withAll.flops)
      << " fewer, bytes " << ratio(without.bytes, withAll.bytes) << " fewer)\n";
  if (options.passPipeline)
    return 0;
  out << "  each pass switched off alone (--disable-pass=NAME):\n";
  for (StringRef name : defaultPassNames(options.target)) {
    if (options.disabledPasses.count(name.str()))
      continue;
    CompileOptions quiet = options;
    quiet.printIRAfterAll = quiet.passStatistics = quiet.timePhases = false;
    std::ostringstream ignored; // its warnings were printed above
    Compilation compilation(graph, ignored, quiet);
    FailureOr<OwningOpRef<ModuleOp>> module =
        compilation.build(EmitStage::Train, /*explain=*/false, name.str());
    if (failed(module)) {
      err << ignored.str();
      return 1;
    }
    OpCost cost = stepCost(**module, batch);
    out << "    " << name.str() << std::string(name.size() < 26 ? 26 - name.size() : 1, ' ')
        << formatCost(cost) << "  (the pass saves " << ratio(cost.flops, withAll.flops)
        << " FLOPs, " << ratio(cost.bytes, withAll.bytes) << " bytes)\n";
  }
  return 0;
}

} // namespace stringc
