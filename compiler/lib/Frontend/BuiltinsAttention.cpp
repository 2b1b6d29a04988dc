//===- BuiltinsAttention.cpp - multi-head attention -----------------------===//

#include "Builtins.h"

#include <fmt/format.h>

#include <cmath>

namespace stringc::sema {

namespace {

enum AttentionArg { kQ, kK, kV, kHeads, kMask, kScale, kRelative };

/// attention(q, k, v [B, T, D], heads, mask = none, scale = 1/sqrt(Dh),
/// relative = R [T, T, Dh, Dh]) -> [B, T, D]
Value attention(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, kQ, 3, "[B, T, D]") || !requirePositive(a, args, kHeads) ||
      !requirePositive(a, args, kScale))
    return Value::poison();
  const auto &q = args.dims(kQ);
  for (size_t i : {kK, kV})
    if (args.dims(i) != q)
      return a.fail(args.range(i), fmt::format("attention: {} must have the shape of the queries {}, found {}",
                                               args.label(i), formatShape(q), formatShape(args.dims(i))));
  int64_t heads = args[kHeads].intValue;
  int64_t width = q[2], tokens = q[1];
  if (width % heads != 0)
    return a.fail(args.range(kHeads), fmt::format("attention: heads = {} does not divide the model width {}",
                                                  heads, width));
  int64_t headDim = width / heads;
  std::vector<int> operands = {args.id(kQ), args.id(kK), args.id(kV)};
  if (args.has(kRelative)) {
    if (!requireShape(a, args, kRelative, {tokens, tokens, headDim, headDim},
                      fmt::format("[T, T, Dh, Dh] with T = {} tokens and Dh = {} / {}", tokens, width, heads)))
      return Value::poison();
    operands.push_back(args.id(kRelative));
  }
  double scale = args.floatOr(kScale, 1.0 / std::sqrt(static_cast<double>(headDim)));
  std::vector<NamedAttr> attrs = {{"heads", heads}, {"scale", scale}, {"mask", EnumValue{args.mask.kind}}};
  if (args.mask.kind == "skip")
    attrs.push_back({"skip_base", args.mask.skipBase});
  return a.emit(OpCode::Attention, operands, std::move(attrs), args.type(kQ), args.call.range);
}

} // namespace

void addAttentionBuiltins(std::vector<Builtin> &table) {
  table.push_back({"attention",
                   {tensorArg("q", "queries"), tensorArg("k", "keys"), tensorArg("v", "values"),
                    intArg("heads", true), ArgSpec{"mask", ArgKind::Mask, false, false, "mask"}, floatArg("scale"),
                    ArgSpec{"relative", ArgKind::Tensor, false, false, "relative rotations"}},
                   attention});
}

} // namespace stringc::sema
