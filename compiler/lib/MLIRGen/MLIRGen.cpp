//===- MLIRGen.cpp - ModelGraph -> pe dialect ------------------------------===//
//
// The graph is already checked by Sema, and its op and attribute names are the
// dialect's, so lowering is generic: one OperationState per graph op, built by
// name. The dialect's verifiers then run over the whole module as a second,
// independent check of every shape rule.
//
//===----------------------------------------------------------------------===//
#include "stringc/MLIRGen/MLIRGen.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Frontend/Graph.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

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

FailureOr<OwningOpRef<ModuleOp>> buildModule(MLIRContext &context, const ModelGraph &graph) {
  return ModuleBuilder(context, graph).build();
}

} // namespace stringc
