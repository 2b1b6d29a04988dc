//===- PEOps.cpp - pe op definitions and module-level verifiers -----------===//
//
// Holds the generated op definitions and the verifiers of the module-level
// ops. The compute ops' verifiers are in their family's PE<Family>Ops.cpp.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"

#include "PEVerify.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::pe;
using verify::numStr;

//===----------------------------------------------------------------------===//
// custom<EnumKeyword>: an enum attribute as a bare keyword, `mode(axial)`,
// rather than in its own syntax, `#pe.rope_mode<axial>` (generic op form).
//===----------------------------------------------------------------------===//

template <typename EnumAttrT>
static void printEnumKeyword(OpAsmPrinter &printer, Operation *,
                             EnumAttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

template <typename EnumAttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, EnumAttrT &attr) {
  using EnumT = decltype(std::declval<EnumAttrT>().getValue());
  // The generated FieldParser names the enum and the bad keyword on error.
  FailureOr<EnumT> value = FieldParser<EnumT>::parse(parser);
  if (failed(value))
    return failure();
  attr = EnumAttrT::get(parser.getContext(), *value);
  return success();
}

#define GET_OP_CLASSES
#include "stringc/Dialect/PE/PEOps.cpp.inc"

//===----------------------------------------------------------------------===//
// pe.parameter
//===----------------------------------------------------------------------===//

namespace {
/// An initializer and the companion attributes it takes (all required).
struct InitKind {
  StringRef name;
  SmallVector<StringRef, 3> companions;
};
} // namespace

static ArrayRef<InitKind> initKinds() {
  static const InitKind kinds[] = {
      {"normal", {"mean", "std", "seed"}}, {"uniform", {"low", "high", "seed"}},
      {"zeros", {}},                       {"ones", {}},
      {"constant", {"value"}},             {"load", {"file", "tensor"}},
  };
  return kinds;
}

LogicalResult ParameterOp::verify() {
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.getElementType().isF32() || !type.hasStaticShape())
    return emitOpError() << "type must be a statically shaped f32 tensor, got "
                         << getType();

  const InitKind *kind = llvm::find_if(
      initKinds(), [&](const InitKind &k) { return k.name == getInit(); });
  if (kind == initKinds().end())
    return emitOpError() << "init must be one of normal, uniform, zeros, ones, "
                            "constant, load; got \""
                         << getInit() << "\"";

  // Every companion attribute of any initializer: present iff `kind` uses it.
  static const StringRef allCompanions[] = {"mean", "std",   "low",  "high",
                                            "value", "seed", "file", "tensor"};
  for (StringRef attr : allCompanions) {
    bool used = llvm::is_contained(kind->companions, attr);
    bool present = static_cast<bool>((*this)->getAttr(attr));
    if (used && !present)
      return emitOpError() << "init \"" << kind->name
                           << "\" requires attribute '" << attr << "'";
    if (!used && present)
      return emitOpError() << "attribute '" << attr
                           << "' does not apply to init \"" << kind->name
                           << "\"";
  }

  if (FloatAttr std = getStdAttr(); std && !(std.getValueAsDouble() > 0))
    return emitOpError() << "std must be positive, got "
                         << numStr(std.getValueAsDouble());
  if (getLowAttr()) {
    double low = getLowAttr().getValueAsDouble();
    double high = getHighAttr().getValueAsDouble();
    if (!(low < high))
      return emitOpError() << "low (" << numStr(low)
                           << ") must be less than high (" << numStr(high)
                           << ")";
  }
  if (getFile() && getFile()->empty())
    return emitOpError() << "file must not be empty";
  if (getTensor() && getTensor()->empty())
    return emitOpError() << "tensor must not be empty";
  return success();
}

//===----------------------------------------------------------------------===//
// pe.get_param
//===----------------------------------------------------------------------===//

LogicalResult
GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
      getOperation(), getParamAttr());
  if (!param)
    return emitOpError() << "'" << getParamAttr()
                         << "' does not name a pe.parameter";
  if (param.getType() != getType())
    return emitOpError() << "result type " << getType()
                         << " does not match the type " << param.getType()
                         << " of parameter " << getParamAttr();
  return success();
}

//===----------------------------------------------------------------------===//
// pe.optimizer and pe.dataset
//===----------------------------------------------------------------------===//

/// A model has one optimizer and one dataset: every `OpT` after the first in
/// the module is an error.
template <typename OpT>
static LogicalResult verifyFirstOfKind(OpT op) {
  OpT first = *op->getBlock()->template getOps<OpT>().begin();
  if (first == op)
    return success();
  InFlightDiagnostic diag = op.emitOpError()
                            << "a module has at most one "
                            << OpT::getOperationName();
  diag.attachNote(first.getLoc()) << "the first is here";
  return diag;
}

LogicalResult OptimizerOp::verify() {
  if (failed(verifyFirstOfKind(*this)))
    return failure();
  if (getKind() != "adamw" && getKind() != "sgd")
    return emitOpError() << "kind must be \"adamw\" or \"sgd\", got \""
                         << getKind() << "\"";
  // Each rule holds only for ordered values, so NaN fails it too.
  auto check = [&](bool ok, StringRef attr, StringRef rule,
                   double value) -> LogicalResult {
    if (ok)
      return success();
    return emitOpError() << attr << " must be " << rule << ", got "
                         << numStr(value);
  };
  double lr = getLr().convertToDouble();
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  double eps = getEps().convertToDouble();
  double wd = getWeightDecay().convertToDouble();
  double momentum = getMomentum().convertToDouble();
  double clip = getClipNorm().convertToDouble();
  double minLr = getMinLr().convertToDouble();
  double ema = getEmaDecay().convertToDouble();
  if (failed(check(lr > 0, "lr", "positive", lr)) ||
      failed(check(beta1 >= 0 && beta1 < 1, "beta1", "in [0, 1)", beta1)) ||
      failed(check(beta2 >= 0 && beta2 < 1, "beta2", "in [0, 1)", beta2)) ||
      failed(check(eps > 0, "eps", "positive", eps)) ||
      failed(check(wd >= 0, "weight_decay", "non-negative", wd)) ||
      failed(check(momentum >= 0 && momentum < 1, "momentum", "in [0, 1)",
                   momentum)) ||
      failed(check(clip >= 0, "clip_norm", "non-negative", clip)) ||
      failed(check(minLr >= 0, "min_lr", "non-negative", minLr)) ||
      failed(check(ema >= 0 && ema < 1, "ema_decay", "in [0, 1)", ema)))
    return failure();
  if (minLr > lr)
    return emitOpError() << "min_lr (" << numStr(minLr)
                         << ") must not exceed lr (" << numStr(lr) << ")";
  if (getSchedule() != "constant" && getSchedule() != "warmup_cosine")
    return emitOpError()
           << "schedule must be \"constant\" or \"warmup_cosine\", got \""
           << getSchedule() << "\"";
  // I64Attr getters return the 64 bits as unsigned; read them signed.
  if (auto warmup = static_cast<int64_t>(getWarmupSteps()); warmup < 0)
    return emitOpError() << "warmup_steps must be non-negative, got "
                         << warmup;
  return success();
}

LogicalResult DatasetOp::verify() {
  if (failed(verifyFirstOfKind(*this)))
    return failure();
  if (getKind() != "idx" && getKind() != "text")
    return emitOpError() << "kind must be \"idx\" or \"text\", got \""
                         << getKind() << "\"";
  if (getPath().empty())
    return emitOpError() << "path must not be empty";
  IntegerAttr context = getContextLengthAttr();
  if (getKind() == "idx" && context)
    return emitOpError() << "context_length applies only to kind \"text\"";
  if (getKind() == "text" && !context)
    return emitOpError() << "kind \"text\" requires context_length";
  if (context && context.getInt() <= 0)
    return emitOpError() << "context_length must be positive, got "
                         << context.getInt();
  IntegerAttr crop = getCropPaddingAttr();
  FloatAttr flip = getFlipAttr(), erase = getEraseAttr();
  if ((crop || flip || erase) && getKind() != "idx")
    return emitOpError()
           << "crop_padding, flip and erase apply only to kind \"idx\"";
  if (crop && (crop.getInt() < 0 || crop.getInt() > kMaxCropPadding))
    return emitOpError() << "crop_padding must be in [0, " << kMaxCropPadding
                         << "], got " << crop.getInt();
  for (auto [name, p] : {std::pair{"flip", flip}, std::pair{"erase", erase}}) {
    // Written as !(in range) so that NaN is refused too.
    if (p && !(p.getValueAsDouble() >= 0.0 && p.getValueAsDouble() <= 1.0))
      return emitOpError() << name << " must be in [0, 1], got "
                           << p.getValueAsDouble();
  }
  return success();
}
