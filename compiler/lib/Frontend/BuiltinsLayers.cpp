//===- BuiltinsLayers.cpp - linear, norms, activations, embeddings, loss --===//

#include "Builtins.h"

#include <fmt/format.h>

namespace stringc::sema {

namespace {

/// linear(x [..., I], w [I, O], b? [O]) -> [..., O]
Value linear(Analyzer &a, CallArgs &args) {
  if (!requireMinRank(a, args, 0, 1, "[..., I]") || !requireRank(a, args, 1, 2, "[I, O]") ||
      !requireStatic(a, args, 1))
    return Value::poison();
  int64_t features = args.dims(0).back();
  int64_t in = args.dims(1)[0], out = args.dims(1)[1];
  if (features != in)
    return a.fail(args.range(1), fmt::format("linear: input has {} features but {} expects {} (weight shape "
                                             "{})",
                                             features == kBatchDim ? std::string("B") : std::to_string(features),
                                             args.label(1), in, formatShape(args.dims(1))));
  std::vector<int> operands = {args.id(0), args.id(1)};
  if (args.has(2)) {
    if (!requireShape(a, args, 2, {out}, fmt::format("the weight has {} outputs", out)))
      return Value::poison();
    operands.push_back(args.id(2));
  }
  TensorType result = args.type(0);
  result.dims.back() = out;
  return a.emit(OpCode::Linear, operands, {}, result, args.call.range);
}

/// layer_norm(x [..., D], g [D], b [D], eps = 1e-5) -> x
Value layerNorm(Analyzer &a, CallArgs &args) {
  if (!requireMinRank(a, args, 0, 1, "[..., D]") || !requirePositive(a, args, 3))
    return Value::poison();
  int64_t width = args.dims(0).back();
  std::string why = fmt::format("the input's last dimension is {}", width);
  if (!requireShape(a, args, 1, {width}, why) || !requireShape(a, args, 2, {width}, why))
    return Value::poison();
  const double epsilon = args.floatOr(3, odsDefault(OpCode::LayerNorm, "epsilon"));
  return a.emit(OpCode::LayerNorm, {args.id(0), args.id(1), args.id(2)}, {{"epsilon", epsilon}},
                args.type(0), args.call.range);
}

Value gelu(Analyzer &a, CallArgs &args) {
  return a.emit(OpCode::Gelu, {args.id(0)}, {{"approximate", false}}, args.type(0), args.call.range);
}

Value relu(Analyzer &a, CallArgs &args) {
  return a.emit(OpCode::Relu, {args.id(0)}, {}, args.type(0), args.call.range);
}

/// dropout(x [B, ...], p = q) -> x: each element zeroed with probability q
/// and the others scaled by 1 / (1 - q), in training only; drop_path draws
/// once per sample (stochastic depth). p = 0 emits nothing.
Value dropoutLike(Analyzer &a, CallArgs &args, bool perSample) {
  if (!requireMinRank(a, args, 0, 1, "[B, ...]"))
    return Value::poison();
  if (args.dims(0)[0] != kBatchDim)
    return a.fail(args.range(0), fmt::format("{}: {} must have the batch dimension B first (the mask is "
                                             "drawn per sample), found {}",
                                             args.function, args.label(0), formatType(args.type(0))));
  const double p = args[1].number();
  if (!(p >= 0.0 && p < 1.0)) // NaN fails too
    return a.fail(args.range(1), fmt::format("{}: p must be in [0, 1), found {}", args.function,
                                             formatNumber(args[1])));
  if (p == 0.0)
    return args[0];
  std::vector<NamedAttr> attrs = {{"p", p}, {"stream", a.nextRandomStream()}};
  if (perSample)
    attrs.push_back({"per_sample", true});
  return a.emit(OpCode::Dropout, {args.id(0)}, attrs, args.type(0), args.call.range);
}

Value dropout(Analyzer &a, CallArgs &args) { return dropoutLike(a, args, false); }
Value dropPath(Analyzer &a, CallArgs &args) { return dropoutLike(a, args, true); }

/// mean(x) -> [], mean(x, axis = a) -> x without dimension a (a < 0 counts
/// from the end).
Value mean(Analyzer &a, CallArgs &args) {
  if (!args.has(1))
    return a.emit(OpCode::Mean, {args.id(0)}, {}, TensorType{DType::F32, {}}, args.call.range);
  int64_t rank = static_cast<int64_t>(args.type(0).rank());
  int64_t axis = args[1].intValue;
  if (axis < -rank || axis >= rank)
    return a.fail(args.range(1), fmt::format("mean: axis {} is out of range for {} (rank {})", axis,
                                             formatType(args.type(0)), rank));
  if (axis < 0)
    axis += rank;
  TensorType result = args.type(0);
  result.dims.erase(result.dims.begin() + axis);
  return a.emit(OpCode::Mean, {args.id(0)}, {{"axis", axis}}, result, args.call.range);
}

/// patch_embed(image [B, C, H, W], w [C*p*p, D], b [D], patch = p) -> [B, (H/p)*(W/p), D]
Value patchEmbed(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 4, "[B, C, H, W]") || !requireRank(a, args, 1, 2, "[C*p*p, D]") ||
      !requireStatic(a, args, 1) || !requirePositive(a, args, 3))
    return Value::poison();
  const auto &image = args.dims(0);
  int64_t patch = args[3].intValue;
  int64_t channels = image[1], height = image[2], width = image[3];
  if (height % patch != 0 || width % patch != 0)
    return a.fail(args.range(3), fmt::format("patch_embed: patch = {} does not divide the image size {}x{}",
                                             patch, height, width));
  int64_t values = channels * patch * patch;
  int64_t embed = args.dims(1)[1];
  if (args.dims(1)[0] != values)
    return a.fail(args.range(1), fmt::format("patch_embed: {} has {} rows but a {}x{}x{} patch has {} values "
                                             "(weight shape {})",
                                             args.label(1), args.dims(1)[0], channels, patch, patch, values,
                                             formatShape(args.dims(1))));
  if (!requireShape(a, args, 2, {embed}, fmt::format("the weight has {} outputs", embed)))
    return Value::poison();
  TensorType result{DType::F32, {image[0], (height / patch) * (width / patch), embed}};
  return a.emit(OpCode::PatchEmbed, {args.id(0), args.id(1), args.id(2)}, {{"patch", patch}}, result,
                args.call.range);
}

/// token_embed(ids [B, T] i32, table [V, D]) -> [B, T, D]
Value tokenEmbed(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 2, "[B, T]") || !requireRank(a, args, 1, 2, "[V, D]") ||
      !requireStatic(a, args, 1))
    return Value::poison();
  TensorType result{DType::F32, {args.dims(0)[0], args.dims(0)[1], args.dims(1)[1]}};
  return a.emit(OpCode::TokenEmbed, {args.id(0), args.id(1)}, {}, result, args.call.range);
}

/// class_token(x [B, N, D], cls [D]) -> [B, N+1, D]
Value classToken(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 3, "[B, N, D]"))
    return Value::poison();
  const auto &x = args.dims(0);
  if (!requireShape(a, args, 1, {x[2]}, fmt::format("the model width is {}", x[2])))
    return Value::poison();
  TensorType result{DType::F32, {x[0], x[1] + 1, x[2]}};
  return a.emit(OpCode::ClassToken, {args.id(0), args.id(1)}, {}, result, args.call.range);
}

/// select_token(x [B, T, D], index = 0) -> [B, D]; a negative index counts
/// from the end.
Value selectToken(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 3, "[B, T, D]"))
    return Value::poison();
  const auto &x = args.dims(0);
  int64_t index = args.intOr(1, 0);
  if (index < -x[1] || index >= x[1])
    return a.fail(args.range(1), fmt::format("select_token: index {} is out of range for {} tokens", index,
                                             x[1]));
  if (index < 0)
    index += x[1];
  TensorType result{DType::F32, {x[0], x[2]}};
  return a.emit(OpCode::SelectToken, {args.id(0)}, {{"index", index}}, result, args.call.range);
}

/// cross_entropy(logits [..., C], labels [...] i32, smoothing = 0) -> []
Value crossEntropy(Analyzer &a, CallArgs &args) {
  if (!requireMinRank(a, args, 0, 1, "[..., C]"))
    return Value::poison();
  const double smoothing = args.floatOr(2, odsDefault(OpCode::CrossEntropy, "smoothing"));
  if (!(smoothing >= 0.0 && smoothing < 1.0)) // NaN fails too
    return a.fail(args.range(2), fmt::format("cross_entropy: smoothing must be in [0, 1), found {}",
                                             formatNumber(args[2])));
  std::vector<int64_t> expected(args.dims(0).begin(), args.dims(0).end() - 1);
  if (args.dims(1) != expected)
    return a.fail(args.range(1), fmt::format("cross_entropy: {} must have shape {} (the logits' shape {} "
                                             "without its last dimension), found {}",
                                             args.label(1), formatShape(expected), formatShape(args.dims(0)),
                                             formatShape(args.dims(1))));
  std::vector<NamedAttr> attrs;
  if (smoothing != 0.0) // the default stays out of the IR, as before
    attrs.push_back({"smoothing", smoothing});
  return a.emit(OpCode::CrossEntropy, {args.id(0), args.id(1)}, attrs, TensorType{DType::F32, {}},
                args.call.range);
}

} // namespace

void addLayerBuiltins(std::vector<Builtin> &table) {
  table.push_back({"linear",
                   {tensorArg("x", "input"), tensorArg("w", "weight"), tensorArg("b", "bias", false)},
                   linear});
  table.push_back({"layer_norm",
                   {tensorArg("x", "input"), tensorArg("g", "gain"), tensorArg("b", "bias"), floatArg("eps")},
                   layerNorm});
  table.push_back({"gelu", {tensorArg("x", "input")}, gelu});
  table.push_back({"relu", {tensorArg("x", "input")}, relu});
  table.push_back({"dropout", {tensorArg("x", "input"), floatArg("p", true)}, dropout});
  table.push_back({"drop_path", {tensorArg("x", "input"), floatArg("p", true)}, dropPath});
  table.push_back({"mean", {tensorArg("x", "input"), intArg("axis")}, mean});
  table.push_back({"patch_embed",
                   {tensorArg("img", "image"), tensorArg("w", "weight"), tensorArg("b", "bias"),
                    intArg("patch", true)},
                   patchEmbed});
  table.push_back({"token_embed", {intTensorArg("ids", "ids"), tensorArg("table", "table")}, tokenEmbed});
  table.push_back({"class_token", {tensorArg("x", "input"), tensorArg("cls", "class token")}, classToken});
  table.push_back({"select_token", {tensorArg("x", "input"), intArg("index")}, selectToken});
  table.push_back({"cross_entropy",
                   {tensorArg("logits", "logits"), intTensorArg("labels", "labels"), floatArg("smoothing")},
                   crossEntropy});
}

} // namespace stringc::sema
