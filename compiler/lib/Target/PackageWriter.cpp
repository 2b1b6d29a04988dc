//===- PackageWriter.cpp - pe module -> model package ----------------------===//
//
// Walks @forward and @gradients, numbers every value (arguments first, then
// op results in order), and writes each op with its operand and result ids
// and its attributes as JSON (docs/package.md). Default-valued attributes are
// always written, so the runtime never needs the dialect's defaults.
//
//===----------------------------------------------------------------------===//
#include "stringc/Target/PackageWriter.h"
#include "stringc/Target/ArenaPlan.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "stringrt/Error.h"
#include "stringrt/JsonText.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/OpSchema.h"
#include "stringrt/Safetensors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

using namespace mlir;

namespace stringc {
namespace {

//===----------------------------------------------------------------------===//
// A minimal JSON writer: commas and escaping; the structure is the caller's.
//===----------------------------------------------------------------------===//

class JsonWriter {
public:
  const std::string &str() const { return out; }

  void beginObject() {
    separate();
    out += '{';
    first.push_back(true);
  }
  void endObject() {
    first.pop_back();
    out += '}';
  }
  void beginArray() {
    separate();
    out += '[';
    first.push_back(true);
  }
  void endArray() {
    first.pop_back();
    out += ']';
  }
  // The next value is this member's.
  void key(llvm::StringRef name) {
    separate();
    appendString(name);
    out += ':';
    afterKey = true;
  }

  void value(llvm::StringRef text) {
    separate();
    appendString(text);
  }
  void value(const char *text) { value(llvm::StringRef(text)); }
  void value(bool flag) {
    separate();
    out += flag ? "true" : "false";
  }
  void value(int64_t number) {
    separate();
    out += std::to_string(number);
  }
  void value(uint64_t number) {
    separate();
    out += std::to_string(number);
  }
  // `number` must be finite. The shortest text that reads back as exactly
  // `number`; always with a fraction or exponent, so it reads as a float.
  void value(double number) {
    separate();
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, number);
    std::string text(buffer, result.ptr);
    if (text.find_first_of(".e") == std::string::npos)
      text += ".0";
    out += text;
  }
  void value(llvm::ArrayRef<int64_t> numbers) {
    beginArray();
    for (int64_t n : numbers)
      value(n);
    endArray();
  }

private:
  void separate() {
    if (afterKey) {
      afterKey = false;
      return;
    }
    if (!first.empty()) {
      if (!first.back())
        out += ',';
      first.back() = false;
    }
  }

  // `text` must be valid UTF-8 (checked by the caller).
  void appendString(llvm::StringRef text) {
    stringrt::appendJsonString(out, std::string_view(text.data(), text.size()));
  }

  std::string out;
  std::vector<bool> first;
  bool afterKey = false;
};

//===----------------------------------------------------------------------===//
// The manifest.
//===----------------------------------------------------------------------===//

class ManifestBuilder {
public:
  ManifestBuilder(ModuleOp module, const PackageKernels *kernels)
      : module(module), kernels(kernels) {}

  FailureOr<std::string> build() {
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    auto gradients = module.lookupSymbol<func::FuncOp>("gradients");
    if (!forward || !gradients)
      return module.emitError()
             << "a package needs @forward and @gradients (run pe-autodiff "
                "first)";

    json.beginObject();
    json.key("model");
    if (failed(string(module, module.getSymName().value_or("model"))))
      return failure();
    if (failed(writeInputs(forward)) || failed(writeParams()) ||
        failed(writeOptimizer()) || failed(writeDataset()))
      return failure();
    json.key("programs");
    json.beginObject();
    json.key("forward");
    if (failed(writeProgram(forward, forward)))
      return failure();
    json.key("gradients");
    if (failed(writeProgram(gradients, forward)))
      return failure();
    json.endObject();
    json.endObject();
    return json.str();
  }

private:
  LogicalResult string(Operation *op, llvm::StringRef text) {
    if (!stringrt::isValidUtf8(std::string_view(text.data(), text.size())))
      return op->emitError() << "string is not valid UTF-8; a package "
                                "cannot hold it";
    json.value(text);
    return success();
  }
  LogicalResult number(Operation *op, double value, llvm::StringRef what) {
    if (!std::isfinite(value))
      return op->emitError() << what << " is not finite; a package cannot "
                                        "hold it";
    json.value(value);
    return success();
  }

  /// "f32" / "i32" and the shape with -1 for dynamic (batch) dimensions.
  LogicalResult type(Operation *op, Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return op->emitError() << "a package needs ranked tensor values, got "
                             << type;
    Type element = tensor.getElementType();
    const char *dtype = element.isF32()                  ? "f32"
                        : element.isSignlessInteger(32) ? "i32"
                                                          : nullptr;
    if (!dtype)
      return op->emitError() << "a package holds f32 and i32 tensors, got "
                             << type;
    json.key("dtype");
    json.value(dtype);
    json.key("shape");
    std::vector<int64_t> shape;
    for (int64_t dim : tensor.getShape())
      shape.push_back(ShapedType::isDynamic(dim) ? int64_t(-1) : dim);
    json.value(llvm::ArrayRef<int64_t>(shape));
    return success();
  }

  LogicalResult writeInputs(func::FuncOp forward) {
    json.key("inputs");
    json.beginArray();
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      auto name = forward.getArgAttrOfType<StringAttr>(i, "pe.input");
      if (!name)
        return forward.emitError() << "argument " << i
                                   << " of @forward has no pe.input name";
      json.beginObject();
      json.key("name");
      if (failed(string(forward, name.getValue())) ||
          failed(type(forward, forward.getArgument(i).getType())))
        return failure();
      json.endObject();
    }
    json.endArray();
    return success();
  }

  LogicalResult writeParams() {
    json.key("params");
    json.beginArray();
    for (auto param : module.getOps<pe::ParameterOp>()) {
      json.beginObject();
      json.key("name");
      if (failed(string(param, param.getSymName())))
        return failure();
      json.key("shape");
      json.value(param.getTensorType().getShape());
      json.key("frozen");
      json.value(bool(param.getFrozen()));
      json.key("init");
      if (failed(string(param, param.getInit())))
        return failure();
      // The companions present (the verifier checked they fit `init`).
      auto floatAttr = [&](const char *name, std::optional<APFloat> value) {
        if (!value)
          return success();
        json.key(name);
        return number(param, value->convertToDouble(), name);
      };
      if (failed(floatAttr("mean", param.getMean())) ||
          failed(floatAttr("std", param.getStd())) ||
          failed(floatAttr("low", param.getLow())) ||
          failed(floatAttr("high", param.getHigh())) ||
          failed(floatAttr("value", param.getValue())))
        return failure();
      if (IntegerAttr seed = param.getSeedAttr()) {
        json.key("seed");
        json.value(uint64_t(seed.getValue().getZExtValue()));
      }
      if (StringAttr file = param.getFileAttr()) {
        json.key("file");
        if (failed(string(param, file.getValue())))
          return failure();
      }
      if (StringAttr tensor = param.getTensorAttr()) {
        json.key("tensor");
        if (failed(string(param, tensor.getValue())))
          return failure();
      }
      json.endObject();
    }
    json.endArray();
    return success();
  }

  LogicalResult writeOptimizer() {
    auto ops = module.getOps<pe::OptimizerOp>();
    if (ops.empty())
      return module.emitError() << "a package needs a pe.optimizer";
    pe::OptimizerOp opt = *ops.begin();
    json.key("optimizer");
    json.beginObject();
    json.key("kind");
    if (failed(string(opt, opt.getKind())))
      return failure();
    std::pair<const char *, APFloat> numbers[] = {
        {"lr", opt.getLr()},
        {"beta1", opt.getBeta1()},
        {"beta2", opt.getBeta2()},
        {"eps", opt.getEps()},
        {"weight_decay", opt.getWeightDecay()},
        {"momentum", opt.getMomentum()},
        {"clip_norm", opt.getClipNorm()},
        {"min_lr", opt.getMinLr()},
    };
    for (auto &[name, value] : numbers) {
      json.key(name);
      if (failed(number(opt, value.convertToDouble(), name)))
        return failure();
    }
    // Only with an EMA: other packages keep their bytes.
    if (double ema = opt.getEmaDecay().convertToDouble(); ema > 0) {
      json.key("ema_decay");
      if (failed(number(opt, ema, "ema_decay")))
        return failure();
    }
    json.key("schedule");
    if (failed(string(opt, opt.getSchedule())))
      return failure();
    json.key("warmup_steps");
    json.value(int64_t(opt.getWarmupSteps()));
    json.endObject();
    return success();
  }

  LogicalResult writeDataset() {
    auto ops = module.getOps<pe::DatasetOp>();
    if (ops.empty())
      return success();
    pe::DatasetOp dataset = *ops.begin();
    json.key("dataset");
    json.beginObject();
    json.key("kind");
    if (failed(string(dataset, dataset.getKind())))
      return failure();
    json.key("path");
    if (failed(string(dataset, dataset.getPath())))
      return failure();
    json.key("context_length");
    json.value(int64_t(dataset.getContextLength().value_or(0)));
    // Only when some augmentation is on: other packages keep their bytes.
    if (dataset.getCropPaddingAttr() || dataset.getFlipAttr() || dataset.getEraseAttr()) {
      json.key("augment");
      json.beginObject();
      json.key("crop_padding");
      json.value(int64_t(dataset.getCropPadding().value_or(0)));
      json.key("flip");
      json.value(dataset.getFlipAttr() ? dataset.getFlipAttr().getValueAsDouble() : 0.0);
      json.key("erase");
      json.value(dataset.getEraseAttr() ? dataset.getEraseAttr().getValueAsDouble() : 0.0);
      json.endObject();
    }
    json.endObject();
    return success();
  }

  /// One function: the value table, inputs, ops and outputs. The program's
  /// inputs are the manifest's (those of @forward), so `func` must take
  /// exactly @forward's argument types.
  LogicalResult writeProgram(func::FuncOp func, func::FuncOp forward) {
    if (func.getFunctionType().getInputs() !=
        forward.getFunctionType().getInputs())
      return func.emitError()
             << "@" << func.getSymName()
             << " must take the arguments of @forward, in order";
    if (!llvm::hasSingleElement(func.getBody()))
      return func.emitError() << "a package program is a single block";
    Block &block = func.getBody().front();

    // Number the values: arguments, then every op result in order.
    llvm::DenseMap<Value, int64_t> ids;
    std::vector<std::pair<Operation *, Type>> types;
    for (BlockArgument arg : block.getArguments()) {
      ids[arg] = int64_t(types.size());
      types.push_back({func, arg.getType()});
    }
    for (Operation &op : block.without_terminator())
      for (Value result : op.getResults()) {
        ids[result] = int64_t(types.size());
        types.push_back({&op, result.getType()});
      }

    json.beginObject();
    json.key("values");
    json.beginArray();
    for (auto &[owner, valueType] : types) {
      json.beginObject();
      if (failed(type(owner, valueType)))
        return failure();
      json.endObject();
    }
    json.endArray();

    json.key("inputs");
    json.beginArray();
    for (BlockArgument arg : block.getArguments())
      json.value(ids[arg]);
    json.endArray();

    json.key("ops");
    json.beginArray();
    for (Operation &op : block.without_terminator())
      if (failed(writeOp(op, ids)))
        return failure();
    json.endArray();

    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    if (!ret)
      return block.getTerminator()->emitError()
             << "a package program ends in func.return";
    json.key("outputs");
    json.beginArray();
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto it = ids.find(ret.getOperand(i));
      if (it == ids.end())
        return ret.emitError() << "result " << i << " is not a value of @"
                               << func.getSymName();
      json.beginObject();
      if (auto name = func.getResultAttrOfType<StringAttr>(i, "pe.output")) {
        json.key("name");
        if (failed(string(func, name.getValue())))
          return failure();
      } else if (auto grad =
                     func.getResultAttrOfType<StringAttr>(i, "pe.grad")) {
        json.key("grad");
        if (failed(string(func, grad.getValue())))
          return failure();
      } else {
        return func.emitError() << "result " << i << " of @"
                                << func.getSymName()
                                << " has neither pe.output nor pe.grad";
      }
      json.key("value");
      json.value(it->second);
      json.endObject();
    }
    json.endArray();
    if (failed(writeArenaPlan(func)))
      return failure();
    json.endObject();
    return success();
  }

  /// The program's arena plan (ArenaPlan.h, docs/package.md).
  LogicalResult writeArenaPlan(func::FuncOp func) {
    std::vector<ArenaValue> values = arenaValues(func);
    ArenaPlan plan = planArena(values);
    // The planner's own check (the runtime checks again on load).
    if (std::optional<std::string> problem = verifyArenaPlan(values, plan))
      return func.emitError() << "internal error: invalid arena plan: "
                              << *problem;
    json.key("arena");
    json.beginObject();
    json.key("slots");
    json.beginArray();
    for (const ArenaSlot &slot : plan.slots) {
      json.beginArray();
      json.value(slot.perBatch);
      json.value(slot.fixed);
      json.endArray();
    }
    json.endArray();
    json.key("value_slot");
    json.value(llvm::ArrayRef<int64_t>(plan.valueSlot));
    json.key("report");
    json.beginObject();
    json.key("batch");
    json.value(kArenaReportBatch);
    json.key("arena_bytes");
    json.value(plan.arenaBytes(kArenaReportBatch));
    json.key("no_reuse_bytes");
    json.value(noReuseBytes(values, kArenaReportBatch));
    json.endObject();
    json.endObject();
    return success();
  }

  LogicalResult writeOp(Operation &op,
                        const llvm::DenseMap<Value, int64_t> &ids) {
    llvm::StringRef name = op.getName().getStringRef();
    bool isConstant = isa<arith::ConstantOp>(op);
    if (!isConstant && op.getDialect() &&
        !isa<pe::PEDialect>(op.getDialect()))
      return op.emitError() << "op '" << name
                            << "' is not supported in a package";
    if (!isConstant && !op.getDialect())
      return op.emitError() << "op '" << name
                            << "' is not supported in a package";
    if (op.getNumRegions() != 0)
      return op.emitError() << "ops with regions are not supported in a "
                               "package";

    json.beginObject();
    json.key("op");
    json.value(name);
    json.key("results");
    json.beginArray();
    for (Value result : op.getResults())
      json.value(ids.lookup(result));
    json.endArray();
    json.key("operands");
    json.beginArray();
    for (Value operand : op.getOperands()) {
      auto it = ids.find(operand);
      if (it == ids.end())
        return op.emitError() << "operand is not a value of this function";
      json.value(it->second);
    }
    json.endArray();

    json.key("attrs");
    json.beginObject();
    if (isConstant) {
      auto dense = dyn_cast<DenseElementsAttr>(
          cast<arith::ConstantOp>(op).getValue());
      if (!dense || !dense.isSplat() ||
          !dense.getElementType().isF32())
        return op.emitError() << "a package holds only f32 splat constants";
      json.key("value");
      if (failed(number(&op, dense.getSplatValue<APFloat>().convertToDouble(),
                        "constant")))
        return failure();
    } else {
      std::map<std::string, bool> written;
      for (NamedAttribute attr : op.getAttrs()) {
        json.key(attr.getName().getValue());
        if (failed(attribute(op, attr)))
          return failure();
        written[attr.getName().str()] = true;
      }
      // Attributes with an ODS default (DefaultValuedAttr) absent from the
      // op are written anyway, so that the package does not depend on the
      // dialect's defaults; they come from the op schema generated from the
      // same ODS (stringrt/OpSchema.h).
      std::optional<stringrt::OpCode> code =
          stringrt::findOpCode(std::string_view(name.data(), name.size()));
      if (!code)
        return op.emitError() << "a package cannot hold this op (no runtime op schema)";
      for (const stringrt::AttrSchema &attr : stringrt::opSchema(*code).attrs) {
        if (!attr.defaultValue || written.count(attr.name))
          continue;
        json.key(attr.name);
        if (attr.kind == stringrt::AttrKind::Bool)
          json.value(*attr.defaultValue != 0);
        else if (attr.kind == stringrt::AttrKind::Int)
          json.value(int64_t(*attr.defaultValue));
        else
          json.value(*attr.defaultValue);
      }
    }
    json.endObject();
    if (failed(writeKernels(op)))
      return failure();
    json.endObject();
    return success();
  }

  /// "kernels": the compiled kernels that run `op`, when it has any.
  LogicalResult writeKernels(Operation &op) {
    if (!kernels)
      return success();
    auto it = kernels->calls.find(&op);
    if (it == kernels->calls.end() || it->second.empty())
      return success();
    json.key("kernels");
    json.beginArray();
    for (const PackageKernelCall &call : it->second) {
      json.beginObject();
      json.key("symbol");
      if (failed(string(&op, call.symbol)))
        return failure();
      json.key("range");
      json.value(call.range);
      json.key("grain");
      json.value(call.grain);
      json.endObject();
    }
    json.endArray();
    return success();
  }

  LogicalResult attribute(Operation &op, NamedAttribute named) {
    Attribute attr = named.getValue();
    if (auto flag = dyn_cast<BoolAttr>(attr)) {
      json.value(flag.getValue());
    } else if (auto integer = dyn_cast<IntegerAttr>(attr)) {
      json.value(int64_t(integer.getValue().getSExtValue()));
    } else if (auto real = dyn_cast<FloatAttr>(attr)) {
      return number(&op, real.getValueAsDouble(), named.getName().getValue());
    } else if (auto text = dyn_cast<StringAttr>(attr)) {
      return string(&op, text.getValue());
    } else if (auto symbol = dyn_cast<FlatSymbolRefAttr>(attr)) {
      return string(&op, symbol.getValue());
    } else if (auto array = dyn_cast<DenseI64ArrayAttr>(attr)) {
      json.value(array.asArrayRef());
    } else if (auto mask = dyn_cast<pe::MaskKindAttr>(attr)) {
      json.value(pe::stringifyEnum(mask.getValue()));
    } else if (auto mode = dyn_cast<pe::RopeModeAttr>(attr)) {
      json.value(pe::stringifyEnum(mode.getValue()));
    } else if (auto kind = dyn_cast<pe::FreqsKindAttr>(attr)) {
      json.value(pe::stringifyEnum(kind.getValue()));
    } else {
      return op.emitError() << "attribute '" << named.getName().getValue()
                            << "' (" << attr
                            << ") is of a kind a package cannot hold";
    }
    return success();
  }

  ModuleOp module;
  const PackageKernels *kernels;
  JsonWriter json;
};

} // namespace

FailureOr<std::string> buildPackageManifest(ModuleOp module,
                                           const PackageKernels *kernels) {
  return ManifestBuilder(module, kernels).build();
}

LogicalResult writePackage(ModuleOp module, const std::string &path,
                           const std::string &target,
                           const PackageKernels *kernels) {
  if ((target == kCpuTarget) != (kernels != nullptr))
    return module.emitError() << "target '" << target << "' "
                              << (kernels ? "carries no kernels"
                                          : "needs compiled kernels");
  FailureOr<std::string> manifest = buildPackageManifest(module, kernels);
  if (failed(manifest))
    return failure();
  std::map<std::string, std::string> metadata = {
      {"format", "stringc-package"},
      {"version", std::to_string(kPackageVersion)},
      {"target", target},
      {"manifest", *manifest},
  };
  std::vector<stringrt::TensorView> sections;
  if (kernels) {
    // The shared object as one u8 tensor, and what it was compiled for.
    if (kernels->sharedObject.empty())
      return module.emitError() << "target 'cpu' needs a shared object";
    metadata["kernels_triple"] = kernels->triple;
    metadata["kernels_cpu"] = kernels->cpu;
    metadata["kernels_features"] = kernels->features;
    metadata["kernels_checksum"] = stringrt::kernelChecksum(
        kernels->sharedObject.data(), kernels->sharedObject.size());
    sections.push_back({stringrt::kKernelSection, stringrt::DType::U8,
                        {int64_t(kernels->sharedObject.size())},
                        kernels->sharedObject.data()});
  }
  try {
    stringrt::writeSafetensors(path, sections, metadata);
  } catch (const stringrt::Error &error) {
    return module.emitError() << "cannot write the package: " << error.what();
  }
  return success();
}

} // namespace stringc
