//===- BuiltinsRotations.cpp - skew generators, Cayley, exp, gates --------===//

#include "Builtins.h"

#include "stringc/Frontend/Determinism.h"

#include <fmt/format.h>

namespace stringc::sema {

namespace {

/// Upper bound on skew dimensions (a dim x dim matrix must be materialized).
constexpr int64_t kMaxSkewDim = int64_t(1) << 16;

bool requireSkewDim(Analyzer &a, const CallArgs &args, size_t i) {
  int64_t dim = args[i].intValue;
  if (dim >= 2 && dim <= kMaxSkewDim)
    return true;
  a.fail(args.range(i), fmt::format("{}: dim must be between 2 and {}, found {}", args.function, kMaxSkewDim,
                                    dim));
  return false;
}

/// skew(p [..., dim(dim-1)/2], dim) -> [..., dim, dim]
Value skew(Analyzer &a, CallArgs &args) {
  if (!requireMinRank(a, args, 0, 1, "[..., dim*(dim-1)/2]") || !requireStatic(a, args, 0) ||
      !requireSkewDim(a, args, 1))
    return Value::poison();
  int64_t dim = args[1].intValue;
  int64_t needed = pairsOf(dim);
  if (args.dims(0).back() != needed)
    return a.fail(args.range(0), fmt::format("skew: {} must have {} entries in the last dimension (dim = {} "
                                             "needs {}*{}/2), found shape {}",
                                             args.label(0), needed, dim, dim, dim - 1, formatShape(args.dims(0))));
  TensorType result = args.type(0);
  result.dims.back() = dim;
  result.dims.push_back(dim);
  return a.emit(OpCode::Skew, {args.id(0)}, {{"dim", dim}}, result, args.call.range);
}

/// sparse_skew(p [K], dim, fraction, seed?) -> [dim, dim] with
/// K = sparse_pairs(dim, fraction); the support is drawn here, at compile time.
Value sparseSkew(Analyzer &a, CallArgs &args) {
  if (!requireSkewDim(a, args, 1))
    return Value::poison();
  int64_t dim = args[1].intValue;
  double fraction = args[2].number();
  if (!(fraction > 0 && fraction <= 1))
    return a.fail(args.range(2), fmt::format("sparse_skew: fraction must be in (0, 1], found {}",
                                             formatNumber(args[2])));
  int64_t count = sparsePairs(dim, fraction);
  if (count > Analyzer::kMaxSupportEntries)
    return a.fail(args.range(2), fmt::format("sparse_skew: {} kept entries is more than the limit of {}",
                                             count, Analyzer::kMaxSupportEntries));
  if (args.dims(0) != std::vector<int64_t>{count})
    return a.fail(args.range(0), fmt::format("sparse_skew: dim = {} and fraction = {} keep {} of the {} "
                                             "upper-triangle entries, so {} must be [{}], found {}",
                                             dim, formatNumber(args[2]), count, pairsOf(dim), args.label(0),
                                             count, formatShape(args.dims(0))));
  int64_t seed = 0;
  if (args.has(3)) {
    seed = args[3].intValue;
    if (seed < 0)
      return a.fail(args.range(3), fmt::format("sparse_skew: seed must be a non-negative integer, found {}",
                                               seed));
  } else {
    std::string param = a.paramNameOf(args[0]);
    if (param.empty())
      return a.fail(args.call.range, "sparse_skew: give a seed (seed = ...) when p is not a parameter; "
                                     "otherwise the seed is derived from the parameter's name");
    seed = derivedSeed(param);
  }
  if (!a.reserveSupportEntries(count))
    return a.fail(args.call.range,
                  fmt::format("sparse_skew: the model's sparse supports would hold {} entries in all, more "
                              "than the limit of {}",
                              a.supportEntries() + count, Analyzer::kMaxSupportEntries));
  std::vector<NamedAttr> attrs = {{"dim", dim},
                                  {"fraction", fraction},
                                  {"seed", seed},
                                  {"support", sparseSkewSupport(dim, count, static_cast<uint64_t>(seed))}};
  return a.emit(OpCode::SparseSkew, {args.id(0)}, std::move(attrs), TensorType{DType::F32, {dim, dim}},
                args.call.range);
}

/// cayley(x [..., D], S [D, D]) -> x
Value cayley(Analyzer &a, CallArgs &args) {
  if (!requireMinRank(a, args, 0, 1, "[..., D]"))
    return Value::poison();
  int64_t width = args.dims(0).back();
  if (!requireShape(a, args, 1, {width, width}, fmt::format("the last dimension of x is {}", width)))
    return Value::poison();
  return a.emit(OpCode::Cayley, {args.id(0), args.id(1)}, {}, args.type(0), args.call.range);
}

/// Checks that argument `i` is a static stack of square matrices [K, d, d].
bool requireGenerators(Analyzer &a, const CallArgs &args, size_t i) {
  if (!requireRank(a, args, i, 3, "[K, d, d]") || !requireStatic(a, args, i))
    return false;
  const auto &l = args.dims(i);
  if (l[1] == l[2])
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be square matrices [K, d, d], found {}", args.function,
                                    args.label(i), formatShape(l)));
  return false;
}

/// generator_exp(r [..., K], L [K, d, d]) -> [..., d, d]
Value generatorExp(Analyzer &a, CallArgs &args) {
  if (!requireMinRank(a, args, 0, 1, "[..., K]") || !requireStatic(a, args, 0) ||
      !requireGenerators(a, args, 1))
    return Value::poison();
  const auto &l = args.dims(1);
  if (args.dims(0).back() != l[0])
    return a.fail(args.range(1), fmt::format("generator_exp: the coordinates have {} ax{} (shape {}), so {} "
                                             "must be [{}, d, d], found {}",
                                             args.dims(0).back(), args.dims(0).back() == 1 ? "is" : "es",
                                             formatShape(args.dims(0)), args.label(1),
                                             args.dims(0).back(), formatShape(l)));
  TensorType result = args.type(0);
  result.dims.back() = l[1];
  result.dims.push_back(l[2]);
  return a.emit(OpCode::GeneratorExp, {args.id(0), args.id(1)}, {}, result, args.call.range);
}

/// apply_rotation(x [B, T, D], R [T, Dh, Dh], heads) -> x
Value applyRotation(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 3, "[B, T, D]") || !requirePositive(a, args, 2))
    return Value::poison();
  const auto &x = args.dims(0);
  int64_t heads = args[2].intValue;
  if (x[2] % heads != 0)
    return a.fail(args.range(2), fmt::format("apply_rotation: heads = {} does not divide the model width {}",
                                             heads, x[2]));
  int64_t headDim = x[2] / heads;
  if (!requireShape(a, args, 1, {x[1], headDim, headDim},
                    fmt::format("[T, Dh, Dh] with T = {} tokens and Dh = {} / {}", x[1], x[2], heads)))
    return Value::poison();
  return a.emit(OpCode::ApplyRotation, {args.id(0), args.id(1)}, {{"heads", heads}}, args.type(0),
                args.call.range);
}

/// commutator_norm(L [K, d, d]) -> [], K >= 2 (a commutator needs a pair).
Value commutatorNorm(Analyzer &a, CallArgs &args) {
  if (!requireGenerators(a, args, 0))
    return Value::poison();
  if (args.dims(0)[0] < 2)
    return a.fail(args.range(0), fmt::format("commutator_norm: {} must hold at least 2 generators (a "
                                             "commutator needs a pair), found {}",
                                             args.label(0), formatShape(args.dims(0))));
  return a.emit(OpCode::CommutatorNorm, {args.id(0)}, {}, TensorType{DType::F32, {}}, args.call.range);
}

/// spd_gate(x [B, T, D], gamma [D] or [T, D]) -> x
Value spdGate(Analyzer &a, CallArgs &args) {
  if (!requireRank(a, args, 0, 3, "[B, T, D]"))
    return Value::poison();
  const auto &x = args.dims(0);
  const auto &gamma = args.dims(1);
  if (gamma != std::vector<int64_t>{x[2]} && gamma != std::vector<int64_t>{x[1], x[2]})
    return a.fail(args.range(1), fmt::format("spd_gate: {} must be [{}] or [{}, {}] (per width or per token "
                                             "and width), found {}",
                                             args.label(1), x[2], x[1], x[2], formatShape(gamma)));
  return a.emit(OpCode::SpdGate, {args.id(0), args.id(1)}, {}, args.type(0), args.call.range);
}

} // namespace

void addRotationBuiltins(std::vector<Builtin> &table) {
  table.push_back({"skew", {tensorArg("p", "parameters"), intArg("dim", true)}, skew});
  table.push_back({"sparse_skew",
                   {tensorArg("p", "parameters"), intArg("dim", true), floatArg("fraction", true), intArg("seed")},
                   sparseSkew});
  table.push_back({"cayley", {tensorArg("x", "input"), tensorArg("S", "skew matrix")}, cayley});
  table.push_back({"generator_exp", {tensorArg("r", "coordinates"), tensorArg("L", "generators")}, generatorExp});
  table.push_back({"apply_rotation",
                   {tensorArg("x", "input"), tensorArg("R", "rotations"), intArg("heads", true)},
                   applyRotation});
  table.push_back({"commutator_norm", {tensorArg("L", "generators")}, commutatorNorm});
  table.push_back({"spd_gate", {tensorArg("x", "input"), tensorArg("gamma", "gate")}, spdGate});
}

} // namespace stringc::sema
