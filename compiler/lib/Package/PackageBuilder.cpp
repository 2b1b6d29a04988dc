//===- PackageBuilder.cpp - pe module -> model package --------------------===//
//
// Walks @forward and @gradients, numbers every value (arguments first, then
// op results in order), and fills the runtime's stringrt::Manifest with each
// op's operand and result ids and its attributes; stringrt::writePackage
// writes it (the format's one writer, beside its reader; docs/package.md).
// Default-valued attributes are always written, so the runtime never needs
// the dialect's defaults. What the format cannot hold is reported here, on
// the op, before anything is written.
//
//===----------------------------------------------------------------------===//
#include "stringc/Package/PackageBuilder.h"
#include "stringc/Package/ArenaPlanner.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "stringrt/Error.h"
#include "stringrt/JsonText.h"
#include "stringrt/OpSchema.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <cstdint>
#include <vector>

using namespace mlir;

namespace stringc {
namespace {

/// The format's word for an enum value: the value whose name is `word`.
template <typename Enum, size_t N>
std::optional<Enum> fromName(llvm::StringRef word, const Enum (&values)[N],
                             const char *(*name)(Enum)) {
  for (Enum value : values)
    if (word == name(value))
      return value;
  return std::nullopt;
}

class ManifestBuilder {
public:
  ManifestBuilder(ModuleOp module, const PackageKernels *kernels)
      : module(module), kernels(kernels) {}

  FailureOr<stringrt::Manifest> build() {
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    auto gradients = module.lookupSymbol<func::FuncOp>("gradients");
    if (!forward || !gradients)
      return module.emitError()
             << "a package needs @forward and @gradients (run pe-autodiff "
                "first)";

    if (failed(text(module, module.getSymName().value_or("model"), manifest.model)) ||
        failed(buildInputs(forward)) || failed(buildParams()) ||
        failed(buildOptimizer()) || failed(buildDataset()) ||
        failed(buildProgram(forward, forward, manifest.forward)) ||
        failed(buildProgram(gradients, forward, manifest.gradients)))
      return failure();
    return std::move(manifest);
  }

private:
  LogicalResult text(Operation *op, llvm::StringRef value, std::string &out) {
    if (!stringrt::isValidUtf8(std::string_view(value.data(), value.size())))
      return op->emitError() << "string is not valid UTF-8; a package "
                                "cannot hold it";
    out = value.str();
    return success();
  }
  LogicalResult number(Operation *op, double value, llvm::StringRef what, double &out) {
    if (!std::isfinite(value))
      return op->emitError() << what << " is not finite; a package cannot "
                                        "hold it";
    out = value;
    return success();
  }

  /// f32 or i32, and the shape with -1 for dynamic (batch) dimensions.
  LogicalResult type(Operation *op, Type type, stringrt::DType &dtype,
                     std::vector<int64_t> &shape) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return op->emitError() << "a package needs ranked tensor values, got "
                             << type;
    Type element = tensor.getElementType();
    if (element.isF32())
      dtype = stringrt::DType::F32;
    else if (element.isSignlessInteger(32))
      dtype = stringrt::DType::I32;
    else
      return op->emitError() << "a package holds f32 and i32 tensors, got "
                             << type;
    shape.clear();
    for (int64_t dim : tensor.getShape())
      shape.push_back(ShapedType::isDynamic(dim) ? stringrt::kBatchDim : dim);
    return success();
  }

  LogicalResult buildInputs(func::FuncOp forward) {
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      auto name = forward.getArgAttrOfType<StringAttr>(i, "pe.input");
      if (!name)
        return forward.emitError() << "argument " << i
                                   << " of @forward has no pe.input name";
      stringrt::ManifestInput &input = manifest.inputs.emplace_back();
      if (failed(text(forward, name.getValue(), input.name)) ||
          failed(type(forward, forward.getArgument(i).getType(), input.dtype, input.shape)))
        return failure();
    }
    return success();
  }

  LogicalResult buildParams() {
    using stringrt::ParamInit;
    static constexpr ParamInit kInits[] = {ParamInit::Normal,   ParamInit::Uniform,
                                           ParamInit::Zeros,    ParamInit::Ones,
                                           ParamInit::Constant, ParamInit::Load};
    for (auto param : module.getOps<pe::ParameterOp>()) {
      stringrt::ManifestParam &p = manifest.params.emplace_back();
      if (failed(text(param, param.getSymName(), p.name)))
        return failure();
      llvm::ArrayRef<int64_t> shape = param.getTensorType().getShape();
      p.shape.assign(shape.begin(), shape.end());
      p.frozen = bool(param.getFrozen());
      std::optional<ParamInit> init = fromName(param.getInit(), kInits, stringrt::paramInitName);
      if (!init)
        return param.emitError() << "initializer '" << param.getInit()
                                 << "' has no package form";
      p.init = *init;
      // The companions present (the verifier checked they fit `init`).
      auto real = [&](const char *name, std::optional<APFloat> value, double &out) {
        return value ? number(param, value->convertToDouble(), name, out) : success();
      };
      if (failed(real("mean", param.getMean(), p.mean)) ||
          failed(real("std", param.getStd(), p.std)) ||
          failed(real("low", param.getLow(), p.low)) ||
          failed(real("high", param.getHigh(), p.high)) ||
          failed(real("value", param.getValue(), p.value)))
        return failure();
      if (IntegerAttr seed = param.getSeedAttr())
        p.seed = seed.getValue().getZExtValue();
      if (StringAttr file = param.getFileAttr())
        if (failed(text(param, file.getValue(), p.file)))
          return failure();
      if (StringAttr tensor = param.getTensorAttr())
        if (failed(text(param, tensor.getValue(), p.tensor)))
          return failure();
    }
    return success();
  }

  LogicalResult buildOptimizer() {
    using stringrt::LrSchedule;
    using stringrt::OptimizerKind;
    static constexpr OptimizerKind kKinds[] = {OptimizerKind::AdamW, OptimizerKind::Sgd};
    static constexpr LrSchedule kSchedules[] = {LrSchedule::Constant, LrSchedule::WarmupCosine};
    auto ops = module.getOps<pe::OptimizerOp>();
    if (ops.empty())
      return module.emitError() << "a package needs a pe.optimizer";
    pe::OptimizerOp op = *ops.begin();
    stringrt::ManifestOptimizer &opt = manifest.optimizer;
    std::optional<OptimizerKind> kind =
        fromName(op.getKind(), kKinds, stringrt::optimizerKindName);
    std::optional<LrSchedule> schedule =
        fromName(op.getSchedule(), kSchedules, stringrt::lrScheduleName);
    if (!kind || !schedule)
      return op.emitError() << "optimizer '" << op.getKind() << "' with schedule '"
                            << op.getSchedule() << "' has no package form";
    opt.kind = *kind;
    opt.schedule = *schedule;
    std::pair<const char *, std::pair<APFloat, double *>> numbers[] = {
        {"lr", {op.getLr(), &opt.lr}},
        {"beta1", {op.getBeta1(), &opt.beta1}},
        {"beta2", {op.getBeta2(), &opt.beta2}},
        {"eps", {op.getEps(), &opt.eps}},
        {"weight_decay", {op.getWeightDecay(), &opt.weightDecay}},
        {"momentum", {op.getMomentum(), &opt.momentum}},
        {"clip_norm", {op.getClipNorm(), &opt.clipNorm}},
        {"min_lr", {op.getMinLr(), &opt.minLr}},
        {"ema_decay", {op.getEmaDecay(), &opt.emaDecay}},
    };
    for (auto &[name, value] : numbers)
      if (failed(number(op, value.first.convertToDouble(), name, *value.second)))
        return failure();
    opt.warmupSteps = int64_t(op.getWarmupSteps());
    return success();
  }

  LogicalResult buildDataset() {
    using stringrt::DatasetKind;
    static constexpr DatasetKind kKinds[] = {DatasetKind::Idx, DatasetKind::Text};
    auto ops = module.getOps<pe::DatasetOp>();
    if (ops.empty())
      return success();
    pe::DatasetOp op = *ops.begin();
    stringrt::ManifestDataset &dataset = manifest.dataset.emplace();
    std::optional<DatasetKind> kind = fromName(op.getKind(), kKinds, stringrt::datasetKindName);
    if (!kind)
      return op.emitError() << "dataset kind '" << op.getKind() << "' has no package form";
    dataset.kind = *kind;
    if (failed(text(op, op.getPath(), dataset.path)))
      return failure();
    dataset.contextLength = int64_t(op.getContextLength().value_or(0));
    dataset.augment.cropPadding = int64_t(op.getCropPadding().value_or(0));
    if (FloatAttr flip = op.getFlipAttr())
      dataset.augment.flipProbability = flip.getValueAsDouble();
    if (FloatAttr erase = op.getEraseAttr())
      dataset.augment.eraseProbability = erase.getValueAsDouble();
    return success();
  }

  /// One function: the value table, inputs, ops and outputs. The program's
  /// inputs are the manifest's (those of @forward), so `func` must take
  /// exactly @forward's argument types.
  LogicalResult buildProgram(func::FuncOp func, func::FuncOp forward,
                             stringrt::Program &program) {
    if (func.getFunctionType().getInputs() !=
        forward.getFunctionType().getInputs())
      return func.emitError()
             << "@" << func.getSymName()
             << " must take the arguments of @forward, in order";
    if (!llvm::hasSingleElement(func.getBody()))
      return func.emitError() << "a package program is a single block";
    Block &block = func.getBody().front();

    // Number the values: arguments, then every op result in order.
    llvm::DenseMap<Value, stringrt::ValueId> ids;
    auto define = [&](Operation *owner, Value value) {
      ids[value] = program.values.size();
      stringrt::ProgramValue &v = program.values.emplace_back();
      return type(owner, value.getType(), v.dtype, v.shape);
    };
    for (BlockArgument arg : block.getArguments()) {
      if (failed(define(func, arg)))
        return failure();
      program.inputs.push_back(ids[arg]);
    }
    for (Operation &op : block.without_terminator())
      for (Value result : op.getResults())
        if (failed(define(&op, result)))
          return failure();

    for (Operation &op : block.without_terminator())
      if (failed(buildOp(op, ids, program.ops.emplace_back())))
        return failure();

    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    if (!ret)
      return block.getTerminator()->emitError()
             << "a package program ends in func.return";
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto it = ids.find(ret.getOperand(i));
      if (it == ids.end())
        return ret.emitError() << "result " << i << " is not a value of @"
                               << func.getSymName();
      stringrt::ProgramOutput &output = program.outputs.emplace_back();
      output.value = it->second;
      if (auto name = func.getResultAttrOfType<StringAttr>(i, "pe.output")) {
        if (failed(text(func, name.getValue(), output.name)))
          return failure();
      } else if (auto grad = func.getResultAttrOfType<StringAttr>(i, "pe.grad")) {
        if (failed(text(func, grad.getValue(), output.grad)))
          return failure();
      } else {
        return func.emitError() << "result " << i << " of @"
                                << func.getSymName()
                                << " has neither pe.output nor pe.grad";
      }
    }
    return buildArenaPlan(func, program);
  }

  /// The program's arena plan (ArenaPlanner.h, docs/package.md).
  LogicalResult buildArenaPlan(func::FuncOp func, stringrt::Program &program) {
    // The planner's own check (the runtime checks again on load).
    if (std::optional<std::string> problem =
            packageArena(func, {}, program.arena.emplace()))
      return func.emitError() << "internal error: invalid arena plan: " << *problem;
    return success();
  }

  LogicalResult buildOp(Operation &op, const llvm::DenseMap<Value, stringrt::ValueId> &ids,
                        stringrt::ProgramOp &out) {
    llvm::StringRef name = op.getName().getStringRef();
    bool isConstant = isa<arith::ConstantOp>(op);
    if (!isConstant && (!op.getDialect() || !isa<pe::PEDialect>(op.getDialect())))
      return op.emitError() << "op '" << name
                            << "' is not supported in a package";
    if (op.getNumRegions() != 0)
      return op.emitError() << "ops with regions are not supported in a "
                               "package";
    out.op = name.str();
    for (Value result : op.getResults())
      out.results.push_back(ids.lookup(result));
    for (Value operand : op.getOperands()) {
      auto it = ids.find(operand);
      if (it == ids.end())
        return op.emitError() << "operand is not a value of this function";
      out.operands.push_back(it->second);
    }

    if (isConstant) {
      auto dense = dyn_cast<DenseElementsAttr>(
          cast<arith::ConstantOp>(op).getValue());
      if (!dense || !dense.isSplat() ||
          !dense.getElementType().isF32())
        return op.emitError() << "a package holds only f32 splat constants";
      double value = 0;
      if (failed(number(&op, dense.getSplatValue<APFloat>().convertToDouble(),
                        "constant", value)))
        return failure();
      out.attrs["value"] = value;
    } else {
      for (NamedAttribute attr : op.getAttrs())
        if (failed(attribute(op, attr, out.attrs[attr.getName().str()])))
          return failure();
      // Attributes with an ODS default (DefaultValuedAttr) absent from the
      // op are written anyway, so that the package does not depend on the
      // dialect's defaults; they come from the op schema generated from the
      // same ODS (stringrt/OpSchema.h).
      std::optional<stringrt::OpCode> code =
          stringrt::findOpCode(std::string_view(name.data(), name.size()));
      if (!code)
        return op.emitError() << "a package cannot hold this op (no runtime op schema)";
      for (const stringrt::AttrSchema &attr : stringrt::opSchema(*code).attrs) {
        if (!attr.defaultValue || out.attrs.count(attr.name))
          continue;
        stringrt::AttrValue &value = out.attrs[attr.name];
        if (attr.kind == stringrt::AttrKind::Bool)
          value = *attr.defaultValue != 0;
        else if (attr.kind == stringrt::AttrKind::Int)
          value = int64_t(*attr.defaultValue);
        else
          value = *attr.defaultValue;
      }
    }
    if (kernels) {
      auto it = kernels->calls.find(&op);
      if (it != kernels->calls.end())
        out.kernels.assign(it->second.begin(), it->second.end());
    }
    return success();
  }

  LogicalResult attribute(Operation &op, NamedAttribute named, stringrt::AttrValue &out) {
    Attribute attr = named.getValue();
    std::string word;
    if (auto flag = dyn_cast<BoolAttr>(attr)) {
      out = flag.getValue();
    } else if (auto integer = dyn_cast<IntegerAttr>(attr)) {
      out = int64_t(integer.getValue().getSExtValue());
    } else if (auto real = dyn_cast<FloatAttr>(attr)) {
      double value = 0;
      if (failed(number(&op, real.getValueAsDouble(), named.getName().getValue(), value)))
        return failure();
      out = value;
    } else if (auto string = dyn_cast<StringAttr>(attr)) {
      if (failed(text(&op, string.getValue(), word)))
        return failure();
      out = std::move(word);
    } else if (auto symbol = dyn_cast<FlatSymbolRefAttr>(attr)) {
      if (failed(text(&op, symbol.getValue(), word)))
        return failure();
      out = std::move(word);
    } else if (auto array = dyn_cast<DenseI64ArrayAttr>(attr)) {
      out = std::vector<int64_t>(array.asArrayRef().begin(), array.asArrayRef().end());
    } else if (auto mask = dyn_cast<pe::MaskKindAttr>(attr)) {
      out = pe::stringifyEnum(mask.getValue()).str();
    } else if (auto mode = dyn_cast<pe::RopeModeAttr>(attr)) {
      out = pe::stringifyEnum(mode.getValue()).str();
    } else if (auto kind = dyn_cast<pe::FreqsKindAttr>(attr)) {
      out = pe::stringifyEnum(kind.getValue()).str();
    } else {
      return op.emitError() << "attribute '" << named.getName().getValue()
                            << "' (" << attr
                            << ") is of a kind a package cannot hold";
    }
    return success();
  }

  ModuleOp module;
  const PackageKernels *kernels;
  stringrt::Manifest manifest;
};

} // namespace

FailureOr<stringrt::Manifest> buildPackageManifest(ModuleOp module,
                                                   const PackageKernels *kernels) {
  return ManifestBuilder(module, kernels).build();
}

LogicalResult writeModulePackage(ModuleOp module, const std::string &path,
                           const std::string &target,
                           const PackageKernels *kernels) {
  if ((target == kCpuTarget) != (kernels != nullptr))
    return module.emitError() << "target '" << target << "' "
                              << (kernels ? "carries no kernels"
                                          : "needs compiled kernels");
  if (kernels && kernels->sharedObject.empty())
    return module.emitError() << "target 'cpu' needs a shared object";
  FailureOr<stringrt::Manifest> manifest = buildPackageManifest(module, kernels);
  if (failed(manifest))
    return failure();
  stringrt::PackageContents contents;
  contents.target = target;
  contents.manifest = std::move(*manifest);
  if (kernels) {
    contents.kernelObject = kernels->sharedObject;
    contents.kernelTriple = kernels->triple;
    contents.kernelCpu = kernels->cpu;
    contents.kernelFeatures = kernels->features;
  }
  try {
    stringrt::writePackage(path, contents);
  } catch (const stringrt::Error &error) {
    return module.emitError() << "cannot write the package: " << error.what();
  }
  return success();
}

} // namespace stringc
