//===- PositionKernels.cpp - rotary tables, position tables, gates, skips -===//
//
// Kernels and op lowerings of the positional-encoding ops (docs/cuda.md,
// "Position kernels"), one thread per output element in a grid-stride loop:
// - tables that depend on attributes or on positions and frequencies only
//   (seq/grid_positions, rope_freqs, sinusoidal, rope_table and the
//   householder angles; relative_positions is one f32 subtraction) are
//   evaluated in f64 (libdevice's pow, cos, sin) and
//   rounded once, as the reference kernels do; they are tiny;
// - rope_apply rotates one pair per thread from a [T, D/2, 2] table of
//   (cos, sin); `rope` and `householder` are lowered to a table in a scratch
//   buffer plus rope_apply (householder is a rotation by 2 (a2 - a1));
// - the frequency gradients are two per-destination loops: the angle
//   gradient per (token, pair) summed over the batch, then per (pair, axis)
//   summed over the tokens. No atomics anywhere.
// The `base` attribute (f64) travels as two f32, base_hi + base_lo, summed
// in f64 in the kernel (exact to about 2^-48 relative).
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

const ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

/// base_hi + base_lo in f64.
Value baseF64(KernelBuilder &k, Value hi, Value lo) {
  return k.add(f32ToF64(k, hi), f32ToF64(k, lo));
}
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

void appendTableKernels(std::vector<KernelDef> &defs) {
  // pos[t] = t < special ? 0 : t - special
  defs.push_back({makeSpec("pe_seq_positions", pe::SeqPositionsOp::getOperationName(),
                           {{"pos", P}, {"n", I}, {"special", I}}),
                  [](KernelBuilder &k) {
                    Value special = k.arg(2);
                    k.forGridStride(k.arg(1), [&](Value t) {
                      Value n = select(k, cmpI(k, Pred::slt, t, special), k.i64(0),
                                       k.sub(t, special));
                      k.store(k.toF32(n), k.arg(0), t);
                    });
                  }});
  // pos[t] = (0, 0) for t < special, then patch q = t - special at (q % cols, q / cols)
  defs.push_back({makeSpec("pe_grid_positions", pe::GridPositionsOp::getOperationName(),
                           {{"pos", P}, {"n", I}, {"cols", I}, {"special", I}}),
                  [](KernelBuilder &k) {
                    Value cols = k.arg(2), special = k.arg(3);
                    k.forGridStride(k.arg(1), [&](Value t) {
                      Value isSpecial = cmpI(k, Pred::slt, t, special);
                      Value q = select(k, isSpecial, k.i64(0), k.sub(t, special));
                      Value x = select(k, isSpecial, k.i64(0), remU(k, q, cols));
                      Value y = select(k, isSpecial, k.i64(0), divU(k, q, cols));
                      Value at = k.mul(t, k.i64(2));
                      k.store(k.toF32(x), k.arg(0), at);
                      k.store(k.toF32(y), k.arg(0), k.add(at, k.i64(1)));
                    });
                  }});
  // seq: freqs[j] = base^(-2i/Dh), i = j % (Dh/2)
  defs.push_back({makeSpec("pe_rope_freqs_seq", pe::RopeFreqsOp::getOperationName(),
                           {{"freqs", P}, {"n", I}, {"head_dim", I}, {"base_hi", F}, {"base_lo", F}}),
                  [](KernelBuilder &k) {
                    Value dh = k.arg(2), base = baseF64(k, k.arg(3), k.arg(4));
                    k.forGridStride(k.arg(1), [&](Value j) {
                      Value i = i64ToF64(k, remU(k, j, divU(k, dh, k.i64(2))));
                      Value exponent = k.div(k.mul(f64(k, -2.0), i), i64ToF64(k, dh));
                      k.store(f64ToF32(k, powF64(k, base, exponent)), k.arg(0), j);
                    });
                  }});
  // axial: i = j % (Dh/2); (base^(-4i/Dh), 0) for i < Dh/4, else (0, base^(-4(i-Dh/4)/Dh))
  defs.push_back({makeSpec("pe_rope_freqs_axial", pe::RopeFreqsOp::getOperationName(),
                           {{"freqs", P}, {"n", I}, {"head_dim", I}, {"base_hi", F}, {"base_lo", F}}),
                  [](KernelBuilder &k) {
                    Value dh = k.arg(2), base = baseF64(k, k.arg(3), k.arg(4));
                    Value quarter = divU(k, dh, k.i64(4));
                    k.forGridStride(k.arg(1), [&](Value j) {
                      Value i = remU(k, j, divU(k, dh, k.i64(2)));
                      Value first = cmpI(k, Pred::slt, i, quarter);
                      Value m = i64ToF64(k, select(k, first, i, k.sub(i, quarter)));
                      Value exponent = k.div(k.mul(f64(k, -4.0), m), i64ToF64(k, dh));
                      Value f = f64ToF32(k, powF64(k, base, exponent));
                      Value at = k.mul(j, k.i64(2));
                      k.store(select(k, first, f, k.f32(0.0)), k.arg(0), at);
                      k.store(select(k, first, k.f32(0.0), f), k.arg(0), k.add(at, k.i64(1)));
                    });
                  }});
  // pe[p, 2i] = sin(p / base^(2i/dim)), pe[p, 2i+1] = cos(...), half = dim / 2
  defs.push_back({makeSpec("pe_sinusoidal", pe::SinusoidalOp::getOperationName(),
                           {{"pe", P}, {"n", I}, {"half", I}, {"base_hi", F}, {"base_lo", F}}),
                  [](KernelBuilder &k) {
                    Value half = k.arg(2), base = baseF64(k, k.arg(3), k.arg(4));
                    Value dim = i64ToF64(k, k.mul(half, k.i64(2)));
                    k.forGridStride(k.arg(1), [&](Value e) {
                      Value p = i64ToF64(k, divU(k, e, half));
                      Value i = i64ToF64(k, remU(k, e, half));
                      Value angle = k.div(p, powF64(k, base, k.div(k.mul(f64(k, 2.0), i), dim)));
                      Value at = k.mul(e, k.i64(2));
                      k.store(f64ToF32(k, sinF64(k, angle)), k.arg(0), at);
                      k.store(f64ToF32(k, cosF64(k, angle)), k.arg(0), k.add(at, k.i64(1)));
                    });
                  }});
  // r[i, j, a] = pos[j, a] - pos[i, a];  n = T * T * A
  defs.push_back({makeSpec("pe_relative_positions", pe::RelativePositionsOp::getOperationName(),
                           {{"r", P}, {"pos", P}, {"n", I}, {"tokens", I}, {"axes", I}}),
                  [](KernelBuilder &k) {
                    Value tokens = k.arg(3), axes = k.arg(4);
                    k.forGridStride(k.arg(2), [&](Value e) {
                      Value a = remU(k, e, axes), ij = divU(k, e, axes);
                      Value i = divU(k, ij, tokens), j = remU(k, ij, tokens);
                      Value pj = k.load(k.arg(1), k.add(k.mul(j, axes), a));
                      Value pi = k.load(k.arg(1), k.add(k.mul(i, axes), a));
                      k.store(k.sub(pj, pi), k.arg(0), e);
                    });
                  }});
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

void appendRotaryKernels(std::vector<KernelDef> &defs) {
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

void appendGateAndSkipKernels(std::vector<KernelDef> &defs) {
  // y = x exp(gamma[i % n_gamma]) (also dx = dy exp(gamma))
  defs.push_back({makeSpec("pe_spd_gate", pe::SpdGateOp::getOperationName(),
                           {{"y", P}, {"x", P}, {"gamma", P}, {"n", I}, {"n_gamma", I}}),
                  [](KernelBuilder &k) {
                    k.forGridStride(k.arg(3), [&](Value i) {
                      Value g = k.load(k.arg(2), remU(k, i, k.arg(4)));
                      Value e = k.builder().create<math::ExpOp>(k.location(), g);
                      k.store(k.mul(k.load(k.arg(1), i), e), k.arg(0), i);
                    });
                  }});
  // dgamma partials: dy x exp(gamma[c]) at r * cols + c
  defs.push_back(columnPartialsKernel(
      "pe_spd_gate_grad_partials", pe::SpdGateGradOp::getOperationName(), {"x", "gamma", "dy"}, {},
      [](KernelBuilder &k, Value r, Value c) {
        Value at = k.add(k.mul(r, k.arg(5)), c);
        Value e = k.builder().create<math::ExpOp>(k.location(), k.load(k.arg(2), c));
        return k.mul(k.mul(k.load(k.arg(3), at), k.load(k.arg(1), at)), e);
      }));
  // Head s of token t reads token t - shift (gather, direction -1) or
  // t + shift (its gradient, +1), shift = skip_base + s; zeros outside [0, T).
  for (int direction : {-1, 1}) {
    std::string name = direction < 0 ? "pe_skip_gather" : "pe_skip_gather_grad";
    llvm::StringRef op = direction < 0 ? pe::SkipGatherOp::getOperationName()
                                       : pe::SkipGatherGradOp::getOperationName();
    defs.push_back({makeSpec(name, op,
                             {{"y", P},
                              {"v", P},
                              {"n", I},
                              {"tokens", I},
                              {"d", I},
                              {"head_dim", I},
                              {"skip_base", I}}),
                    [direction](KernelBuilder &k) {
                      Value tokens = k.arg(3), d = k.arg(4), dh = k.arg(5);
                      Value skipBase = k.arg(6);
                      k.forGridStride(k.arg(2), [&](Value i) {
                        Value col = remU(k, i, d);
                        Value t = remU(k, divU(k, i, d), tokens);
                        Value shift = k.add(skipBase, divU(k, col, dh));
                        Value src = direction < 0 ? k.sub(t, shift) : k.add(t, shift);
                        Value inside = andI(k, cmpI(k, Pred::sge, src, k.i64(0)),
                                            cmpI(k, Pred::slt, src, tokens));
                        Value offset = k.mul(shift, d);
                        Value at = direction < 0 ? k.sub(i, offset) : k.add(i, offset);
                        // Outside, read element i itself (in bounds) and write 0.
                        Value v = k.load(k.arg(1), select(k, inside, at, i));
                        k.store(select(k, inside, v, k.f32(0.0)), k.arg(0), i);
                      });
                    }});
  }
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

OpSteps single(std::string kernel, std::vector<LaunchArg> args) {
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(std::move(kernel), std::move(args)));
  return steps;
}

BatchAffine numel(Value v) { return elementCount(v.getType()); }

std::pair<float, float> splitBase(double base) {
  float hi = float(base);
  return {hi, float(base - double(hi))};
}

/// pos [T, A] -> (T, A)
std::optional<std::pair<int64_t, int64_t>> positionShape(Value pos) {
  auto shape = batchShape(pos.getType());
  if (!shape || shape->size() != 2 || (*shape)[0] <= 0 || (*shape)[1] <= 0)
    return std::nullopt;
  return std::make_pair((*shape)[0], (*shape)[1]);
}

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

std::optional<OpSteps> lowerSeqPositions(Operation &op) {
  auto seq = cast<pe::SeqPositionsOp>(op);
  int64_t special = int64_t(seq.getSpecial());
  return single("pe_seq_positions",
                {A::result(0), A::i64(int64_t(seq.getLength()) + special), A::i64(special)});
}

std::optional<OpSteps> lowerGridPositions(Operation &op) {
  auto grid = cast<pe::GridPositionsOp>(op);
  int64_t special = int64_t(grid.getSpecial());
  int64_t tokens = special + int64_t(grid.getRows()) * int64_t(grid.getCols());
  return single("pe_grid_positions", {A::result(0), A::i64(tokens),
                                      A::i64(int64_t(grid.getCols())), A::i64(special)});
}

std::optional<OpSteps> lowerRopeFreqs(Operation &op) {
  auto freqs = cast<pe::RopeFreqsOp>(op);
  int64_t dim = int64_t(freqs.getDim()), heads = int64_t(freqs.getHeads());
  if (heads <= 0 || dim % heads)
    return std::nullopt;
  auto [hi, lo] = splitBase(freqs.getBase().convertToDouble());
  bool axial = freqs.getKind() == pe::FreqsKind::Axial;
  return single(axial ? "pe_rope_freqs_axial" : "pe_rope_freqs_seq",
                {A::result(0), A::i64(dim / 2), A::i64(dim / heads), A::f32(hi), A::f32(lo)});
}

std::optional<OpSteps> lowerSinusoidal(Operation &op) {
  auto sin = cast<pe::SinusoidalOp>(op);
  int64_t length = int64_t(sin.getLength()), dim = int64_t(sin.getDim());
  auto [hi, lo] = splitBase(sin.getBase().convertToDouble());
  return single("pe_sinusoidal", {A::result(0), A::i64(length * (dim / 2)), A::i64(dim / 2),
                                  A::f32(hi), A::f32(lo)});
}

std::optional<OpSteps> lowerRelativePositions(Operation &op) {
  auto pos = positionShape(op.getOperand(0));
  if (!pos)
    return std::nullopt;
  auto [tokens, axes] = *pos;
  return single("pe_relative_positions", {A::result(0), A::operand(0),
                                          A::i64(tokens * tokens * axes), A::i64(tokens),
                                          A::i64(axes)});
}

std::optional<OpSteps> lowerRopeTable(Operation &op) {
  auto pos = positionShape(op.getOperand(0));
  auto freqs = positionShape(op.getOperand(1));
  if (!pos || !freqs)
    return std::nullopt;
  return single("pe_rope_table", {A::result(0), A::operand(0), A::operand(1),
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
  return single("pe_rope_table_grad",
                {A::result(0), A::operand(0), A::operand(1), A::operand(2),
                 A::i64(freqs->first * freqs->second), A::i64(pos->first), A::i64(pos->second)});
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

std::optional<OpSteps> lowerSpdGate(Operation &op) {
  return single("pe_spd_gate", {A::result(0), A::operand(0), A::operand(1),
                                A::i64(numel(op.getResult(0))), A::i64(numel(op.getOperand(1)))});
}

std::optional<OpSteps> lowerSpdGateGrad(Operation &op) {
  BatchAffine gamma = numel(op.getOperand(1));
  if (gamma.perBatch != 0)
    return std::nullopt;
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(
      "pe_spd_gate", {A::result(0), A::operand(2), A::operand(1), A::i64(numel(op.getOperand(0))),
                      A::i64(gamma)}));
  appendColumnSum(steps, "pe_spd_gate_grad_partials",
                  {A::operand(0), A::operand(1), A::operand(2)},
                  rowsOf(numel(op.getOperand(0)), gamma.constant), gamma.constant, {},
                  A::result(1));
  return steps;
}

template <typename SkipOp> std::optional<OpSteps> lowerSkip(Operation &op, const char *kernel) {
  auto skip = cast<SkipOp>(op);
  auto shape = batchShape(op.getOperand(0).getType());
  int64_t heads = int64_t(skip.getHeads());
  if (!shape || shape->size() != 3 || heads <= 0 || (*shape)[2] % heads)
    return std::nullopt;
  int64_t tokens = (*shape)[1], d = (*shape)[2];
  return single(kernel, {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))),
                         A::i64(tokens), A::i64(d), A::i64(d / heads),
                         A::i64(int64_t(skip.getSkipBase()))});
}

} // namespace

void appendPositionKernels(std::vector<KernelDef> &defs) {
  appendTableKernels(defs);
  appendRotaryKernels(defs);
  appendGateAndSkipKernels(defs);
}

void appendPositionLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SeqPositionsOp>(lowerSeqPositions));
  lowerings.push_back(loweringOf<pe::GridPositionsOp>(lowerGridPositions));
  lowerings.push_back(loweringOf<pe::RopeFreqsOp>(lowerRopeFreqs));
  lowerings.push_back(loweringOf<pe::SinusoidalOp>(lowerSinusoidal));
  lowerings.push_back(loweringOf<pe::RelativePositionsOp>(lowerRelativePositions));
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
  lowerings.push_back(loweringOf<pe::SpdGateOp>(lowerSpdGate));
  lowerings.push_back(loweringOf<pe::SpdGateGradOp>(lowerSpdGateGrad));
  lowerings.push_back(loweringOf<pe::SkipGatherOp>([](Operation &op) {
                         return lowerSkip<pe::SkipGatherOp>(op, "pe_skip_gather");
                       }));
  lowerings.push_back(loweringOf<pe::SkipGatherGradOp>([](Operation &op) {
                         return lowerSkip<pe::SkipGatherGradOp>(op, "pe_skip_gather_grad");
                       }));
}

} // namespace stringc::cudagen
