//===- RotaryKernels.cpp - rope, householder and the hoisted rope ops -----===//
//
// Kernels and op lowerings of the rotary ops (the CPU's ops/position/Rope.cpp
// and ops/position/Householder.cpp, and the rope_table / rope_apply pieces
// the hoisting rewrite splits them into; docs/cuda.md, "Position kernels"), one thread per
// output element in a grid-stride loop:
// - rope_table and the householder table are evaluated in f64 (libdevice's
//   cos, sin) and rounded once, as the reference kernels do;
// - rope_apply rotates one pair per thread from a [T, D/2, 2] table of
//   (cos, sin); `rope` and `householder` are lowered to a table in a scratch
//   buffer plus rope_apply (householder is a rotation by 2 (a2 - a1));
// - the frequency gradients are two per-destination loops: the angle
//   gradient per (token, pair) summed over the batch, then per (pair, axis)
//   summed over the tokens. No atomics anywhere.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace param_kinds;
using A = LaunchArg;

/// theta = sum_a pos[t * axes + a] * freqs[j * axes + a], in f64.
Value angleF64(KernelBuilder &k, Value pos, Value freqs, Value t, Value j, Value axes) {
  ValueRange sum = k.forLoop(k.i64(0), axes, k.i64(1), {f64(k, 0.0)}, [&](Value a, ValueRange acc) {
    Value p = f32ToF64(k, k.load(pos, k.add(k.mul(t, axes), a)));
    Value f = f32ToF64(k, k.load(freqs, k.add(k.mul(j, axes), a)));
    return SmallVector<Value>{k.add(acc[0], k.mul(p, f))};
  });
  return sum[0];
}
void storeCosSin(KernelBuilder &k, Value theta, Value table, Value e) {
  Value at = k.mul(e, k.i64(2));
  k.store(f64ToF32(k, cosF64(k, theta)), table, at);
  k.store(f64ToF32(k, sinF64(k, theta)), table, k.add(at, k.i64(1)));
}

void appendRotaryTableKernels(std::vector<KernelDef> &defs) {
  // table[t, j] = (cos, sin)(pos[t] . freqs[j]);  n = T * P
  defs.push_back({makeSpec("pe_rope_table", pe::RopeTableOp::getOperationName(),
                           {{"table", P}, {"pos", P}, {"freqs", P}, {"n", I}, {"pairs", I}, {"axes", I}}),
                  [](KernelBuilder &k) {
                    Value pairs = k.arg(4), axes = k.arg(5);
                    k.forGridStride(k.arg(3), [&](Value e) {
                      Value theta = angleF64(k, k.arg(1), k.arg(2), divU(k, e, pairs),
                                             remU(k, e, pairs), axes);
                      storeCosSin(k, theta, k.arg(0), e);
                    });
                  }});
  // householder: H(a2) H(a1) = R(2 (a2 - a1)), a_i = pos[t] . f_i[j]
  defs.push_back({makeSpec("pe_householder_table", pe::HouseholderOp::getOperationName(),
                           {{"table", P},
                            {"pos", P},
                            {"f1", P},
                            {"f2", P},
                            {"n", I},
                            {"pairs", I},
                            {"axes", I}}),
                  [](KernelBuilder &k) {
                    Value pairs = k.arg(5), axes = k.arg(6);
                    k.forGridStride(k.arg(4), [&](Value e) {
                      Value t = divU(k, e, pairs), j = remU(k, e, pairs);
                      Value a1 = angleF64(k, k.arg(1), k.arg(2), t, j, axes);
                      Value a2 = angleF64(k, k.arg(1), k.arg(3), t, j, axes);
                      storeCosSin(k, k.mul(f64(k, 2.0), k.sub(a2, a1)), k.arg(0), e);
                    });
                  }});
}

void appendRotaryApplyKernels(std::vector<KernelDef> &defs) {
  // Pair p (n = lead * T * D/2 pairs) of token t = (p / half) % T, pair
  // j = p % half: y = [[c, -s], [s, c]] x with s = sign * table sine
  // (sign -1: the inverse rotation).
  defs.push_back({makeSpec("pe_rope_apply", pe::RopeApplyOp::getOperationName(),
                           {{"y", P},
                            {"x", P},
                            {"table", P},
                            {"n", I},
                            {"tokens", I},
                            {"half", I},
                            {"sign", F}}),
                  [](KernelBuilder &k) {
                    Value tokens = k.arg(4), half = k.arg(5), sign = k.arg(6);
                    k.forGridStride(k.arg(3), [&](Value p) {
                      Value tj = remU(k, p, k.mul(tokens, half)); // t * half + j
                      Value at = k.mul(tj, k.i64(2));
                      Value c = k.load(k.arg(2), at);
                      Value s = k.mul(sign, k.load(k.arg(2), k.add(at, k.i64(1))));
                      Value xAt = k.mul(p, k.i64(2));
                      Value x0 = k.load(k.arg(1), xAt);
                      Value x1 = k.load(k.arg(1), k.add(xAt, k.i64(1)));
                      k.store(k.sub(k.mul(x0, c), k.mul(x1, s)), k.arg(0), xAt);
                      k.store(k.add(k.mul(x0, s), k.mul(x1, c)), k.arg(0), k.add(xAt, k.i64(1)));
                    });
                  }});
  // dtable[2 e] = sum_l dy0 x0 + dy1 x1, dtable[2 e + 1] = sum_l sign (dy1
  // x0 - dy0 x1) at pair l * n + e, e = t * P + j (n = T * P; l < lead, the
  // leading count): a column sum over the 2 n entries of the table.
  defs.push_back(columnPartialsKernel(
      "pe_rope_apply_grad_table_partials", pe::RopeApplyGradTableOp::getOperationName(),
      {"x", "dy"},
      {{"n", ParamKind::I64}, {"sign", ParamKind::F32}},
      [](KernelBuilder &k, Value l, Value v) {
        Value n = k.arg(6), sign = k.arg(7);
        Value e = divU(k, v, k.i64(2));
        Value at = k.mul(k.add(k.mul(l, n), e), k.i64(2));
        Value x0 = k.load(k.arg(1), at), x1 = k.load(k.arg(1), k.add(at, k.i64(1)));
        Value d0 = k.load(k.arg(2), at), d1 = k.load(k.arg(2), k.add(at, k.i64(1)));
        Value cosine = k.add(k.mul(d0, x0), k.mul(d1, x1));
        Value sine = k.mul(sign, k.sub(k.mul(d1, x0), k.mul(d0, x1)));
        return select(k, cmpI(k, arith::CmpIPredicate::eq, remU(k, v, k.i64(2)), k.i64(0)),
                      cosine, sine);
      }));
  // dfreqs[j, a] = sum_t pos[t, a] (-sin theta dy[t, j, 0] + cos theta dy[t, j, 1]),
  // in f64; n = P * A.
  defs.push_back({makeSpec("pe_rope_table_grad", pe::RopeTableGradOp::getOperationName(),
                           {{"dfreqs", P},
                            {"pos", P},
                            {"freqs", P},
                            {"dy", P},
                            {"n", I},
                            {"tokens", I},
                            {"axes", I}}),
                  [](KernelBuilder &k) {
                    Value n = k.arg(4), axes = k.arg(6);
                    Value pairs = divU(k, n, axes);
                    k.forGridStride(n, [&](Value e) {
                      Value j = divU(k, e, axes), a = remU(k, e, axes);
                      ValueRange sum = k.forLoop(
                          k.i64(0), k.arg(5), k.i64(1), {f64(k, 0.0)}, [&](Value t, ValueRange acc) {
                            Value theta = angleF64(k, k.arg(1), k.arg(2), t, j, axes);
                            Value at = k.mul(k.add(k.mul(t, pairs), j), k.i64(2));
                            Value d0 = f32ToF64(k, k.load(k.arg(3), at));
                            Value d1 = f32ToF64(k, k.load(k.arg(3), k.add(at, k.i64(1))));
                            Value dtheta = k.sub(k.mul(cosF64(k, theta), d1),
                                                 k.mul(sinF64(k, theta), d0));
                            Value p = f32ToF64(k, k.load(k.arg(1), k.add(k.mul(t, axes), a)));
                            return SmallVector<Value>{k.add(acc[0], k.mul(p, dtheta))};
                          });
                      k.store(f64ToF32(k, sum[0]), k.arg(0), e);
                    });
                  }});
  // dtheta[e] = sum_l (dy1 y0 - dy0 y1), y = R(table[e]) x at pair l * n + e.
  defs.push_back({makeSpec("pe_rope_grad_angles", pe::RopeGradFreqsOp::getOperationName(),
                           {{"dtheta", P}, {"x", P}, {"dy", P}, {"table", P}, {"n", I}, {"lead", I}}),
                  [](KernelBuilder &k) {
                    Value n = k.arg(4);
                    k.forGridStride(n, [&](Value e) {
                      Value c = k.load(k.arg(3), k.mul(e, k.i64(2)));
                      Value s = k.load(k.arg(3), k.add(k.mul(e, k.i64(2)), k.i64(1)));
                      ValueRange sum = k.forLoop(
                          k.i64(0), k.arg(5), k.i64(1), {k.f32(0.0)}, [&](Value l, ValueRange acc) {
                            Value at = k.mul(k.add(k.mul(l, n), e), k.i64(2));
                            Value x0 = k.load(k.arg(1), at), x1 = k.load(k.arg(1), k.add(at, k.i64(1)));
                            Value d0 = k.load(k.arg(2), at), d1 = k.load(k.arg(2), k.add(at, k.i64(1)));
                            Value y0 = k.sub(k.mul(x0, c), k.mul(x1, s));
                            Value y1 = k.add(k.mul(x0, s), k.mul(x1, c));
                            return SmallVector<Value>{
                                k.add(acc[0], k.sub(k.mul(d1, y0), k.mul(d0, y1)))};
                          });
                      k.store(sum[0], k.arg(0), e);
                    });
                  }});
  // dfreqs[j, a] = factor * sum_t pos[t, a] dtheta[t * P + j]; n = P * A.
  defs.push_back({makeSpec("pe_rope_angles_to_freqs", pe::RopeGradFreqsOp::getOperationName(),
                           {{"dfreqs", P},
                            {"pos", P},
                            {"dtheta", P},
                            {"n", I},
                            {"tokens", I},
                            {"axes", I},
                            {"factor", F}}),
                  [](KernelBuilder &k) {
                    Value n = k.arg(3), axes = k.arg(5);
                    Value pairs = divU(k, n, axes);
                    k.forGridStride(n, [&](Value e) {
                      Value j = divU(k, e, axes), a = remU(k, e, axes);
                      ValueRange sum = k.forLoop(
                          k.i64(0), k.arg(4), k.i64(1), {k.f32(0.0)}, [&](Value t, ValueRange acc) {
                            Value p = k.load(k.arg(1), k.add(k.mul(t, axes), a));
                            Value d = k.load(k.arg(2), k.add(k.mul(t, pairs), j));
                            return SmallVector<Value>{k.add(acc[0], k.mul(p, d))};
                          });
                      k.store(k.mul(k.arg(6), sum[0]), k.arg(0), e);
                    });
                  }});
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

/// x [..., T, D] with static T, D (D even): (T, D).
std::optional<std::pair<int64_t, int64_t>> rotaryShape(Value x) {
  auto shape = batchShape(x.getType());
  if (!shape || shape->size() < 2)
    return std::nullopt;
  int64_t t = (*shape)[shape->size() - 2], d = shape->back();
  if (t <= 0 || d <= 0 || d % 2)
    return std::nullopt;
  return std::make_pair(t, d);
}

/// The rope_apply launch of operand `x` with the table `table` into `y`.
Launch ropeApplyLaunch(LaunchArg y, LaunchArg x, LaunchArg table, Value xValue, int64_t tokens,
                       int64_t d, bool inverse) {
  return Launch::kernelCall("pe_rope_apply",
                            {y, x, table, A::i64(rowsOf(numel(xValue), 2)),
                             A::i64(tokens), A::i64(d / 2), A::f32(inverse ? -1.0f : 1.0f)});
}

std::optional<OpSteps> lowerRopeTable(Operation &op) {
  auto pos = positionShape(op.getOperand(0));
  auto freqs = positionShape(op.getOperand(1));
  if (!pos || !freqs)
    return std::nullopt;
  return singleLaunch("pe_rope_table", {A::result(0), A::operand(0), A::operand(1),
                                        A::i64(pos->first * freqs->first), A::i64(freqs->first),
                                        A::i64(pos->second)});
}

std::optional<OpSteps> lowerRopeApply(Operation &op) {
  auto td = rotaryShape(op.getOperand(0));
  if (!td)
    return std::nullopt;
  OpSteps steps;
  steps.launches.push_back(ropeApplyLaunch(A::result(0), A::operand(0), A::operand(1),
                                           op.getOperand(0), td->first, td->second,
                                           cast<pe::RopeApplyOp>(op).getInverse()));
  return steps;
}

std::optional<OpSteps> lowerRopeApplyGradTable(Operation &op) {
  auto td = rotaryShape(op.getOperand(0));
  if (!td)
    return std::nullopt;
  int64_t n = td->first * (td->second / 2);
  bool inverse = cast<pe::RopeApplyGradTableOp>(op).getInverse();
  OpSteps steps;
  appendColumnSum(steps, "pe_rope_apply_grad_table_partials", {A::operand(0), A::operand(1)},
                  rowsOf(numel(op.getOperand(0)), 2 * n), 2 * n,
                  {A::i64(n), A::f32(inverse ? -1.0f : 1.0f)}, A::result(0));
  return steps;
}

std::optional<OpSteps> lowerRopeTableGrad(Operation &op) {
  auto pos = positionShape(op.getOperand(0));
  auto freqs = positionShape(op.getOperand(1));
  if (!pos || !freqs)
    return std::nullopt;
  return singleLaunch("pe_rope_table_grad", {A::result(0), A::operand(0), A::operand(1),
                                             A::operand(2), A::i64(freqs->first * freqs->second),
                                             A::i64(pos->first), A::i64(pos->second)});
}

/// The [T, D/2, 2] table of `op` (rope: pos, freqs = operands 1, 2;
/// householder: pos, f1, f2 = operands 1, 2, 3) into scratch 0.
void appendTable(OpSteps &steps, bool householder, int64_t tokens, int64_t pairs, int64_t axes) {
  steps.scratchBytes.push_back(BatchAffine::fixed(tokens * pairs * 2 * 4));
  std::vector<LaunchArg> args = {A::scratch(0), A::operand(1), A::operand(2)};
  if (householder)
    args.push_back(A::operand(3));
  args.push_back(A::i64(tokens * pairs));
  args.push_back(A::i64(pairs));
  args.push_back(A::i64(axes));
  steps.launches.push_back(Launch::kernelCall(
      householder ? "pe_householder_table" : "pe_rope_table", std::move(args)));
}

std::optional<OpSteps> lowerRotation(Operation &op, bool householder) {
  auto td = rotaryShape(op.getOperand(0));
  auto pos = positionShape(op.getOperand(1));
  if (!td || !pos || pos->first != td->first)
    return std::nullopt;
  OpSteps steps;
  appendTable(steps, householder, td->first, td->second / 2, pos->second);
  steps.launches.push_back(ropeApplyLaunch(A::result(0), A::operand(0), A::scratch(0),
                                           op.getOperand(0), td->first, td->second, false));
  return steps;
}

/// rope_grad_freqs (x, pos, freqs, dy) -> dfreqs and householder_grad_freqs
/// (x, pos, f1, f2, dy) -> df1 = -2 G, df2 = 2 G.
std::optional<OpSteps> lowerFreqsGrad(Operation &op, bool householder) {
  auto td = rotaryShape(op.getOperand(0));
  auto pos = positionShape(op.getOperand(1));
  if (!td || !pos || pos->first != td->first)
    return std::nullopt;
  int64_t tokens = td->first, pairs = td->second / 2, axes = pos->second;
  int64_t n = tokens * pairs;
  unsigned dy = householder ? 4 : 3;
  OpSteps steps;
  appendTable(steps, householder, tokens, pairs, axes);
  steps.scratchBytes.push_back(BatchAffine::fixed(n * 4)); // dtheta
  steps.launches.push_back(Launch::kernelCall(
      "pe_rope_grad_angles", {A::scratch(1), A::operand(0), A::operand(dy), A::scratch(0),
                              A::i64(n), A::i64(rowsOf(numel(op.getOperand(0)), 2 * n))}));
  auto contract = [&](unsigned result, float factor) {
    steps.launches.push_back(Launch::kernelCall(
        "pe_rope_angles_to_freqs", {A::result(result), A::operand(1), A::scratch(1),
                                    A::i64(pairs * axes), A::i64(tokens), A::i64(axes),
                                    A::f32(factor)}));
  };
  if (householder) {
    contract(0, -2.0f);
    contract(1, 2.0f);
  } else {
    contract(0, 1.0f);
  }
  return steps;
}

} // namespace

void appendRotaryKernels(std::vector<KernelDef> &defs) {
  appendRotaryTableKernels(defs);
  appendRotaryApplyKernels(defs);
}

void appendRotaryLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::RopeTableOp>(lowerRopeTable));
  lowerings.push_back(loweringOf<pe::RopeApplyOp>(lowerRopeApply));
  lowerings.push_back(loweringOf<pe::RopeApplyGradTableOp>(lowerRopeApplyGradTable));
  lowerings.push_back(loweringOf<pe::RopeTableGradOp>(lowerRopeTableGrad));
  lowerings.push_back(loweringOf<pe::RopeOp>([](Operation &op) { return lowerRotation(op, false); }));
  lowerings.push_back(loweringOf<pe::HouseholderOp>([](Operation &op) { return lowerRotation(op, true); }));
  lowerings.push_back(loweringOf<pe::RopeGradFreqsOp>(
      [](Operation &op) { return lowerFreqsGrad(op, false); }));
  lowerings.push_back(loweringOf<pe::HouseholderGradFreqsOp>(
      [](Operation &op) { return lowerFreqsGrad(op, true); }));
}

} // namespace stringc::cudagen
