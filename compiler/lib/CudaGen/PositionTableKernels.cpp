//===- PositionTableKernels.cpp - position and frequency tables -----------===//
//
// Kernels and op lowerings of the constant position tables (the op
// library's ops/position/ files on the CPU; docs/cuda.md, "Position
// kernels"): seq_positions, grid_positions, rope_freqs, sinusoidal,
// relative_positions, one thread per output element in a grid-stride loop.
// The tables that depend on attributes only are evaluated in f64
// (libdevice's pow, cos, sin) and rounded once, as the reference kernels do;
// they are tiny. relative_positions is one f32 subtraction. The `base`
// attribute (f64) travels as two f32, base_hi + base_lo, summed in f64 in
// the kernel (exact to about 2^-48 relative).
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace param_kinds;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

/// base_hi + base_lo in f64.
Value baseF64(KernelBuilder &k, Value hi, Value lo) {
  return k.add(f32ToF64(k, hi), f32ToF64(k, lo));
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
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

std::pair<float, float> splitBase(double base) {
  float hi = float(base);
  return {hi, float(base - double(hi))};
}

std::optional<OpSteps> lowerSeqPositions(Operation &op) {
  auto seq = cast<pe::SeqPositionsOp>(op);
  int64_t special = int64_t(seq.getSpecial());
  return singleLaunch("pe_seq_positions",
                      {A::result(0), A::i64(int64_t(seq.getLength()) + special), A::i64(special)});
}

std::optional<OpSteps> lowerGridPositions(Operation &op) {
  auto grid = cast<pe::GridPositionsOp>(op);
  int64_t special = int64_t(grid.getSpecial());
  int64_t tokens = special + int64_t(grid.getRows()) * int64_t(grid.getCols());
  return singleLaunch("pe_grid_positions", {A::result(0), A::i64(tokens),
                                            A::i64(int64_t(grid.getCols())), A::i64(special)});
}

std::optional<OpSteps> lowerRopeFreqs(Operation &op) {
  auto freqs = cast<pe::RopeFreqsOp>(op);
  int64_t dim = int64_t(freqs.getDim()), heads = int64_t(freqs.getHeads());
  if (heads <= 0 || dim % heads)
    return std::nullopt;
  auto [hi, lo] = splitBase(freqs.getBase().convertToDouble());
  bool axial = freqs.getKind() == pe::FreqsKind::Axial;
  return singleLaunch(axial ? "pe_rope_freqs_axial" : "pe_rope_freqs_seq",
                      {A::result(0), A::i64(dim / 2), A::i64(dim / heads), A::f32(hi), A::f32(lo)});
}

std::optional<OpSteps> lowerSinusoidal(Operation &op) {
  auto sin = cast<pe::SinusoidalOp>(op);
  int64_t length = int64_t(sin.getLength()), dim = int64_t(sin.getDim());
  auto [hi, lo] = splitBase(sin.getBase().convertToDouble());
  return singleLaunch("pe_sinusoidal", {A::result(0), A::i64(length * (dim / 2)), A::i64(dim / 2),
                                        A::f32(hi), A::f32(lo)});
}

std::optional<OpSteps> lowerRelativePositions(Operation &op) {
  auto pos = positionShape(op.getOperand(0));
  if (!pos)
    return std::nullopt;
  auto [tokens, axes] = *pos;
  return singleLaunch(
      "pe_relative_positions",
      {A::result(0), A::operand(0), A::i64(tokens * tokens * axes), A::i64(tokens), A::i64(axes)});
}

} // namespace

void appendPositionTableKernels(std::vector<KernelDef> &defs) { appendTableKernels(defs); }

void appendPositionTableLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SeqPositionsOp>(lowerSeqPositions));
  lowerings.push_back(loweringOf<pe::GridPositionsOp>(lowerGridPositions));
  lowerings.push_back(loweringOf<pe::RopeFreqsOp>(lowerRopeFreqs));
  lowerings.push_back(loweringOf<pe::SinusoidalOp>(lowerSinusoidal));
  lowerings.push_back(loweringOf<pe::RelativePositionsOp>(lowerRelativePositions));
}

} // namespace stringc::cudagen
