//===- BuiltinsPositions.cpp - positions, frequencies, RoPE, sinusoids ----===//

#include "Builtins.h"

#include <fmt/format.h>

namespace stringc::sema {

namespace {

/// Checks that size argument `i` (when given) is in [lo, 2^31).
bool requireAtLeast(Analyzer &a, const CallArgs &args, size_t i, int64_t lo) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  if (!args.has(i) || (args[i].intValue >= lo && args[i].intValue < kLimit))
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be {}, found {}", args.function, args.specs[i].name,
                                    args[i].intValue < lo ? fmt::format("at least {}", lo)
                                                          : std::string("below 2^31"),
                                    args[i].intValue));
  return false;
}

/// seq_positions(length = T, special = 0) -> [special + T, 1]
Value seqPositions(Analyzer &a, CallArgs &args) {
  if (!requireAtLeast(a, args, 0, 1) || !requireAtLeast(a, args, 1, 0))
    return Value::poison();
  int64_t length = args[0].intValue, special = args.intOr(1, 0);
  return a.emit(OpCode::SeqPositions, {}, {{"length", length}, {"special", special}},
                TensorType{DType::F32, {special + length, 1}}, args.call.range);
}

/// grid_positions(rows = R, cols = C, special = 0) -> [special + R*C, 2]
Value gridPositions(Analyzer &a, CallArgs &args) {
  if (!requireAtLeast(a, args, 0, 1) || !requireAtLeast(a, args, 1, 1) || !requireAtLeast(a, args, 2, 0))
    return Value::poison();
  int64_t rows = args[0].intValue, cols = args[1].intValue, special = args.intOr(2, 0);
  return a.emit(OpCode::GridPositions, {}, {{"rows", rows}, {"cols", cols}, {"special", special}},
                TensorType{DType::F32, {special + rows * cols, 2}}, args.call.range);
}

/// rope_freqs(dim, heads = 1, base = 10000) -> [dim/2, 1] and
/// rope_freqs_axial(dim, heads = 1, base = 100) -> [dim/2, 2].
Value ropeFreqs(Analyzer &a, CallArgs &args, bool axial) {
  if (!requireAtLeast(a, args, 0, 1) || !requireAtLeast(a, args, 1, 1) || !requirePositive(a, args, 2))
    return Value::poison();
  int64_t dim = args[0].intValue, heads = args.intOr(1, 1);
  double base = args.floatOr(2, axial ? 100.0 : 10000.0);
  if (dim % heads != 0)
    return a.fail(args.range(1), fmt::format("{}: heads = {} does not divide dim = {}", args.function, heads,
                                             dim));
  int64_t headDim = dim / heads;
  if (headDim % 2 != 0)
    return a.fail(args.range(0), fmt::format("{}: the head dimension {} (dim {} / heads {}) is odd; rotary "
                                             "pairs need an even head dimension",
                                             args.function, headDim, dim, heads));
  if (axial && headDim % 4 != 0)
    return a.fail(args.range(0), fmt::format("{}: the head dimension {} (dim {} / heads {}) is not a multiple "
                                             "of 4; each head splits its {} rotary pairs evenly between the "
                                             "x and y axes",
                                             args.function, headDim, dim, heads, headDim / 2));
  std::vector<NamedAttr> attrs = {{"kind", EnumValue{axial ? "axial" : "seq"}},
                                  {"dim", dim},
                                  {"heads", heads},
                                  {"base", base}};
  return a.emit(OpCode::RopeFreqs, {}, std::move(attrs), TensorType{DType::F32, {dim / 2, axial ? 2 : 1}},
                args.call.range);
}

Value ropeFreqsSeq(Analyzer &a, CallArgs &args) { return ropeFreqs(a, args, false); }
Value ropeFreqsAxial(Analyzer &a, CallArgs &args) { return ropeFreqs(a, args, true); }

/// Checks x [B, T, D] (D even), pos [T, A] (A = 1 or 2) and each frequency
/// argument in `freqs` against [D/2, A]. Shared by rope and householder.
bool checkRotary(Analyzer &a, const CallArgs &args, std::initializer_list<size_t> freqs) {
  if (!requireRank(a, args, 0, 3, "[B, T, D]") || !requireRank(a, args, 1, 2, "[T, A]") ||
      !requireStatic(a, args, 1))
    return false;
  const auto &x = args.dims(0);
  const auto &pos = args.dims(1);
  int64_t tokens = x[1], width = x[2], axes = pos[1];
  if (width % 2 != 0) {
    a.fail(args.range(0), fmt::format("{}: {} has an odd width {}; rotary pairs need an even width",
                                      args.function, args.label(0), width));
    return false;
  }
  if (pos[0] != tokens) {
    a.fail(args.range(1), fmt::format("{}: {} must have {} rows (one per token of x), found {}", args.function,
                                      args.label(1), tokens, pos[0]));
    return false;
  }
  if (axes != 1 && axes != 2) {
    a.fail(args.range(1), fmt::format("{}: positions must have 1 or 2 axes, found {}", args.function, axes));
    return false;
  }
  for (size_t i : freqs) {
    if (!requireRank(a, args, i, 2, "[D/2, A]") || !requireStatic(a, args, i))
      return false;
    const auto &f = args.dims(i);
    if (f[0] != width / 2) {
      a.fail(args.range(i), fmt::format("{}: {} must have {} rows (one per rotary pair of the width-{} input), "
                                        "found {}",
                                        args.function, args.label(i), width / 2, width, f[0]));
      return false;
    }
    if (f[1] != axes) {
      a.fail(args.range(i), fmt::format("{}: {} must have {} column{} (one per axis of the positions), found {}",
                                        args.function, args.label(i), axes, axes == 1 ? "" : "s", f[1]));
      return false;
    }
  }
  return true;
}

/// rope(x, pos, freqs) -> x. The mode follows from the operands: one axis is
/// `seq`; two axes are `axial` when freqs is straight from rope_freqs_axial,
/// else `mixed` (learned per-axis frequencies).
Value rope(Analyzer &a, CallArgs &args) {
  if (!checkRotary(a, args, {2}))
    return Value::poison();
  const char *mode = "seq";
  if (args.dims(1)[1] == 2) {
    const GraphOp *producer = a.definingOp(args[2]);
    bool fromAxial = producer && producer->code == OpCode::RopeFreqs &&
                     std::get<EnumValue>(*producer->attr("kind")).name == "axial";
    mode = fromAxial ? "axial" : "mixed";
  }
  return a.emit(OpCode::Rope, {args.id(0), args.id(1), args.id(2)}, {{"mode", EnumValue{mode}}}, args.type(0),
                args.call.range);
}

/// householder(x, pos, f1, f2) -> x
Value householder(Analyzer &a, CallArgs &args) {
  if (!checkRotary(a, args, {2, 3}))
    return Value::poison();
  return a.emit(OpCode::Householder, {args.id(0), args.id(1), args.id(2), args.id(3)}, {}, args.type(0),
                args.call.range);
}

/// sinusoidal(length = T, dim = D, base = 10000) -> [T, D]
Value sinusoidal(Analyzer &a, CallArgs &args) {
  if (!requireAtLeast(a, args, 0, 1) || !requireAtLeast(a, args, 1, 2) || !requirePositive(a, args, 2))
    return Value::poison();
  int64_t length = args[0].intValue, dim = args[1].intValue;
  if (dim % 2 != 0)
    return a.fail(args.range(1), fmt::format("sinusoidal: dim must be even (sin/cos pairs), found {}", dim));
  return a.emit(OpCode::Sinusoidal, {}, {{"length", length}, {"dim", dim}, {"base", args.floatOr(2, 10000.0)}},
                TensorType{DType::F32, {length, dim}}, args.call.range);
}

/// relative_positions(pos [T, A]) -> [T, T, A]
Value relativePositions(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 2, "[T, A]") || !requireStatic(a, args, 0))
    return Value::poison();
  const auto &pos = args.dims(0);
  return a.emit(OpCode::RelativePositions, {args.id(0)}, {}, TensorType{DType::F32, {pos[0], pos[0], pos[1]}},
                args.call.range);
}

} // namespace

void addPositionBuiltins(std::vector<Builtin> &table) {
  table.push_back({"seq_positions", {intArg("length", true), intArg("special")}, seqPositions});
  table.push_back(
      {"grid_positions", {intArg("rows", true), intArg("cols", true), intArg("special")}, gridPositions});
  table.push_back({"rope_freqs", {intArg("dim", true), intArg("heads"), floatArg("base")}, ropeFreqsSeq});
  table.push_back(
      {"rope_freqs_axial", {intArg("dim", true), intArg("heads"), floatArg("base")}, ropeFreqsAxial});
  table.push_back({"rope",
                   {tensorArg("x", "input"), tensorArg("pos", "positions"), tensorArg("freqs", "frequencies")},
                   rope});
  table.push_back({"householder",
                   {tensorArg("x", "input"), tensorArg("pos", "positions"), tensorArg("f1", "first frequencies"),
                    tensorArg("f2", "second frequencies")},
                   householder});
  table.push_back({"sinusoidal", {intArg("length", true), intArg("dim", true), floatArg("base")}, sinusoidal});
  table.push_back({"relative_positions", {tensorArg("pos", "positions")}, relativePositions});
}

} // namespace stringc::sema
