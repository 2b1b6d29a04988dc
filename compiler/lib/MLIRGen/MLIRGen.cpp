//===- MLIRGen.cpp - ModelGraph -> pe dialect ------------------------------===//
//
// The graph is already checked by Sema, and its op and attribute names are the
// dialect's, so lowering is generic: one OperationState per graph op, built by
// name. The dialect's verifiers then run over the whole module as a second,
// independent check of every shape rule.
//
//===----------------------------------------------------------------------===//
#include "stringc/MLIRGen/MLIRGen.h"

#include "stringc/Codegen/CpuCodegen.h"
#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Frontend/Graph.h"
#include "stringc/Target/PackageWriter.h"
#include "stringc/Transforms/Explain.h"
#include "stringc/Transforms/Passes.h"
#include "stringc/Transforms/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_os_ostream.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <type_traits>

using namespace mlir;

namespace stringc {
namespace {

class ModuleBuilder {
public:
  ModuleBuilder(MLIRContext &context, const ModelGraph &graph)
      : context(context), graph(graph), builder(&context),
        fileName(builder.getStringAttr(graph.sourcePath)) {}

  FailureOr<OwningOpRef<ModuleOp>> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc({1, 1}), graph.modelName);
    builder.setInsertionPointToEnd(module->getBody());
    addConstantsAttr(*module);
    for (const GraphParam &param : graph.params)
      buildParameter(param);
    buildOptimizer();
    if (graph.dataset)
      buildDataset(*graph.dataset);
    if (failed(buildForward()))
      return failure();
    return module;
  }

private:
  Location loc(SourceLoc at) {
    return FileLineColLoc::get(fileName, at.line, at.col);
  }

  Type elementType(DType dtype) {
    return dtype == DType::F32 ? Type(builder.getF32Type()) : Type(builder.getI32Type());
  }

  RankedTensorType tensorType(const TensorType &type) {
    SmallVector<int64_t> shape;
    for (int64_t dim : type.dims)
      shape.push_back(dim == kBatchDim ? ShapedType::kDynamic : dim);
    return RankedTensorType::get(shape, elementType(type.dtype));
  }

  /// Keyword-valued attributes are the dialect's enum attributes; which enum
  /// depends on the attribute's name.
  FailureOr<Attribute> enumAttr(StringRef attrName, StringRef value, Location at) {
    if (attrName == "mask")
      if (auto kind = pe::symbolizeMaskKind(value))
        return Attribute(pe::MaskKindAttr::get(&context, *kind));
    if (attrName == "mode")
      if (auto mode = pe::symbolizeRopeMode(value))
        return Attribute(pe::RopeModeAttr::get(&context, *mode));
    if (attrName == "kind")
      if (auto kind = pe::symbolizeFreqsKind(value))
        return Attribute(pe::FreqsKindAttr::get(&context, *kind));
    return emitError(at) << "internal error: no enum attribute '" << attrName
                         << "' with value '" << value << "'";
  }

  FailureOr<Attribute> attribute(StringRef attrName, const AttrValue &value, Location at) {
    return std::visit(
        [&](const auto &v) -> FailureOr<Attribute> {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>)
            return Attribute(builder.getI64IntegerAttr(v));
          else if constexpr (std::is_same_v<T, double>)
            return Attribute(builder.getF64FloatAttr(v));
          else if constexpr (std::is_same_v<T, bool>)
            return Attribute(builder.getBoolAttr(v));
          else if constexpr (std::is_same_v<T, std::string>)
            return Attribute(builder.getStringAttr(v));
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            return Attribute(builder.getDenseI64ArrayAttr(v));
          else
            return enumAttr(attrName, v.name, at);
        },
        value);
  }

  LogicalResult addAttributes(NamedAttrList &into, const std::vector<NamedAttr> &attrs,
                              Location at) {
    for (const auto &[name, value] : attrs) {
      FailureOr<Attribute> attr = attribute(name, value, at);
      if (failed(attr))
        return failure();
      into.append(name, *attr);
    }
    return success();
  }

  void addConstantsAttr(ModuleOp module) {
    NamedAttrList constants;
    for (const GraphConstant &c : graph.constants) {
      if (const auto *i = std::get_if<int64_t>(&c.value))
        constants.append(c.name, builder.getI64IntegerAttr(*i));
      else
        constants.append(c.name, builder.getF64FloatAttr(std::get<double>(c.value)));
    }
    module->setAttr("pe.constants", constants.getDictionary(&context));
  }

  void buildParameter(const GraphParam &param) {
    OperationState state(loc(param.loc), pe::ParameterOp::getOperationName());
    state.addAttribute("sym_name", builder.getStringAttr(param.name));
    state.addAttribute("type", TypeAttr::get(tensorType(param.type)));
    state.addAttribute("init", builder.getStringAttr(param.init));
    (void)addAttributes(state.attributes, param.initAttrs, state.location);
    if (param.frozen)
      state.addAttribute("frozen", builder.getUnitAttr());
    builder.create(state);
  }

  void buildOptimizer() {
    const GraphOptimizer &opt = graph.optimizer;
    OperationState state(loc(opt.loc), pe::OptimizerOp::getOperationName());
    (void)addAttributes(state.attributes, opt.attributes(), state.location);
    builder.create(state);
  }

  void buildDataset(const GraphDataset &dataset) {
    OperationState state(loc(dataset.loc), pe::DatasetOp::getOperationName());
    (void)addAttributes(state.attributes, dataset.attributes(), state.location);
    builder.create(state);
  }

  /// func.func @forward(inputs...) -> (loss, outputs...).
  LogicalResult buildForward() {
    SmallVector<Type> argTypes, resultTypes;
    for (const GraphInput &input : graph.inputs)
      argTypes.push_back(tensorType(input.type));
    resultTypes.push_back(tensorType(graph.typeOf(graph.lossId)));
    for (const GraphOutput &output : graph.outputs)
      resultTypes.push_back(tensorType(graph.typeOf(output.valueId)));

    auto func = builder.create<func::FuncOp>(loc({1, 1}), "forward",
                                             builder.getFunctionType(argTypes, resultTypes));
    for (auto [i, input] : llvm::enumerate(graph.inputs))
      func.setArgAttr(i, "pe.input", builder.getStringAttr(input.name));
    func.setResultAttr(0, "pe.output", builder.getStringAttr("loss"));
    for (auto [i, output] : llvm::enumerate(graph.outputs))
      func.setResultAttr(i + 1, "pe.output", builder.getStringAttr(output.name));

    Block *body = func.addEntryBlock();
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(body);

    values.assign(graph.values.size(), Value());
    for (const GraphInput &input : graph.inputs)
      values[input.valueId] = body->getArgument(&input - graph.inputs.data());
    for (const GraphOp &op : graph.ops)
      if (failed(buildOp(op)))
        return failure();

    SmallVector<Value> results{values[graph.lossId]};
    for (const GraphOutput &output : graph.outputs)
      results.push_back(values[output.valueId]);
    builder.create<func::ReturnOp>(loc(graph.lossLoc), results);
    return success();
  }

  LogicalResult buildOp(const GraphOp &op) {
    Location at = loc(op.loc);
    OperationState state(at, op.name);
    for (int operand : op.operands)
      state.operands.push_back(values[operand]);
    state.types.push_back(tensorType(op.result));
    if (op.name == pe::GetParamOp::getOperationName()) {
      // The graph names the parameter by string; the dialect by symbol.
      const auto *name = std::get_if<std::string>(op.attr("param"));
      if (!name)
        return emitError(at) << "internal error: pe.get_param without a parameter name";
      state.addAttribute("param", FlatSymbolRefAttr::get(&context, *name));
    } else if (failed(addAttributes(state.attributes, op.attrs, at))) {
      return failure();
    }
    values[op.resultId] = builder.create(state)->getResult(0);
    return success();
  }

  MLIRContext &context;
  const ModelGraph &graph;
  OpBuilder builder;
  StringAttr fileName;
  std::vector<Value> values; // by graph value id
};

} // namespace

namespace {

PipelineOptions pipelineOptions(const CompileOptions &options, bool explain) {
  PipelineOptions pipeline;
  pipeline.disabled = options.disabledPasses;
  pipeline.enabled = options.enabledPasses;
  pipeline.pipeline = options.passPipeline;
  pipeline.explain = explain;
  pipeline.approximate = options.approximate;
  return pipeline;
}

} // namespace

bool checkPassOptions(const CompileOptions &options, std::string &error) {
  mlir::OpPassManager scratch(mlir::ModuleOp::getOperationName());
  return succeeded(buildPipeline(scratch, pipelineOptions(options, /*explain=*/false), error));
}

namespace {

/// One compilation: an MLIR context whose diagnostics point into the .pe
/// file (the op locations are its line:col), printed as
/// file:line:col: error: ... like the frontend's, to `diagOut`.
class Compilation {
public:
  Compilation(const ModelGraph &graph, std::ostream &diagOut, const CompileOptions &options)
      : graph(graph), options(options), diagStream(diagOut),
        diagnostics(sourceMgr, &context, diagStream) {
    context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
    // The op's generic form, which MLIR attaches to diagnostics by default,
    // would mean nothing to the author of the .pe file.
    context.printOpOnDiagnostic(false);
  }

  /// Prints "stringc: time: NAME: 12.3 ms" when it goes out of scope and
  /// --time-phases is on.
  class Phase {
  public:
    Phase(Compilation &compilation, const char *name)
        : out(compilation.options.timePhases ? &compilation.diagStream : nullptr), name(name),
          start(std::chrono::steady_clock::now()) {}
    ~Phase() {
      if (!out)
        return;
      std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
      char text[32];
      std::snprintf(text, sizeof text, "%.1f ms", elapsed.count());
      *out << "stringc: time: " << name << ": " << text << "\n";
      out->flush();
    }

  private:
    llvm::raw_ostream *out;
    const char *name;
    std::chrono::steady_clock::time_point start;
  };

  /// Builds the module and runs the passes up to `stage`.
  FailureOr<OwningOpRef<ModuleOp>> build(EmitStage stage, bool explain = false,
                                         std::optional<std::string> disableAlso = {}) {
    FailureOr<OwningOpRef<ModuleOp>> module = failure();
    {
      Phase phase(*this, "MLIR generation and verification");
      module = ModuleBuilder(context, graph).build();
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
      for (StringRef name : optimizationPassNames())
        if (!pipeline.disabled.count(name.str()))
          diagStream << "  " << name << std::string(name.size() < 28 ? 28 - name.size() : 1, ' ')
                     << rewrites[name.str()] << "\n";
      diagStream.flush();
    }
    return module;
  }

  MLIRContext context;
  const ModelGraph &graph;
  const CompileOptions &options;
  llvm::raw_os_ostream diagStream;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics;
};

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
  Compilation compilation(graph, err, options);
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
    return failed(writePackage(**module, path, target, &*kernels)) ? 1 : 0;
  }
  Compilation::Phase phase(compilation, "package");
  return failed(writePackage(**module, path, target)) ? 1 : 0;
}

int explainModel(const ModelGraph &graph, std::ostream &out, std::ostream &err,
                 const CompileOptions &options, int64_t batch) {
  // The remarks of every rewrite that fires, and the warnings, go to `out`.
  OpCost withAll;
  {
    // Remarks and warnings go to `out`; on failure, with the errors, to `err`.
    std::ostringstream printed;
    Compilation compilation(graph, printed, options);
    FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(EmitStage::Train, /*explain=*/true);
    compilation.diagStream.flush();
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
  for (StringRef name : optimizationPassNames()) {
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
