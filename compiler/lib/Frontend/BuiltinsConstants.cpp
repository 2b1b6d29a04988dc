//===- BuiltinsConstants.cpp - pairs, sparse_pairs, sqrt on numbers -------===//

#include "Builtins.h"

#include "stringc/Frontend/Determinism.h"

#include <fmt/format.h>

#include <cmath>

namespace stringc::sema {

namespace {

ArgSpec number(const char *name, ArgKind kind) { return ArgSpec{name, kind, true, true, name}; }

/// The largest n for which n(n-1)/2 is computed exactly in int64.
constexpr int64_t kMaxPairsN = int64_t(1) << 31;

/// pairs(n) = n(n-1)/2
Value pairs(Analyzer &a, CallArgs &args) {
  int64_t n = args[0].intValue;
  if (n < 0 || n > kMaxPairsN)
    return a.fail(args.range(0), fmt::format("pairs: n must be between 0 and 2^31, found {}", n));
  return Value::integer(pairsOf(n));
}

/// sparse_pairs(n, f) = max(1, round(f * pairs(n)))
Value sparsePairsFn(Analyzer &a, CallArgs &args) {
  int64_t n = args[0].intValue;
  double f = args[1].number();
  if (n < 2 || n > kMaxPairsN)
    return a.fail(args.range(0), fmt::format("sparse_pairs: n must be between 2 and 2^31, found {}", n));
  if (!(f > 0 && f <= 1))
    return a.fail(args.range(1), fmt::format("sparse_pairs: f must be in (0, 1], found {}", formatNumber(args[1])));
  return Value::integer(sparsePairs(n, f));
}

/// sqrt(x) for x >= 0, always a float.
Value sqrtFn(Analyzer &a, CallArgs &args) {
  double x = args[0].number();
  if (x < 0)
    return a.fail(args.range(0), fmt::format("sqrt: x must not be negative, found {}", formatNumber(args[0])));
  return Value::real(std::sqrt(x));
}

} // namespace

void addConstantBuiltins(std::vector<Builtin> &table) {
  table.push_back({"pairs", {number("n", ArgKind::Int)}, pairs});
  table.push_back({"sparse_pairs", {number("n", ArgKind::Int), number("f", ArgKind::Float)}, sparsePairsFn});
  table.push_back({"sqrt", {number("x", ArgKind::Float)}, sqrtFn});
}

} // namespace stringc::sema
