//===- CayleyKernels.cpp - skew builders and the Cayley transform ---------===//
//
// Kernels and op lowerings of the Cayley family (docs/cuda.md, "Position,
// token and Cayley kernels"; the op library's ops/position/Skew.cpp,
// SparseSkew.cpp, Cayley.cpp and ops/fused/CayleyWeight.cpp on the CPU):
// - skew / skew_grad: one thread per output element; skew_grad finds the
//   pair (i, j) of upper-triangle index k by walking the rows (dim steps);
// - sparse_skew / sparse_skew_grad: one thread per output element, the
//   support a constant buffer of the package (LaunchArg::constant, uploaded
//   once): `entry` (i32, dim * dim) is 0 for a zero of S, m + 1 where S
//   holds params[m], -(m + 1) where it holds -params[m]; `pairs` (i32, 2K)
//   the flat indices (i_m d + j_m, j_m d + i_m) of support entry m. An entry
//   out of range (a corrupt package) gives NaN, never a read outside a
//   buffer;
// - `pe_cayley_factors`: one block of 1024 threads per matrix inverts
//   A = I + S in place by Gauss-Jordan elimination without pivoting and
//   writes M = A^-1 and the Cayley weight W = U^T = 2 M^T - I
//   (U = (I - S)(I + S)^-1 = 2 (I + S)^-1 - I for any S with I + S
//   invertible). Pivot step c maps a to a' with a'[c][c] = 1 / p,
//   a'[c][j] = a[c][j] / p, a'[i][c] = -a[i][c] / p and
//   a'[i][j] = a[i][j] - a[i][c] a[c][j] / p (p = a[c][c]): every element
//   has one owner thread for the whole kernel, and the old row and column c
//   sit in a double-buffered pair of line buffers that the owners of row and
//   column c + 1 fill during step c, so a step is one barrier and no search.
//   The matrix lives in static shared memory when dim <= 64 (16 KiB), else
//   in the `work` scratch buffer (global memory, d^2 floats, then 4 d for the
//   lines when dim > 128); the lines (4 x 128 floats) in shared memory.
//   Why no pivoting: for a skew S the pivot of step c is the leading
//   entry of the Schur complement I + S22 + S12^T (I + S11)^-1 S12 of the
//   leading c x c block, whose symmetric part is
//   I + S12^T (I + S11^T S11)^-1 S12 >= I: every pivot is >= 1 (no search
//   needed, no division that amplifies), and elimination on a matrix with a
//   positive-definite symmetric part is stable without pivoting (growth
//   bounded in terms of ||S||; Golub and Van Loan, "Matrix Computations",
//   unsymmetric positive definite systems). A zero pivot (an S that is not
//   skew and makes a leading block of I + S singular) gives inf / NaN in
//   M and W, never a silent finite answer;
// - cayley_weight_grad: ds = -(M dw (I + U))^T = -2 M^T dw^T M^T, two cuBLAS
//   GEMMs after M is known: read off the forward's W (M = (W^T + I) / 2, since
//   W = 2 M^T - I; `pe_cayley_inverse_of_weight`, one thread an element;
//   the layers' in one launch of `pe_cayley_inverses_of_weight`, a group of
//   first launches, KernelGroups.h) when pe-autodiff passed it, else from
//   the factor kernel again; cayley /
//   cayley_grad likewise (y = x W, dx = dy W^T, ds = -(dy + dx)^T (x M^T)).
// A singular I + S (never for a skew S: I + S has singular values >= 1)
// gives non-finite results where the reference kernel throws.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace param_kinds;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

constexpr int64_t kFactorThreads = 1024;
constexpr int64_t kSharedDim = 64; // the largest dim whose matrix lives in shared memory
constexpr int64_t kLineDim = 128;  // the largest dim whose line buffers live in shared memory
constexpr int64_t kElementBlock = 256; // the skew kernels' block (makeSpec's default)

/// A group's member (KernelGroups.h) in a grouped elementwise kernel:
/// blockIdx.y; its pointers table[m g + a] for a = 0 .. g - 1 (g the
/// group arguments a member).
Value memberPointer(KernelBuilder &k, Value table, int64_t perMember, int64_t a);

/// S[l, i, j] = p[l, k(i, j)] (i < j), -p[l, k(j, i)] (i > j), 0 (i = j),
/// k(i, j) = i d - i (i + 1) / 2 + j - i - 1; n elements of S.
void buildSkew(KernelBuilder &k, Value s, Value params, Value n, Value d) {
  Value count = divU(k, k.mul(d, k.sub(d, k.i64(1))), k.i64(2));
  k.forGridStride(n, [&](Value e) {
    Value dd = k.mul(d, d);
    Value l = divU(k, e, dd), rem = remU(k, e, dd);
    Value i = divU(k, rem, d), j = remU(k, rem, d);
    Value upper = cmpI(k, Pred::slt, i, j);
    Value lo = select(k, upper, i, j), hi = select(k, upper, j, i);
    Value pair = k.sub(
        k.add(k.sub(k.mul(lo, d), divU(k, k.mul(lo, k.add(lo, k.i64(1))), k.i64(2))), hi),
        k.add(lo, k.i64(1)));
    Value diagonal = cmpI(k, Pred::eq, i, j);
    // On the diagonal `pair` may be -1: read element 0 of the slice instead.
    Value at = k.add(k.mul(l, count), select(k, diagonal, k.i64(0), pair));
    Value p = k.load(params, at);
    Value signed_ = select(k, upper, p, k.sub(k.f32(0.0), p));
    k.store(select(k, diagonal, k.f32(0.0), signed_), s, e);
  });
}

/// dparams[l, k] = dy[l, i, j] - dy[l, j, i] for pair k = (i, j); n
/// elements of dparams.
void buildSkewGrad(KernelBuilder &k, Value dparams, Value dy, Value n, Value d) {
  Value count = divU(k, k.mul(d, k.sub(d, k.i64(1))), k.i64(2));
  k.forGridStride(n, [&](Value e) {
    Value l = divU(k, e, count), pair = remU(k, e, count);
    // Row i has d - 1 - i pairs: skip whole rows while the remaining index
    // covers them.
    ValueRange found =
        k.forLoop(k.i64(0), k.sub(d, k.i64(1)), k.i64(1), {k.i64(0), pair},
                  [&](Value row, ValueRange acc) {
                    Value len = k.sub(k.sub(d, k.i64(1)), row);
                    Value skip = andI(k, cmpI(k, Pred::eq, acc[0], row),
                                      cmpI(k, Pred::sge, acc[1], len));
                    return SmallVector<Value>{select(k, skip, k.add(acc[0], k.i64(1)), acc[0]),
                                              select(k, skip, k.sub(acc[1], len), acc[1])};
                  });
    Value i = found[0], j = k.add(k.add(i, k.i64(1)), found[1]);
    Value base = k.mul(l, k.mul(d, d));
    Value upper = k.load(dy, k.add(base, k.add(k.mul(i, d), j)));
    Value lower = k.load(dy, k.add(base, k.add(k.mul(j, d), i)));
    k.store(k.sub(upper, lower), dparams, e);
  });
}

void appendSkewKernels(std::vector<KernelDef> &defs) {
  defs.push_back({makeSpec("pe_skew", pe::SkewOp::getOperationName(),
                           {{"s", P}, {"params", P}, {"n", I}, {"dim", I}}),
                  [](KernelBuilder &k) { buildSkew(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3)); }});
  defs.push_back({makeSpec("pe_skew_grad", pe::SkewGradOp::getOperationName(),
                           {{"dparams", P}, {"dy", P}, {"n", I}, {"dim", I}}),
                  [](KernelBuilder &k) {
                    buildSkewGrad(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3));
                  }});
  // Kernel groups (skewGroupLaunch): member blockIdx.y, its (result,
  // operand) pointers table[2 m], table[2 m + 1]; the grid-stride loop
  // along x as pe_skew's and pe_skew_grad's.
  defs.push_back({makeSpec("pe_skews", pe::SkewOp::getOperationName(),
                           {{"table", P}, {"n", I}, {"dim", I}}, GridRule::Explicit),
                  [](KernelBuilder &k) {
                    buildSkew(k, memberPointer(k, k.arg(0), 2, 0), memberPointer(k, k.arg(0), 2, 1),
                              k.arg(1), k.arg(2));
                  }});
  defs.push_back({makeSpec("pe_skew_grads", pe::SkewGradOp::getOperationName(),
                           {{"table", P}, {"n", I}, {"dim", I}}, GridRule::Explicit),
                  [](KernelBuilder &k) {
                    buildSkewGrad(k, memberPointer(k, k.arg(0), 2, 0),
                                  memberPointer(k, k.arg(0), 2, 1), k.arg(1), k.arg(2));
                  }});
}

/// s[e] = sign(entry[e]) params[|entry[e]| - 1], 0 where entry[e] = 0.
void buildSparseSkew(KernelBuilder &k, Value s, Value params, Value entryTable, Value n,
                     Value paramsCount) {
  k.forGridStride(n, [&](Value e) {
    Value entry = loadI32AsI64(k, entryTable, e);
    Value negative = cmpI(k, Pred::slt, entry, k.i64(0));
    Value m = k.sub(select(k, negative, k.sub(k.i64(0), entry), entry), k.i64(1));
    Value valid = inRange(k, m, paramsCount);
    Value p = k.load(params, select(k, valid, m, k.i64(0)));
    Value value = select(k, negative, k.sub(k.f32(0.0), p), p);
    Value zero = cmpI(k, Pred::eq, entry, k.i64(0));
    k.store(select(k, zero, k.f32(0.0), select(k, valid, value, nanF32(k))), s, e);
  });
}

/// dparams[m] = dy[pairs[2m]] - dy[pairs[2m + 1]].
void buildSparseSkewGrad(KernelBuilder &k, Value dparams, Value dy, Value pairs, Value n,
                         Value dyCount) {
  k.forGridStride(n, [&](Value m) {
    Value upper = loadI32AsI64(k, pairs, k.mul(m, k.i64(2)));
    Value lower = loadI32AsI64(k, pairs, k.add(k.mul(m, k.i64(2)), k.i64(1)));
    Value valid = andI(k, inRange(k, upper, dyCount), inRange(k, lower, dyCount));
    Value a = k.load(dy, select(k, valid, upper, k.i64(0)));
    Value b = k.load(dy, select(k, valid, lower, k.i64(0)));
    k.store(select(k, valid, k.sub(a, b), nanF32(k)), dparams, m);
  });
}

void appendSparseSkewKernels(std::vector<KernelDef> &defs) {
  defs.push_back(
      {makeSpec("pe_sparse_skew", pe::SparseSkewOp::getOperationName(),
                {{"s", P}, {"params", P}, {"entry", P}, {"n", I}, {"params_count", I}}),
       [](KernelBuilder &k) {
         buildSparseSkew(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3), k.arg(4));
       }});
  defs.push_back(
      {makeSpec("pe_sparse_skew_grad", pe::SparseSkewGradOp::getOperationName(),
                {{"dparams", P}, {"dy", P}, {"pairs", P}, {"n", I}, {"dy_count", I}}),
       [](KernelBuilder &k) {
         buildSparseSkewGrad(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3), k.arg(4));
       }});
  // Kernel groups of ops of one support (skewGroupLaunch): member
  // blockIdx.y, its (result, operand) pointers from the table, the support
  // constant shared.
  defs.push_back(
      {makeSpec("pe_sparse_skews", pe::SparseSkewOp::getOperationName(),
                {{"table", P}, {"entry", P}, {"n", I}, {"params_count", I}}, GridRule::Explicit),
       [](KernelBuilder &k) {
         buildSparseSkew(k, memberPointer(k, k.arg(0), 2, 0), memberPointer(k, k.arg(0), 2, 1),
                         k.arg(1), k.arg(2), k.arg(3));
       }});
  defs.push_back(
      {makeSpec("pe_sparse_skew_grads", pe::SparseSkewGradOp::getOperationName(),
                {{"table", P}, {"pairs", P}, {"n", I}, {"dy_count", I}}, GridRule::Explicit),
       [](KernelBuilder &k) {
         buildSparseSkewGrad(k, memberPointer(k, k.arg(0), 2, 0),
                             memberPointer(k, k.arg(0), 2, 1), k.arg(1), k.arg(2), k.arg(3));
       }});
}

/// The factor kernel's body (see the header) on one matrix: s [d, d] in,
/// M to `inverse` (unless null) and W to `weight`; `work` is the global
/// scratch used when d > kSharedDim (and for the lines when d > kLineDim).
void buildFactors(KernelBuilder &k, Value inverse, Value weight, Value work, Value s, Value d) {
    Value dd = k.mul(d, d);
    Value inShared = cmpI(k, Pred::sle, d, k.i64(kSharedDim));
    Value w = select(k, inShared, sharedArray(k, "pe_cayley_work", kSharedDim * kSharedDim), work);
    // lines[b 2d + j] = row, lines[b 2d + d + i] = column of buffer b.
    Value lines = select(k, cmpI(k, Pred::sle, d, k.i64(kLineDim)),
                         sharedArray(k, "pe_cayley_lines", 4 * kLineDim),
                         elementAddress(k, k.builder().getF32Type(), work, dd));
    Value one = k.f32(1.0), zero = k.f32(0.0);

    // Thread t owns the elements (i, j) with j = t mod cols (+ cols ...) and
    // i = t / cols (+ rowStep ...): fixed for the whole kernel, no index
    // division in the loops; the threads past rowStep * cols own none.
    Value tid = k.threadId(gpu::Dimension::x);
    Value cols = minI(k, d, k.i64(kFactorThreads));
    Value rowStep = divU(k, k.i64(kFactorThreads), cols);
    Value i0 = divU(k, tid, cols), j0 = remU(k, tid, cols);
    Value iStart = select(k, cmpI(k, Pred::slt, i0, rowStep), i0, d);
    auto forOwned = [&](const std::function<void(Value i, Value j, Value e)> &body) {
      k.forLoop(j0, d, cols, {}, [&](Value j, ValueRange) {
        k.forLoop(k.add(k.mul(iStart, d), j), dd, k.mul(rowStep, d), {iStart},
                  [&](Value e, ValueRange i) {
                    body(i[0], j, e);
                    return SmallVector<Value>{k.add(i[0], rowStep)};
                  });
        return SmallVector<Value>{};
      });
    };

    // A = I + S; buffer 0 gets row 0 and column 0.
    forOwned([&](Value i, Value j, Value e) {
      Value v = k.add(select(k, cmpI(k, Pred::eq, i, j), one, zero), k.load(s, e));
      k.store(v, w, e);
      k.ifThen(cmpI(k, Pred::eq, i, k.i64(0)), [&] { k.store(v, lines, j); });
      k.ifThen(cmpI(k, Pred::eq, j, k.i64(0)), [&] { k.store(v, lines, k.add(d, i)); });
    });
    barrier(k);

    // Pivot step c (no pivoting; see the header): every new element depends
    // on old values only, its own and those of row c and column c, which
    // the line buffer `cur` holds; the owners of row and column c + 1 copy
    // their new values to the other buffer. One barrier a step.
    k.forLoop(k.i64(0), d, k.i64(1), {}, [&](Value c, ValueRange) {
      Value cur = k.mul(andI(k, c, k.i64(1)), k.mul(d, k.i64(2)));
      Value next = k.sub(k.mul(d, k.i64(2)), cur);
      Value r = k.div(one, k.load(lines, k.add(cur, c)));
      Value c1 = k.add(c, k.i64(1));
      forOwned([&](Value i, Value j, Value e) {
        Value aik = k.load(lines, k.add(k.add(cur, d), i));
        Value akjr = k.mul(k.load(lines, k.add(cur, j)), r);
        Value rowC = cmpI(k, Pred::eq, i, c), colC = cmpI(k, Pred::eq, j, c);
        Value general = k.sub(k.load(w, e), k.mul(aik, akjr));
        Value column = k.sub(zero, k.mul(aik, r));
        Value v = select(k, rowC, select(k, colC, r, akjr), select(k, colC, column, general));
        k.store(v, w, e);
        k.ifThen(cmpI(k, Pred::eq, i, c1), [&] { k.store(v, lines, k.add(next, j)); });
        k.ifThen(cmpI(k, Pred::eq, j, c1), [&] { k.store(v, lines, k.add(k.add(next, d), i)); });
      });
      barrier(k);
      return SmallVector<Value>{};
    });

    // inverse = w; weight = 2 inverse^T - I
    forOwned([&](Value i, Value j, Value e) {
      if (inverse)
        k.store(k.load(w, e), inverse, e);
      Value mt = k.load(w, k.add(k.mul(j, d), i));
      Value identity = select(k, cmpI(k, Pred::eq, i, j), one, zero);
      k.store(k.sub(k.mul(k.f32(2.0), mt), identity), weight, e);
    });
}

/// The device pointer `table[index]` (a group's pointer table).
Value loadPointer(KernelBuilder &k, Value table, Value index) {
  auto ptrType = LLVM::LLVMPointerType::get(k.builder().getContext());
  return k.builder().create<LLVM::LoadOp>(k.location(), ptrType,
                                          elementAddress(k, ptrType, table, index));
}

Value memberPointer(KernelBuilder &k, Value table, int64_t perMember, int64_t a) {
  Value member = k.blockId(gpu::Dimension::y);
  return loadPointer(k, table, k.add(k.mul(member, k.i64(perMember)), k.i64(a)));
}

/// inverse[i, j] = (weight[j, i] + (i == j)) / 2 for the n = dim^2
/// elements: M from W = 2 M^T - I, exact but for the last bit of W's
/// diagonal (2 m - 1 rounds once).
void buildInverseOfWeight(KernelBuilder &k, Value inverse, Value weight, Value n, Value d) {
  k.forGridStride(n, [&](Value e) {
    Value i = divU(k, e, d), j = remU(k, e, d);
    Value identity = select(k, cmpI(k, Pred::eq, i, j), k.f32(1.0), k.f32(0.0));
    Value wji = k.load(weight, k.add(k.mul(j, d), i));
    k.store(k.mul(k.add(wji, identity), k.f32(0.5)), inverse, e);
  });
}

/// gpu.known_block_size becomes `.maxntid 1024, 1, 1`: ptxas (or the
/// driver's JIT for another chip) must fit a block of 1024 threads in the
/// register file (at most 64 registers a thread).
void setFactorBlockSize(KernelBuilder &k) {
  auto func = cast<gpu::GPUFuncOp>(k.builder().getInsertionBlock()->getParentOp());
  func.setKnownBlockSizeAttr(k.builder().getDenseI32ArrayAttr({int32_t(kFactorThreads), 1, 1}));
}

void appendCayleyTransformKernels(std::vector<KernelDef> &defs) {
  GpuKernelSpec spec = makeSpec("pe_cayley_factors", pe::CayleyWeightOp::getOperationName(),
                             {{"inverse", P}, {"weight", P}, {"work", P}, {"s", P}, {"dim", I}},
                             GridRule::Explicit, kFactorThreads);
  defs.push_back({spec, [](KernelBuilder &k) {
    setFactorBlockSize(k);
    buildFactors(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3), k.arg(4));
  }});
  // A group of cayley_weight ops (cayleyGroupLaunch): block b
  // computes member b, whose s and W are table[2 b] and table[2 b + 1];
  // its matrix in shared memory (d <= kSharedDim: no scratch, M not kept).
  // A larger d (never grouped by the compiler) gives NaN weights.
  GpuKernelSpec group = makeSpec("pe_cayley_weights", pe::CayleyWeightOp::getOperationName(),
                                 {{"table", P}, {"dim", I}}, GridRule::Explicit, kFactorThreads);
  defs.push_back({group, [](KernelBuilder &k) {
    setFactorBlockSize(k);
    Value d = k.arg(1), member = k.blockId(gpu::Dimension::x);
    Value s = loadPointer(k, k.arg(0), k.mul(member, k.i64(2)));
    Value weight = loadPointer(k, k.arg(0), k.add(k.mul(member, k.i64(2)), k.i64(1)));
    Value fits = cmpI(k, Pred::sle, d, k.i64(kSharedDim));
    k.ifThen(fits, [&] { buildFactors(k, Value(), weight, s, s, d); });
    k.ifThen(cmpI(k, Pred::sgt, d, k.i64(kSharedDim)), [&] {
      k.forLoop(k.threadId(gpu::Dimension::x), k.mul(d, d), k.i64(kFactorThreads), {},
                [&](Value e, ValueRange) {
                  k.store(nanF32(k), weight, e);
                  return SmallVector<Value>{};
                });
    });
  }});

  defs.push_back({makeSpec("pe_cayley_inverse_of_weight",
                           pe::CayleyWeightGradOp::getOperationName(),
                           {{"inverse", P}, {"weight", P}, {"n", I}, {"dim", I}}),
                  [](KernelBuilder &k) {
                    buildInverseOfWeight(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3));
                  }});
  // A group of the layers' gradients' first launches (cayleyGroupLaunch):
  // member blockIdx.y, its (inverse, weight) pointers from the table, the
  // grid-stride loop along x as pe_cayley_inverse_of_weight's.
  defs.push_back({makeSpec("pe_cayley_inverses_of_weight",
                           pe::CayleyWeightGradOp::getOperationName(),
                           {{"table", P}, {"n", I}, {"dim", I}}, GridRule::Explicit),
                  [](KernelBuilder &k) {
                    buildInverseOfWeight(k, memberPointer(k, k.arg(0), 2, 0),
                                         memberPointer(k, k.arg(0), 2, 1), k.arg(1), k.arg(2));
                  }});
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//



/// The (i, j) pair of upper-triangle index `k` of a dim x dim matrix, in the
/// order of pe.skew: (0, 1), (0, 2), ..., (1, 2), ...; nullopt out of range.
std::optional<std::pair<int64_t, int64_t>> upperPair(int64_t dim, int64_t k) {
  if (k < 0)
    return std::nullopt;
  for (int64_t i = 0; i + 1 < dim; ++i) {
    int64_t length = dim - 1 - i;
    if (k < length)
      return std::make_pair(i, i + 1 + k);
    k -= length;
  }
  return std::nullopt;
}

/// Checks sparse_skew's shapes and support (params [K], s [dim, dim]) and
/// returns the pairs of the support; nullopt when the op is not served.
std::optional<std::vector<std::pair<int64_t, int64_t>>>
supportPairs(int64_t dim, ArrayRef<int64_t> support, Value params, Value matrix) {
  auto p = staticShape(params), s = staticShape(matrix);
  if (dim < 2 || dim * dim > kMaxI32 || support.empty() || int64_t(support.size()) >= kMaxI32 ||
      !p || *p != std::vector<int64_t>{int64_t(support.size())} || !s ||
      *s != std::vector<int64_t>{dim, dim})
    return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t k : support) {
    auto pair = upperPair(dim, k);
    if (!pair)
      return std::nullopt;
    pairs.push_back(*pair);
  }
  return pairs;
}

std::optional<OpSteps> lowerSparseSkew(Operation &op) {
  auto skew = cast<pe::SparseSkewOp>(op);
  int64_t dim = int64_t(skew.getDim());
  auto pairs = supportPairs(dim, skew.getSupport(), skew.getParams(), skew.getResult());
  if (!pairs)
    return std::nullopt;
  std::vector<int32_t> entry(size_t(dim * dim), 0);
  for (size_t m = 0; m < pairs->size(); ++m) {
    auto [i, j] = (*pairs)[m];
    entry[size_t(i * dim + j)] = int32_t(m + 1);
    entry[size_t(j * dim + i)] = -int32_t(m + 1);
  }
  OpSteps steps;
  steps.constants.push_back(ConstantArray::ints(std::move(entry)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_sparse_skew", {A::result(0), A::operand(0), A::constant(0), A::i64(dim * dim),
                         A::i64(int64_t(pairs->size()))}));
  return steps;
}

std::optional<OpSteps> lowerSparseSkewGrad(Operation &op) {
  auto grad = cast<pe::SparseSkewGradOp>(op);
  int64_t dim = int64_t(grad.getDim());
  auto pairs = supportPairs(dim, grad.getSupport(), grad.getDparams(), grad.getDy());
  if (!pairs)
    return std::nullopt;
  std::vector<int32_t> flat;
  for (auto [i, j] : *pairs) {
    flat.push_back(int32_t(i * dim + j));
    flat.push_back(int32_t(j * dim + i));
  }
  OpSteps steps;
  steps.constants.push_back(ConstantArray::ints(std::move(flat)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_sparse_skew_grad", {A::result(0), A::operand(0), A::constant(0),
                              A::i64(int64_t(pairs->size())), A::i64(dim * dim)}));
  return steps;
}

std::optional<OpSteps> lowerSkew(Operation &op) {
  int64_t dim = int64_t(cast<pe::SkewOp>(op).getDim());
  if (dim < 2)
    return std::nullopt;
  return singleLaunch("pe_skew",
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))), A::i64(dim)});
}

std::optional<OpSteps> lowerSkewGrad(Operation &op) {
  int64_t dim = int64_t(cast<pe::SkewGradOp>(op).getDim());
  if (dim < 2)
    return std::nullopt;
  return singleLaunch("pe_skew_grad",
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))), A::i64(dim)});
}

/// The static d of s [d, d].
std::optional<int64_t> squareDim(Value s) {
  auto shape = batchShape(s.getType());
  if (!shape || shape->size() != 2 || (*shape)[0] <= 0 || (*shape)[0] != (*shape)[1])
    return std::nullopt;
  return (*shape)[0];
}

/// Scratch 0 = M, 1 = W, 2 = the work matrix; launches the factor kernel of
/// operand `s`. `weight` overrides where W goes (a result).
void appendFactors(OpSteps &steps, int64_t d, unsigned s, std::optional<LaunchArg> weight) {
  steps.scratchBytes.push_back(BatchAffine::fixed(d * d * 4));
  steps.scratchBytes.push_back(BatchAffine::fixed(weight ? 4 : d * d * 4));
  steps.scratchBytes.push_back(BatchAffine::fixed((d * d + 4 * d) * 4));
  Launch launch = Launch::kernelCall(
      "pe_cayley_factors",
      {A::scratch(0), weight ? *weight : A::scratch(1), A::scratch(2), A::operand(s), A::i64(d)});
  launch.grid = ExplicitGrid{};
  steps.launches.push_back(std::move(launch));
}

GemmCall gemm(LaunchArg a, bool transA, LaunchArg b, bool transB, LaunchArg c, BatchAffine m,
              BatchAffine n, BatchAffine k, float alpha) {
  GemmCall g;
  g.a = a;
  g.b = b;
  g.c = c;
  g.transA = transA;
  g.transB = transB;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  return g;
}

std::optional<OpSteps> lowerCayleyWeight(Operation &op) {
  auto d = squareDim(op.getOperand(0));
  if (!d)
    return std::nullopt;
  OpSteps steps;
  appendFactors(steps, *d, 0, A::result(0));
  return steps;
}

} // namespace

namespace {

/// The group launch of `kernel` over `members` elementwise launches like
/// `own` (its output `output`, then `input`, then `shared` arguments, then
/// n and a second integer; n fixed): `kernel`(table, shared..., n, second)
/// on pe_skew's grid along x, a member along y, the table's rows (output,
/// input).
std::optional<Launch> elementwiseGroupLaunch(const Launch &own, LaunchArg output, LaunchArg input,
                                             const char *kernel, size_t shared, int64_t members) {
  auto is = [](const LaunchArg &a, const LaunchArg &b) {
    return a.kind == b.kind && a.index == b.index;
  };
  if (own.args.size() != 4 + shared || !is(own.args[0], output) || !is(own.args[1], input) ||
      own.args[2 + shared].kind != LaunchArgKind::I64 ||
      own.args[2 + shared].integer.perBatch != 0)
    return std::nullopt;
  std::vector<LaunchArg> args = {A::groupTable()};
  args.insert(args.end(), own.args.begin() + 2, own.args.end());
  Launch launch = Launch::kernelCall(kernel, std::move(args));
  ExplicitGrid grid;
  grid.x = BatchAffine::fixed(stringrt::cudaRuleGridX(
      GridRule::Elements, kElementBlock, 1, own.args[2 + shared].integer.constant, 0));
  grid.y = BatchAffine::fixed(members);
  launch.grid = grid;
  launch.groupSize = members;
  launch.groupArgs = {output, input};
  return launch;
}

} // namespace

std::optional<Launch> cayleyGroupLaunch(Operation &leader, const Launch &own, int64_t members) {
  if (members < 2 || own.gemm || own.groupSize != 1)
    return std::nullopt;
  const LaunchArg result = A::result(0), operand = A::operand(0);
  if (isa<pe::SkewOp>(leader) && own.kernel == "pe_skew")
    return elementwiseGroupLaunch(own, result, operand, "pe_skews", 0, members);
  if (isa<pe::SkewGradOp>(leader) && own.kernel == "pe_skew_grad")
    return elementwiseGroupLaunch(own, result, operand, "pe_skew_grads", 0, members);
  if (isa<pe::SparseSkewOp>(leader) && own.kernel == "pe_sparse_skew")
    return elementwiseGroupLaunch(own, result, operand, "pe_sparse_skews", 1, members);
  if (isa<pe::SparseSkewGradOp>(leader) && own.kernel == "pe_sparse_skew_grad")
    return elementwiseGroupLaunch(own, result, operand, "pe_sparse_skew_grads", 1, members);
  // The first of a Cayley weight gradient's three launches: M into scratch
  // 0, which the op's GEMMs then read (KernelGroups.h: a group of first
  // launches).
  if (isa<pe::CayleyWeightGradOp>(leader) && own.kernel == "pe_cayley_inverse_of_weight")
    return elementwiseGroupLaunch(own, A::scratch(0), A::operand(2),
                                  "pe_cayley_inverses_of_weight", 0, members);
  if (!isa<pe::CayleyWeightOp>(leader) || own.kernel != "pe_cayley_factors")
    return std::nullopt;
  auto d = squareDim(leader.getOperand(0));
  if (!d || *d > kSharedDim)
    return std::nullopt;
  Launch launch = Launch::kernelCall("pe_cayley_weights", {A::groupTable(), A::i64(*d)});
  ExplicitGrid grid;
  grid.x = BatchAffine::fixed(members);
  launch.grid = grid;
  launch.groupSize = members;
  launch.groupArgs = {A::operand(0), A::result(0)};
  return launch;
}

namespace {

std::optional<OpSteps> lowerCayleyWeightGrad(Operation &op) {
  auto d = squareDim(op.getOperand(0));
  if (!d)
    return std::nullopt;
  BatchAffine n = BatchAffine::fixed(*d);
  OpSteps steps;
  if (cast<pe::CayleyWeightGradOp>(op).getWeight()) {
    // Scratch 0 = M read off the forward's W; 1 and 2 unused (the GEMMs
    // below take scratch 0 and 3, as after the factor kernel).
    steps.scratchBytes.push_back(BatchAffine::fixed(*d * *d * 4));
    steps.scratchBytes.push_back(BatchAffine::fixed(4));
    steps.scratchBytes.push_back(BatchAffine::fixed(4));
    steps.launches.push_back(Launch::kernelCall(
        "pe_cayley_inverse_of_weight",
        {A::scratch(0), A::operand(2), A::i64(*d * *d), A::i64(*d)}));
  } else {
    appendFactors(steps, *d, 0, std::nullopt);
  }
  steps.scratchBytes.push_back(BatchAffine::fixed(*d * *d * 4)); // 3: T = dw^T M^T
  steps.launches.push_back(Launch::gemmCall(
      gemm(A::operand(1), true, A::scratch(0), true, A::scratch(3), n, n, n, 1.0f)));
  steps.launches.push_back(Launch::gemmCall(
      gemm(A::scratch(0), true, A::scratch(3), false, A::result(0), n, n, n, -2.0f)));
  return steps;
}

std::optional<OpSteps> lowerCayley(Operation &op) {
  auto d = squareDim(op.getOperand(1));
  if (!d || lastDimension(op.getOperand(0).getType()) != *d)
    return std::nullopt;
  BatchAffine rows = rowsOf(numel(op.getOperand(0)), *d), n = BatchAffine::fixed(*d);
  OpSteps steps;
  appendFactors(steps, *d, 1, std::nullopt);
  steps.launches.push_back(Launch::gemmCall(
      gemm(A::operand(0), false, A::scratch(1), false, A::result(0), rows, n, n, 1.0f)));
  return steps;
}

std::optional<OpSteps> lowerCayleyGrad(Operation &op) {
  auto d = squareDim(op.getOperand(1));
  if (!d || lastDimension(op.getOperand(0).getType()) != *d)
    return std::nullopt;
  BatchAffine elements = numel(op.getOperand(0));
  BatchAffine rows = rowsOf(elements, *d), n = BatchAffine::fixed(*d);
  OpSteps steps;
  appendFactors(steps, *d, 1, std::nullopt);
  steps.scratchBytes.push_back(elements * 4); // 3: Z = x M^T
  steps.scratchBytes.push_back(elements * 4); // 4: G = dy + dx
  // dx = dy W^T (U^T per token)
  steps.launches.push_back(Launch::gemmCall(
      gemm(A::operand(2), false, A::scratch(1), true, A::result(0), rows, n, n, 1.0f)));
  steps.launches.push_back(Launch::gemmCall(
      gemm(A::operand(0), false, A::scratch(0), true, A::scratch(3), rows, n, n, 1.0f)));
  steps.launches.push_back(Launch::kernelCall(
      "pe_add", {A::scratch(4), A::operand(2), A::result(0), A::i64(elementwiseThreads(elements)),
                 A::i64(elements)}));
  // ds = -G^T Z
  steps.launches.push_back(Launch::gemmCall(
      gemm(A::scratch(4), true, A::scratch(3), false, A::result(1), n, n, rows, -1.0f)));
  return steps;
}

} // namespace

void appendCayleyKernels(std::vector<KernelDef> &defs) {
  appendSkewKernels(defs);
  appendSparseSkewKernels(defs);
  appendCayleyTransformKernels(defs);
}

void appendCayleyLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SkewOp>(lowerSkew));
  lowerings.push_back(loweringOf<pe::SkewGradOp>(lowerSkewGrad));
  lowerings.push_back(loweringOf<pe::SparseSkewOp>(lowerSparseSkew));
  lowerings.push_back(loweringOf<pe::SparseSkewGradOp>(lowerSparseSkewGrad));
  lowerings.push_back(loweringOf<pe::CayleyWeightOp>(lowerCayleyWeight));
  lowerings.push_back(loweringOf<pe::CayleyWeightGradOp>(lowerCayleyWeightGrad));
  lowerings.push_back(loweringOf<pe::CayleyOp>(lowerCayley));
  lowerings.push_back(loweringOf<pe::CayleyGradOp>(lowerCayleyGrad));
}

} // namespace stringc::cudagen
