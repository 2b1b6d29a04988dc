//===- GeneratorKernels.cpp - generator exponentials and commutators ------===//
//
// Kernels and op lowerings of vit_generators' generator ops (docs/cuda.md,
// "Index-table and generator kernels"), computed in f64 as the reference
// kernels (the op library's ops/position/GeneratorExp.cpp and
// CommutatorNorm.cpp) are, and rounded to
// f32 once:
//
// - generator_exp: R[p] = exp(A_p), A_p = sum_k r[p, k] L_k, by the
//   reference's method (linalg::expm): scaling and squaring with the
//   degree-13 Pade approximant (Higham 2005), s = ceil(log2(|A|_1 /
//   theta13)) squarings, r13 = (V - U)^-1 (V + U) by Gauss-Jordan with
//   partial pivoting. One block of 256 threads per matrix (blocks loop over
//   the matrices), its f64 work matrices in static shared memory for
//   d <= 24 (32 KiB), else in the `work` scratch buffer (one region per
//   block, at most 64 blocks).
// - generator_exp_grad: dA(p) = the top-right block of
//   exp([[A_p^T, dR_p], [0, A_p^T]]) (the reference's block-triangular
//   Frechet derivative), computed on the blocks: every matrix of the
//   algorithm is block upper-triangular with equal diagonal blocks, so it is
//   a pair (P, Q) of d x d blocks ([[P, Q], [0, P]]) and
//   (P1, Q1)(P2, Q2) = (P1 P2, P1 Q2 + Q1 P2); the solve takes one
//   Gauss-Jordan on [Mp | Np | Nq | Mq] (Rp = Mp^-1 Np, Rq = Mp^-1 Nq -
//   Mp^-1 Mq Rp). The 1-norm and the squaring count are those of the whole
//   2d x 2d matrix, as in the reference. Shared memory for d <= 16
//   (28 KiB). dA(p) goes to scratch (f32); dL_k = sum_p r[p, k] dA(p) is a
//   deterministic column sum (partials over chunks of p, then their sum).
// - commutator_norm(_grad): every commutator C_ab = L_a L_b - L_b L_a (one
//   thread per element, f64 into scratch), each one's Frobenius norm (one
//   thread per pair), then the first largest (one thread) or, for the
//   gradient, one thread per element of dL: G = dy C / |C|_F of the first
//   maximising pair, dL_a = G L_b^T - L_b^T G, dL_b = L_a^T G - G L_a^T,
//   0 elsewhere and everywhere when |C|_F = 0.
//
// Barriers: the loops around them (matrices of the block, Gauss-Jordan
// columns, squarings) have the same trip count in every thread of a block:
// the squaring count comes from the 1-norm that every thread computes
// itself from the same shared data. Of libdevice only __nv_sqrt (the
// Frobenius norms; sqrt.rn.f64): |x| is a select, 2^-s is built from its
// bits.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace param_kinds;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

constexpr int64_t kThreads = 256;
constexpr int64_t kExpSharedDim = 24;  // generator_exp: 7 d^2 + d doubles
constexpr int64_t kGradSharedDim = 16; // the gradient: 14 d^2 + d doubles
constexpr int64_t kMaxDim = 128;       // larger generators are left uncovered
constexpr int64_t kMaxGlobalBlocks = 64; // blocks with work regions in scratch

// Degree-13 Pade coefficients and the largest 1-norm for which the
// approximant is accurate to double precision (linalg::expm).
constexpr double kPade[14] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                              1187353796428800.0,  129060195264000.0,   10559470521600.0,
                              670442572800.0,      33522128640.0,       1323241920.0,
                              40840800.0,          960960.0,            16380.0,
                              182.0,               1.0};
constexpr double kTheta13 = 5.371920351148152;

//===----------------------------------------------------------------------===//
// f64 helpers
//===----------------------------------------------------------------------===//

/// f32 buffer element as f64.
Value loadWide(KernelBuilder &k, Value ptr, Value index) {
  return f32ToF64(k, k.load(ptr, index));
}
Value greater(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::CmpFOp>(k.location(), arith::CmpFPredicate::OGT, a, b);
}
Value absF64(KernelBuilder &k, Value x) {
  Value negative =
      k.builder().create<arith::CmpFOp>(k.location(), arith::CmpFPredicate::OLT, x, f64(k, 0.0));
  return select(k, negative, k.builder().create<arith::NegFOp>(k.location(), x), x);
}

/// Loop-carried (first, second) through scf.for; `body` gets and returns them.
std::pair<Value, Value> loop2(KernelBuilder &k, Value begin, Value end, Value a, Value b,
                              const std::function<std::pair<Value, Value>(Value, Value, Value)> &body) {
  ValueRange out = k.forLoop(begin, end, k.i64(1), {a, b}, [&](Value i, ValueRange acc) {
    auto [x, y] = body(i, acc[0], acc[1]);
    return SmallVector<Value>{x, y};
  });
  return {out[0], out[1]};
}

/// The pair (a, b), a < b, of index m in row-major order over `count`
/// generators: (0, 1), (0, 2), ..., (1, 2), ...
std::pair<Value, Value> pairOf(KernelBuilder &k, Value m, Value count) {
  auto [a, rest] = loop2(k, k.i64(0), k.sub(count, k.i64(1)), k.i64(0), m,
                         [&](Value row, Value a, Value rest) {
                           Value length = k.sub(k.sub(count, k.i64(1)), row);
                           Value skip = andI(k, cmpI(k, Pred::eq, a, row),
                                             cmpI(k, Pred::sge, rest, length));
                           return std::make_pair(select(k, skip, k.add(a, k.i64(1)), a),
                                                 select(k, skip, k.sub(rest, length), rest));
                         });
  return {a, k.add(k.add(a, k.i64(1)), rest)};
}

//===----------------------------------------------------------------------===//
// The exponential's block-level linear algebra
//===----------------------------------------------------------------------===//

/// The f64 work matrices of one block: `slots` matrices of d x d doubles,
/// or of pairs (P, Q) of them (P at unit 2s, Q at unit 2s + 1), then a
/// column of d pivot factors. Every operation ends at a barrier.
class BlockMatrices {
public:
  BlockMatrices(KernelBuilder &k, Value base, Value d, bool pairs)
      : k(k), base(base), d(d), dd(k.mul(d, d)), pairs(pairs) {}

  static int64_t units(int64_t slots, bool pairs) { return slots * (pairs ? 2 : 1); }
  /// Doubles a block needs for `slots` slots.
  static int64_t doubles(int64_t slots, bool pairs, int64_t d) {
    return units(slots, pairs) * d * d + d;
  }

  /// Offset of slot s (its P block) and of its Q block.
  Value slotP(int64_t s) { return k.mul(k.i64(units(s, pairs)), dd); }
  Value slotQ(int64_t s) { return k.add(slotP(s), dd); }
  Value at(Value offset, Value i, Value j) { return k.add(offset, k.add(k.mul(i, d), j)); }
  Value read(Value offset) { return loadF64(k, base, offset); }
  void write(Value v, Value offset) { storeF64(k, v, base, offset); }

  /// dst = a b (pairs: (aP bP, aP bQ + aQ bP)); dst differs from a and b.
  void matmul(int64_t dst, int64_t a, int64_t b) {
    productInto(slotP(dst), slotP(a), slotP(b), std::nullopt);
    if (pairs)
      productInto(slotQ(dst), slotP(a), slotQ(b), std::make_pair(slotQ(a), slotP(b)));
    barrier(k);
  }

  /// dst = plus + (sum_i coef_i src_i + identity I), elementwise (dst may be
  /// one of the sources: each element is read and written by one thread).
  void combine(int64_t dst, const std::vector<std::pair<Value, int64_t>> &terms,
               std::optional<double> identity, std::optional<int64_t> plus) {
    Value size = pairs ? k.mul(dd, k.i64(2)) : dd;
    forBlockStride(k, size, [&](Value e) {
      Value sum;
      for (auto [coef, src] : terms) {
        Value term = k.mul(coef, read(k.add(slotP(src), e)));
        sum = sum ? k.add(sum, term) : term;
      }
      if (identity) {
        Value diagonal = andI(k, cmpI(k, Pred::slt, e, dd),
                              cmpI(k, Pred::eq, divU(k, e, d), remU(k, e, d)));
        sum = k.add(sum, k.mul(f64(k, *identity), select(k, diagonal, f64(k, 1.0), f64(k, 0.0))));
      }
      if (plus)
        sum = k.add(read(k.add(slotP(*plus), e)), sum);
      write(sum, k.add(slotP(dst), e));
    });
    barrier(k);
  }

  /// The 1-norm of the matrix in slot s: max over columns j of the column's
  /// sum of |values|; for pairs the 2d x 2d matrix [[P, Q], [0, P]], whose
  /// largest column is a right one (Q's column, then P's). Every thread
  /// computes it (the same value everywhere).
  Value norm1(int64_t s) {
    Value offsetP = slotP(s), offsetQ = slotQ(s);
    ValueRange best = k.forLoop(k.i64(0), d, k.i64(1), {f64(k, 0.0)}, [&](Value j, ValueRange acc) {
      Value sum = f64(k, 0.0);
      auto addColumn = [&](Value offset) {
        ValueRange column = k.forLoop(k.i64(0), d, k.i64(1), {sum}, [&](Value i, ValueRange c) {
          return SmallVector<Value>{k.add(c[0], absF64(k, read(at(offset, i, j))))};
        });
        sum = column[0];
      };
      if (pairs)
        addColumn(offsetQ);
      addColumn(offsetP);
      return SmallVector<Value>{select(k, greater(k, sum, acc[0]), sum, acc[0])};
    });
    return best[0];
  }

  /// Gauss-Jordan with partial pivoting on the d x width matrix at `region`
  /// (row-major): its left d x d block becomes I, the rest that block's
  /// inverse times the rest. Pivot factors in the column at `factors`.
  void gaussJordan(Value region, Value width, Value factors) {
    auto cell = [&](Value r, Value c) { return k.add(region, k.add(k.mul(r, width), c)); };
    k.forLoop(k.i64(0), d, k.i64(1), {}, [&](Value c, ValueRange) {
      // Every thread finds the same pivot: the first row r >= c of largest |w[r, c]|.
      Value pivot =
          loop2(k, c, d, c, f64(k, -1.0), [&](Value r, Value best, Value size) {
            Value a = absF64(k, read(cell(r, c)));
            Value better = greater(k, a, size);
            return std::make_pair(select(k, better, r, best), select(k, better, a, size));
          }).first;
      barrier(k); // column c read by all before the swap
      forBlockStride(k, width, [&](Value j) {
        Value vc = read(cell(c, j)), vp = read(cell(pivot, j));
        write(vp, cell(c, j));
        write(vc, cell(pivot, j));
      });
      barrier(k);
      Value pivotValue = read(cell(c, c));
      forBlockStride(k, d, [&](Value r) { write(read(cell(r, c)), k.add(factors, r)); });
      barrier(k); // pivot and factors read before row c changes
      forBlockStride(k, width, [&](Value j) { write(k.div(read(cell(c, j)), pivotValue), cell(c, j)); });
      barrier(k);
      forBlockStride(k, k.mul(d, width), [&](Value e) {
        Value r = divU(k, e, width), j = remU(k, e, width);
        k.ifThen(cmpI(k, Pred::ne, r, c), [&] {
          Value v = k.sub(read(e2(region, e)), k.mul(read(k.add(factors, r)), read(cell(c, j))));
          write(v, e2(region, e));
        });
      });
      barrier(k);
      return SmallVector<Value>{};
    });
  }

private:
  Value e2(Value region, Value e) { return k.add(region, e); }

  /// dst[i, j] = sum_t a[i, t] b[t, j] (+ sum_t a2[i, t] b2[t, j]).
  void productInto(Value dst, Value a, Value b, std::optional<std::pair<Value, Value>> second) {
    forBlockStride(k, dd, [&](Value e) {
      Value i = divU(k, e, d), j = remU(k, e, d);
      auto dot = [&](Value x, Value y, Value init) {
        ValueRange sum = k.forLoop(k.i64(0), d, k.i64(1), {init}, [&](Value t, ValueRange acc) {
          return SmallVector<Value>{k.add(acc[0], k.mul(read(at(x, i, t)), read(at(y, t, j))))};
        });
        return sum[0];
      };
      Value sum = dot(a, b, f64(k, 0.0));
      if (second)
        sum = dot(second->first, second->second, sum);
      write(sum, k.add(dst, e));
    });
  }

  KernelBuilder &k;
  Value base, d, dd;
  bool pairs;
};

/// The squaring count s = ceil(log2(norm / theta13)) when norm > theta13,
/// else 0, from the bits of the quotient (exact, no libdevice), capped at
/// 1022; returns s and 2^-s.
std::pair<Value, Value> scaling(KernelBuilder &k, Value norm) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  Value x = k.div(norm, f64(k, kTheta13));
  Value bits = b.create<arith::BitcastOp>(loc, b.getI64Type(), x);
  Value exponent = k.sub(andI(k, b.create<arith::ShRUIOp>(loc, bits, k.i64(52)), k.i64(0x7ff)),
                         k.i64(1023));
  Value mantissa = andI(k, bits, k.i64((int64_t(1) << 52) - 1));
  Value ceilLog2 = select(k, cmpI(k, Pred::eq, mantissa, k.i64(0)), exponent,
                          k.add(exponent, k.i64(1)));
  Value s = select(k, greater(k, norm, f64(k, kTheta13)), minI(k, ceilLog2, k.i64(1022)), k.i64(0));
  Value scaleBits = b.create<arith::ShLIOp>(loc, k.sub(k.i64(1023), s), k.i64(52));
  return {s, b.create<arith::BitcastOp>(loc, b.getF64Type(), scaleBits)};
}

/// The body of pe_generator_exp (pairs = false) and of
/// pe_generator_exp_grad_blocks (pairs = true). Params: out, work, r,
/// generators, [dy,] matrices, count, dim.
void exponentialBody(KernelBuilder &k, bool pairs) {
  auto func = cast<gpu::GPUFuncOp>(k.builder().getInsertionBlock()->getParentOp());
  func.setKnownBlockSizeAttr(k.builder().getDenseI32ArrayAttr({int32_t(kThreads), 1, 1}));
  unsigned next = pairs ? 5 : 4;
  Value out = k.arg(0), work = k.arg(1), r = k.arg(2), gens = k.arg(3);
  Value dy = pairs ? k.arg(4) : Value();
  Value matrices = k.arg(next), count = k.arg(next + 1), d = k.arg(next + 2);
  constexpr int64_t kSlots = 7; // B, S2, S4, S6, T, U, V
  int64_t sharedDim = pairs ? kGradSharedDim : kExpSharedDim;
  Value dd = k.mul(d, d);
  Value shared = sharedArray(k, pairs ? "pe_generator_exp_grad_work" : "pe_generator_exp_work",
                             2 * BlockMatrices::doubles(kSlots, pairs, sharedDim));
  Value blockDoubles = k.add(k.mul(k.i64(BlockMatrices::units(kSlots, pairs)), dd), d);
  Value global = elementAddress(k, k.builder().getF64Type(), work,
                                k.mul(k.blockId(gpu::Dimension::x), blockDoubles));
  Value base = select(k, cmpI(k, Pred::sle, d, k.i64(sharedDim)), shared, global);
  BlockMatrices m(k, base, d, pairs);
  enum Slot : int64_t { B = 0, S2, S4, S6, T, U, V };
  Value factors = k.mul(k.i64(BlockMatrices::units(kSlots, pairs)), dd);

  k.forLoop(k.blockId(gpu::Dimension::x), matrices, k.gridDim(gpu::Dimension::x), {},
            [&](Value p, ValueRange) {
    // A = sum_k r[p, k] L_k (the gradient: its transpose, and dR in Q).
    forBlockStride(k, dd, [&](Value e) {
      Value i = divU(k, e, d), j = remU(k, e, d);
      Value from = pairs ? k.add(k.mul(j, d), i) : e;
      ValueRange a = k.forLoop(k.i64(0), count, k.i64(1), {f64(k, 0.0)}, [&](Value g, ValueRange acc) {
        Value c = loadWide(k, r, k.add(k.mul(p, count), g));
        return SmallVector<Value>{k.add(acc[0], k.mul(c, loadWide(k, gens, k.add(k.mul(g, dd), from))))};
      });
      m.write(a[0], k.add(m.slotP(B), e));
      if (pairs)
        m.write(loadWide(k, dy, k.add(k.mul(p, dd), e)), k.add(m.slotQ(B), e));
    });
    barrier(k);
    auto [squarings, scale] = scaling(k, m.norm1(B));
    barrier(k); // the norm read by all before B is scaled in place
    m.combine(B, {{scale, B}}, std::nullopt, std::nullopt);

    auto c = [&](int i) { return f64(k, kPade[i]); };
    m.matmul(S2, B, B);
    m.matmul(S4, S2, S2);
    m.matmul(S6, S4, S2);
    // U = B [S6 (b13 S6 + b11 S4 + b9 S2) + b7 S6 + b5 S4 + b3 S2 + b1 I]
    m.combine(T, {{c(13), S6}, {c(11), S4}, {c(9), S2}}, std::nullopt, std::nullopt);
    m.matmul(V, S6, T);
    m.combine(V, {{c(7), S6}, {c(5), S4}, {c(3), S2}}, kPade[1], V);
    m.matmul(U, B, V);
    // V = S6 (b12 S6 + b10 S4 + b8 S2) + b6 S6 + b4 S4 + b2 S2 + b0 I
    m.combine(T, {{c(12), S6}, {c(10), S4}, {c(8), S2}}, std::nullopt, std::nullopt);
    m.matmul(V, S6, T);
    m.combine(V, {{c(6), S6}, {c(4), S4}, {c(2), S2}}, kPade[0], V);

    // r13 = (V - U)^-1 (V + U): Gauss-Jordan on [V - U | V + U] (pairs:
    // [Mp | Np | Nq | Mq] with M = V - U, N = V + U) where S2.. were.
    int64_t blocks = pairs ? 4 : 2;
    Value width = k.mul(d, k.i64(blocks));
    Value region = m.slotP(S2);
    forBlockStride(k, k.mul(d, width), [&](Value e) {
      Value row = divU(k, e, width), col = remU(k, e, width);
      Value block = divU(k, col, d), j = remU(k, col, d);
      Value onQ = cmpI(k, Pred::sge, block, k.i64(2)); // Nq, Mq
      Value minus = k.builder().create<arith::OrIOp>(k.location(), cmpI(k, Pred::eq, block, k.i64(0)),
                                                     cmpI(k, Pred::eq, block, k.i64(3)));
      Value vOffset = pairs ? select(k, onQ, m.slotQ(V), m.slotP(V)) : m.slotP(V);
      Value uOffset = pairs ? select(k, onQ, m.slotQ(U), m.slotP(U)) : m.slotP(U);
      Value v = m.read(m.at(vOffset, row, j)), u = m.read(m.at(uOffset, row, j));
      m.write(select(k, minus, k.sub(v, u), k.add(v, u)), k.add(region, e));
    });
    barrier(k);
    m.gaussJordan(region, width, factors);
    // R into B: Rp = X1; pairs: Rq = X2 - X3 X1 (X_b = block b of the region).
    forBlockStride(k, dd, [&](Value e) {
      Value i = divU(k, e, d), j = remU(k, e, d);
      auto x = [&](int64_t b, Value row, Value col) {
        return m.read(k.add(region, k.add(k.mul(row, width), k.add(k.mul(d, k.i64(b)), col))));
      };
      m.write(x(1, i, j), k.add(m.slotP(B), e));
      if (pairs) {
        ValueRange sum = k.forLoop(k.i64(0), d, k.i64(1), {f64(k, 0.0)}, [&](Value t, ValueRange acc) {
          return SmallVector<Value>{k.add(acc[0], k.mul(x(3, i, t), x(1, t, j)))};
        });
        m.write(k.sub(x(2, i, j), sum[0]), k.add(m.slotQ(B), e));
      }
    });
    barrier(k);
    k.forLoop(k.i64(0), squarings, k.i64(1), {}, [&](Value, ValueRange) {
      m.matmul(T, B, B);
      m.combine(B, {{f64(k, 1.0), T}}, std::nullopt, std::nullopt);
      return SmallVector<Value>{};
    });
    // exp(A), or the top-right block of the 2d x 2d exponential.
    forBlockStride(k, dd, [&](Value e) {
      Value v = m.read(k.add(pairs ? m.slotQ(B) : m.slotP(B), e));
      k.store(f64ToF32(k, v), out, k.add(k.mul(p, dd), e));
    });
    barrier(k); // B read by all before the next matrix overwrites it
    return SmallVector<Value>{};
  });
}

void appendExponentialKernels(std::vector<KernelDef> &defs) {
  defs.push_back({makeSpec("pe_generator_exp", pe::GeneratorExpOp::getOperationName(),
                           {{"rotations", P}, {"work", P}, {"r", P}, {"generators", P},
                            {"matrices", I}, {"count", I}, {"dim", I}},
                           GridRule::Explicit, kThreads),
                  [](KernelBuilder &k) { exponentialBody(k, /*pairs=*/false); }});
  defs.push_back({makeSpec("pe_generator_exp_grad_blocks",
                           pe::GeneratorExpGradOp::getOperationName(),
                           {{"da", P}, {"work", P}, {"r", P}, {"generators", P}, {"dy", P},
                            {"matrices", I}, {"count", I}, {"dim", I}},
                           GridRule::Explicit, kThreads),
                  [](KernelBuilder &k) { exponentialBody(k, /*pairs=*/true); }});
  // partials of dL[k, e] = sum_p r[p, k] da[p, e] (column c = k * d^2 + e).
  defs.push_back(columnPartialsKernel(
      "pe_generator_exp_grad_partials", pe::GeneratorExpGradOp::getOperationName(), {"r", "da"},
      {{"count", I}, {"dd", I}}, [](KernelBuilder &k, Value p, Value c) {
        Value count = k.arg(6), dd = k.arg(7);
        Value g = divU(k, c, dd), e = remU(k, c, dd);
        return k.mul(k.load(k.arg(1), k.add(k.mul(p, count), g)),
                     k.load(k.arg(2), k.add(k.mul(p, dd), e)));
      }));
}

//===----------------------------------------------------------------------===//
// Commutators
//===----------------------------------------------------------------------===//

void appendCommutatorKernels(std::vector<KernelDef> &defs) {
  // c[m, i, j] = (L_a L_b - L_b L_a)[i, j] for pair m = (a, b), f64.
  defs.push_back({makeSpec("pe_commutators", pe::CommutatorNormOp::getOperationName(),
                           {{"c", P}, {"generators", P}, {"n", I}, {"count", I}, {"dim", I}}),
                  [](KernelBuilder &k) {
                    Value gens = k.arg(1), count = k.arg(3), d = k.arg(4), dd = k.mul(d, d);
                    k.forGridStride(k.arg(2), [&](Value e) {
                      Value pair = divU(k, e, dd), rem = remU(k, e, dd);
                      Value i = divU(k, rem, d), j = remU(k, rem, d);
                      auto [a, b] = pairOf(k, pair, count);
                      auto product = [&](Value x, Value y) {
                        ValueRange sum = k.forLoop(k.i64(0), d, k.i64(1), {f64(k, 0.0)},
                                                   [&](Value t, ValueRange acc) {
                          Value l = loadWide(k, gens, k.add(k.mul(x, dd), k.add(k.mul(i, d), t)));
                          Value r = loadWide(k, gens, k.add(k.mul(y, dd), k.add(k.mul(t, d), j)));
                          return SmallVector<Value>{k.add(acc[0], k.mul(l, r))};
                        });
                        return sum[0];
                      };
                      storeF64(k, k.sub(product(a, b), product(b, a)), k.arg(0), e);
                    });
                  }});
  // norms[m] = |c[m]|_F (f64)
  defs.push_back({makeSpec("pe_commutator_norms", pe::CommutatorNormOp::getOperationName(),
                           {{"norms", P}, {"c", P}, {"pairs", I}, {"dd", I}}),
                  [](KernelBuilder &k) {
                    Value dd = k.arg(3);
                    k.forGridStride(k.arg(2), [&](Value m) {
                      ValueRange sum = k.forLoop(k.i64(0), dd, k.i64(1), {f64(k, 0.0)},
                                                 [&](Value e, ValueRange acc) {
                        Value v = loadF64(k, k.arg(1), k.add(k.mul(m, dd), e));
                        return SmallVector<Value>{k.add(acc[0], k.mul(v, v))};
                      });
                      storeF64(k, sqrtF64(k, sum[0]), k.arg(0), m);
                    });
                  }});
  // y = the first largest norm (one thread).
  defs.push_back({makeSpec("pe_commutator_norm_max", pe::CommutatorNormOp::getOperationName(),
                           {{"y", P}, {"norms", P}, {"pairs", I}}, GridRule::Explicit, 32),
                  [](KernelBuilder &k) {
                    k.ifThen(cmpI(k, Pred::eq, globalThreadX(k), k.i64(0)), [&] {
                      ValueRange best = k.forLoop(k.i64(1), k.arg(2), k.i64(1),
                                                  {loadF64(k, k.arg(1), k.i64(0))},
                                                  [&](Value m, ValueRange acc) {
                        Value v = loadF64(k, k.arg(1), m);
                        return SmallVector<Value>{select(k, greater(k, v, acc[0]), v, acc[0])};
                      });
                      k.store(f64ToF32(k, best[0]), k.arg(0), k.i64(0));
                    });
                  }});
  // dL[g, i, j] for the first maximising pair (a, b), G = dy C / |C|_F:
  // g = a: (G L_b^T - L_b^T G)[i, j]; g = b: -(G L_a^T - L_a^T G)[i, j].
  defs.push_back(
      {makeSpec("pe_commutator_norm_grad", pe::CommutatorNormGradOp::getOperationName(),
                {{"dgenerators", P}, {"generators", P}, {"c", P}, {"norms", P}, {"dy", P},
                 {"n", I}, {"count", I}, {"dim", I}, {"pairs", I}}),
       [](KernelBuilder &k) {
         Value gens = k.arg(1), cs = k.arg(2), norms = k.arg(3);
         Value count = k.arg(6), d = k.arg(7), dd = k.mul(d, d);
         k.forGridStride(k.arg(5), [&](Value e) {
           Value g = divU(k, e, dd), rem = remU(k, e, dd);
           Value i = divU(k, rem, d), j = remU(k, rem, d);
           std::pair<Value, Value> first = loop2(
               k, k.i64(1), k.arg(8), k.i64(0), loadF64(k, norms, k.i64(0)),
               [&](Value m, Value bestM, Value bestNorm) {
                 Value v = loadF64(k, norms, m);
                 Value better = greater(k, v, bestNorm);
                 return std::make_pair(select(k, better, m, bestM), select(k, better, v, bestNorm));
               });
           Value best = first.first, norm = first.second;
           std::pair<Value, Value> pair = pairOf(k, best, count);
           Value a = pair.first, b = pair.second;
           Value isA = cmpI(k, Pred::eq, g, a);
           Value other = select(k, isA, b, a); // X: L_b for g = a, L_a for g = b
           Value scale = k.div(loadWide(k, k.arg(4), k.i64(0)), norm);
           auto gAt = [&](Value x, Value y) {
             return k.mul(scale, loadF64(k, cs, k.add(k.mul(best, dd), k.add(k.mul(x, d), y))));
           };
           auto xAt = [&](Value x, Value y) {
             return loadWide(k, gens, k.add(k.mul(other, dd), k.add(k.mul(x, d), y)));
           };
           // (G X^T)[i, j] and (X^T G)[i, j], each summed over t in order.
           std::pair<Value, Value> sums = loop2(
               k, k.i64(0), d, f64(k, 0.0), f64(k, 0.0), [&](Value t, Value s1, Value s2) {
                 return std::make_pair(k.add(s1, k.mul(gAt(i, t), xAt(j, t))),
                                       k.add(s2, k.mul(xAt(t, i), gAt(t, j))));
               });
           Value value = k.sub(sums.first, sums.second);
           value = select(k, isA, value, k.builder().create<arith::NegFOp>(k.location(), value));
           Value involved = k.builder().create<arith::OrIOp>(k.location(), isA,
                                                             cmpI(k, Pred::eq, g, b));
           // A NaN norm computes (NaN), as the reference does.
           Value nonzero = k.builder().create<arith::CmpFOp>(
               k.location(), arith::CmpFPredicate::UNE, norm, f64(k, 0.0));
           Value result = select(k, andI(k, involved, nonzero), value, f64(k, 0.0));
           k.store(f64ToF32(k, result), k.arg(0), e);
         });
       }});
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

/// generators [K, d, d] (static, K >= minCount, 1 <= d <= kMaxDim).
struct Generators {
  int64_t count = 0, dim = 0;
};
std::optional<Generators> generatorsOf(Value generators, int64_t minCount) {
  auto shape = staticShape(generators);
  if (!shape || shape->size() != 3 || (*shape)[0] < minCount || (*shape)[1] < 1 ||
      (*shape)[1] > kMaxDim || (*shape)[1] != (*shape)[2])
    return std::nullopt;
  return Generators{(*shape)[0], (*shape)[1]};
}

/// The exponentials of generator_exp(_grad): P matrices from r [..., K]
/// (static) and generators [K, d, d]; `matrices` [..., d, d] must match.
struct Exponentials {
  Generators gens;
  int64_t matrices = 0;
};
std::optional<Exponentials> exponentialsOf(Value r, Value generators, Value matrices) {
  auto g = generatorsOf(generators, 1);
  auto rs = staticShape(r), ms = staticShape(matrices);
  if (!g || !rs || !ms || rs->empty() || rs->back() != g->count)
    return std::nullopt;
  std::vector<int64_t> want(rs->begin(), rs->end() - 1);
  want.push_back(g->dim);
  want.push_back(g->dim);
  int64_t count = *staticProduct(*rs, 0, rs->size() - 1);
  if (*ms != want || count < 1)
    return std::nullopt;
  return Exponentials{*g, count};
}

/// Appends the launch of an exponential kernel with its work scratch buffer
/// (index `workScratch`, pushed here): grid min(P, 65535) blocks looping
/// over the matrices, at most kMaxGlobalBlocks when the work is in scratch.
void appendExponential(OpSteps &steps, const std::string &kernel, const Exponentials &x,
                       int64_t sharedDim, bool pairs, std::vector<LaunchArg> args) {
  int64_t d = x.gens.dim;
  bool shared = d <= sharedDim;
  int64_t blocks = std::min<int64_t>(x.matrices, shared ? 65535 : kMaxGlobalBlocks);
  int64_t doubles = (7 * (pairs ? 2 : 1)) * d * d + d;
  steps.scratchBytes.push_back(BatchAffine::fixed(shared ? 8 : blocks * doubles * 8));
  args.insert(args.begin() + 1, A::scratch(int64_t(steps.scratchBytes.size()) - 1));
  args.push_back(A::i64(x.matrices));
  args.push_back(A::i64(x.gens.count));
  args.push_back(A::i64(d));
  Launch launch = Launch::kernelCall(kernel, std::move(args));
  launch.grid = ExplicitGrid{BatchAffine::fixed(blocks), BatchAffine::fixed(1),
                             BatchAffine::fixed(1)};
  steps.launches.push_back(std::move(launch));
}

std::optional<OpSteps> lowerGeneratorExp(Operation &op) {
  auto exp = cast<pe::GeneratorExpOp>(op);
  auto x = exponentialsOf(exp.getR(), exp.getGenerators(), exp.getResult());
  if (!x)
    return std::nullopt;
  OpSteps steps;
  appendExponential(steps, "pe_generator_exp", *x, kExpSharedDim, false,
                    {A::result(0), A::operand(0), A::operand(1)});
  return steps;
}

std::optional<OpSteps> lowerGeneratorExpGrad(Operation &op) {
  auto grad = cast<pe::GeneratorExpGradOp>(op);
  auto x = exponentialsOf(grad.getR(), grad.getGenerators(), grad.getDy());
  if (!x || batchShape(grad.getDgenerators().getType()) != batchShape(grad.getGenerators().getType()))
    return std::nullopt;
  int64_t dd = x->gens.dim * x->gens.dim;
  OpSteps steps;
  steps.scratchBytes.push_back(BatchAffine::fixed(x->matrices * dd * 4)); // 0: dA per matrix
  appendExponential(steps, "pe_generator_exp_grad_blocks", *x, kGradSharedDim, true,
                    {A::scratch(0), A::operand(0), A::operand(1), A::operand(2)});
  appendColumnSum(steps, "pe_generator_exp_grad_partials", {A::operand(0), A::scratch(0)},
                  BatchAffine::fixed(x->matrices), x->gens.count * dd,
                  {A::i64(x->gens.count), A::i64(dd)}, A::result(0));
  return steps;
}

/// Scratch 0: the commutators (pairs d^2 doubles), 1: their norms; the two
/// launches that fill them.
OpSteps commutatorSteps(const Generators &g) {
  int64_t pairs = g.count * (g.count - 1) / 2, dd = g.dim * g.dim;
  OpSteps steps;
  steps.scratchBytes.push_back(BatchAffine::fixed(pairs * dd * 8));
  steps.scratchBytes.push_back(BatchAffine::fixed(pairs * 8));
  steps.launches.push_back(Launch::kernelCall(
      "pe_commutators", {A::scratch(0), A::operand(0), A::i64(pairs * dd), A::i64(g.count),
                         A::i64(g.dim)}));
  steps.launches.push_back(Launch::kernelCall(
      "pe_commutator_norms", {A::scratch(1), A::scratch(0), A::i64(pairs), A::i64(dd)}));
  return steps;
}

std::optional<OpSteps> lowerCommutatorNorm(Operation &op) {
  auto norm = cast<pe::CommutatorNormOp>(op);
  auto g = generatorsOf(norm.getGenerators(), 2);
  auto y = staticShape(norm.getResult());
  if (!g || !y || !y->empty())
    return std::nullopt;
  OpSteps steps = commutatorSteps(*g);
  Launch max = Launch::kernelCall(
      "pe_commutator_norm_max",
      {A::result(0), A::scratch(1), A::i64(g->count * (g->count - 1) / 2)});
  max.grid = ExplicitGrid{};
  steps.launches.push_back(std::move(max));
  return steps;
}

std::optional<OpSteps> lowerCommutatorNormGrad(Operation &op) {
  auto grad = cast<pe::CommutatorNormGradOp>(op);
  auto g = generatorsOf(grad.getGenerators(), 2);
  auto dy = staticShape(grad.getDy());
  if (!g || !dy || !dy->empty() ||
      batchShape(grad.getDgenerators().getType()) != batchShape(grad.getGenerators().getType()))
    return std::nullopt;
  OpSteps steps = commutatorSteps(*g);
  steps.launches.push_back(Launch::kernelCall(
      "pe_commutator_norm_grad",
      {A::result(0), A::operand(0), A::scratch(0), A::scratch(1), A::operand(1),
       A::i64(g->count * g->dim * g->dim), A::i64(g->count), A::i64(g->dim),
       A::i64(g->count * (g->count - 1) / 2)}));
  return steps;
}

} // namespace

void appendGeneratorKernels(std::vector<KernelDef> &defs) {
  appendExponentialKernels(defs);
  appendCommutatorKernels(defs);
}

void appendGeneratorLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::GeneratorExpOp>(lowerGeneratorExp));
  lowerings.push_back(loweringOf<pe::GeneratorExpGradOp>(lowerGeneratorExpGrad));
  lowerings.push_back(loweringOf<pe::CommutatorNormOp>(lowerCommutatorNorm));
  lowerings.push_back(loweringOf<pe::CommutatorNormGradOp>(lowerCommutatorNormGrad));
}

} // namespace stringc::cudagen
