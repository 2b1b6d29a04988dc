//===- NormKernels.cpp - layer_norm forward and backward kernels ----------===//
//
// Row kernels run one warp per row (blockDim = (32, 4): four rows per
// block); the 32 lanes stride over the row's D columns and combine their
// partial sums with an xor-shuffle butterfly. The row test depends only on
// threadIdx.y, so a warp is either wholly in or wholly out and the shuffles
// always see 32 active lanes. Statistics are two-pass (mean, then the mean
// squared deviation) like the reference kernel; rstd = 1 / sqrt(var + eps)
// with IEEE sqrt and division (KernelBuilder::sqrtRn: sqrt.rn.f32).
//
// layer_norm_grad is two launches for D <= kFusedGradMaxDim: one kernel
// over chunks of rows (a block per chunk, a warp per row) writes dx and, for
// its chunk, the partial sums of dgamma = sum dy * xhat and dbeta = sum dy
// (each warp adds its rows into its own shared columns, then the block adds
// its four warps' columns in warp order), then pe_colsum_finish_pair adds
// the chunks' partials in chunk order: one pass over x and dy, without
// atomics, so results do not depend on timing (the fused kernel's blocks
// each cover every column, so none of them could finish a column alone:
// OpKernelUtil.h's one-launch column sum does not apply). For a wider D (the
// warps' shared columns would pass 32 KiB) it is also two: the row kernel
// writes dx and each row's (mean, rstd) to a scratch buffer of 2 * rows
// floats, then the two sums as one deterministic column sum over 2 D
// columns in one launch (OpKernelUtil.h: partials over chunks of rows on at
// least kReductionBlocks blocks, each column group finished by its last
// block).
//
// pe_layer_norm and the fused layer_norm_grad kernels read their rows with
// 16-byte loads when D % 8 == 0 and their pointers are 16-byte aligned
// (checked in the kernel): rows staged in shared memory, summed in the
// scalar kernel's order (the same bits); else the scalar rows.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <tuple>

using namespace mlir;

namespace stringc::cudagen {
namespace {

struct RowContext {
  Value lane, row, base, d, dF;
};

/// Runs `body` for the row of this warp, if it exists. `rows` and `d` are i64.
void forWarpRow(KernelBuilder &k, Value rows, Value d,
                const std::function<void(const RowContext &)> &body) {
  OpBuilder &b = k.builder();
  Value lane = k.threadId(gpu::Dimension::x);
  Value row = k.add(k.mul(k.blockId(gpu::Dimension::x), k.blockDim(gpu::Dimension::y)),
                    k.threadId(gpu::Dimension::y));
  Value inRange = b.create<arith::CmpIOp>(k.location(), arith::CmpIPredicate::slt, row, rows);
  k.ifThen(inRange, [&] { body({lane, row, k.mul(row, d), d, k.toF32(d)}); });
}

/// The warp's total of f(c) over the columns c of the row.
Value rowSum(KernelBuilder &k, const RowContext &r, const std::function<Value(Value)> &f) {
  ValueRange partial = k.forLoop(r.lane, r.d, k.i64(kWarp), {k.f32(0.0)},
                                 [&](Value c, ValueRange acc) {
                                   return SmallVector<Value>{k.add(acc[0], f(c))};
                                 });
  return k.warpSum(partial[0]);
}

/// mean and rstd of the row of `x`.
std::pair<Value, Value> rowStatistics(KernelBuilder &k, const RowContext &r, Value x, Value eps) {
  Value mean = k.div(rowSum(k, r, [&](Value c) { return k.load(x, k.add(r.base, c)); }), r.dF);
  Value sq = rowSum(k, r, [&](Value c) {
    Value dev = k.sub(k.load(x, k.add(r.base, c)), mean);
    return k.mul(dev, dev);
  });
  Value var = k.div(sq, r.dF);
  Value rstd = k.div(k.f32(1.0), k.sqrtRn(k.add(var, eps)));
  return {mean, rstd};
}

void forRowColumns(KernelBuilder &k, const RowContext &r, const std::function<void(Value)> &body) {
  k.forLoop(r.lane, r.d, k.i64(kWarp), {}, [&](Value c, ValueRange) {
    body(c);
    return SmallVector<Value>{};
  });
}

/// The statistics of a row of layer_norm_grad: mean and rstd of x, the
/// means of g = dy gamma and of g xhat (xhat = (x - mean) rstd), each a
/// rowSum (lane l: columns l, l + 32, ... in order, then the butterfly).
/// x and dy at r.base + c, gamma at c: the tensors themselves, or the rows
/// staged in shared memory (layerNormGradFused).
struct GradRowStatistics {
  Value mean, rstd, meanG, meanGX;
};
GradRowStatistics gradRowStatistics(KernelBuilder &k, const RowContext &r, Value x, Value gamma,
                                    Value dy, Value eps) {
  GradRowStatistics s;
  std::tie(s.mean, s.rstd) = rowStatistics(k, r, x, eps);
  auto g = [&](Value c) { return k.mul(k.load(dy, k.add(r.base, c)), k.load(gamma, c)); };
  auto xhat = [&](Value c) { return k.mul(k.sub(k.load(x, k.add(r.base, c)), s.mean), s.rstd); };
  s.meanG = k.div(rowSum(k, r, g), r.dF);
  s.meanGX = k.div(rowSum(k, r, [&](Value c) { return k.mul(g(c), xhat(c)); }), r.dF);
  return s;
}

/// layer_norm_grad's row: dx = rstd (g - mean(g) - xhat mean(g xhat)) with
/// g = dy gamma, plus `prior` when it is set; returns (mean, rstd).
/// `column`, when set, also gets each column c with its dy and xhat.
std::pair<Value, Value>
layerNormGradRow(KernelBuilder &k, const RowContext &r, Value dx, Value prior, Value x, Value gamma,
                 Value dy, Value eps,
                 const std::function<void(Value c, Value dy, Value xhat)> &column = nullptr) {
  GradRowStatistics s = gradRowStatistics(k, r, x, gamma, dy, eps);
  auto g = [&](Value c) { return k.mul(k.load(dy, k.add(r.base, c)), k.load(gamma, c)); };
  forRowColumns(k, r, [&](Value c) {
    Value at = k.add(r.base, c);
    Value xh = k.mul(k.sub(k.load(x, at), s.mean), s.rstd);
    Value v = k.mul(s.rstd, k.sub(k.sub(g(c), s.meanG), k.mul(xh, s.meanGX)));
    if (prior)
      v = k.add(k.load(prior, at), v);
    k.store(v, dx, at);
    if (column)
      column(c, k.load(dy, at), xh);
  });
  return {s.mean, s.rstd};
}

void layerNormGradRows(KernelBuilder &k, Value dx, Value stats, Value prior, Value x, Value gamma,
                       Value dy, Value rows, Value d, Value eps) {
  forWarpRow(k, rows, d, [&](const RowContext &r) {
    Value mean, rstd;
    std::tie(mean, rstd) = layerNormGradRow(k, r, dx, prior, x, gamma, dy, eps);
    OpBuilder &b = k.builder();
    Value lane0 = b.create<arith::CmpIOp>(k.location(), arith::CmpIPredicate::eq, r.lane, k.i64(0));
    k.ifThen(lane0, [&] {
      Value at = k.mul(r.row, k.i64(2));
      k.store(mean, stats, at);
      k.store(rstd, stats, k.add(at, k.i64(1)));
    });
  });
}

/// The widest D of the fused layer_norm_grad kernel: its four warps' shared
/// columns (2 D floats each) take at most 32 KiB.
constexpr int64_t kFusedGradMaxDim = 1024;

/// The fused kernel's shared memory (dynamic: more than the 48 KiB of
/// static shared memory): the warps' columns of dgamma and dbeta (32 KiB),
/// the rows of x and dy the warps stage (32 KiB) and gamma (4 KiB).
constexpr int64_t kFusedGradSharedBytes =
    (kRowsPerBlock * 2 * kFusedGradMaxDim + kRowsPerBlock * 2 * kFusedGradMaxDim +
     kFusedGradMaxDim) *
    4;

/// The vector columns of a staged row of layerNormGradFused: lane l takes
/// the 8 columns from 8 l, then from 8 l + 256, ...: x, dy (staged at
/// s.base + c), gamma (staged at c) and prior with 16-byte loads, dx with
/// 16-byte stores, and dy xhat and dy added into the warp's columns
/// sums[mine + c] and sums[mine + d + c] (8 at a time: each column has one
/// owner lane in every row, so a column's additions keep the row order).
void gradVectorColumns(KernelBuilder &k, const RowContext &s, const GradRowStatistics &st,
                       Value xs, Value dys, Value gs, Value dx, Value prior, Value sums,
                       Value mine) {
  const int64_t width = kElementwiseVector;
  Value rowAt = k.mul(s.row, s.d); // dx's and prior's row (s.base is the staged row's)
  k.forLoop(k.mul(s.lane, k.i64(width)), s.d, k.i64(kWarp * width), {}, [&](Value c, ValueRange) {
    Value at = k.add(rowAt, c);
    SmallVector<Value> xv = k.loadVector(xs, k.add(s.base, c), width);
    SmallVector<Value> dyv = k.loadVector(dys, k.add(s.base, c), width);
    SmallVector<Value> gv = k.loadVector(gs, c, width);
    SmallVector<Value> pv;
    if (prior)
      pv = k.loadVector(prior, at, width);
    Value gammaAt = k.add(mine, c), betaAt = k.add(gammaAt, s.d);
    SmallVector<Value> sg = k.loadVector(sums, gammaAt, width);
    SmallVector<Value> sb = k.loadVector(sums, betaAt, width);
    SmallVector<Value> dxv;
    for (size_t j = 0; j < size_t(width); ++j) {
      // layerNormGradRow's arithmetic, element by element
      Value xh = k.mul(k.sub(xv[j], st.mean), st.rstd);
      Value g = k.mul(dyv[j], gv[j]);
      Value v = k.mul(st.rstd, k.sub(k.sub(g, st.meanG), k.mul(xh, st.meanGX)));
      dxv.push_back(prior ? k.add(pv[j], v) : v);
      sg[j] = k.add(sg[j], k.mul(dyv[j], xh));
      sb[j] = k.add(sb[j], dyv[j]);
    }
    k.storeVector(dxv, dx, at);
    k.storeVector(sg, sums, gammaAt);
    k.storeVector(sb, sums, betaAt);
    return SmallVector<Value>{};
  });
}

/// layer_norm_grad in one pass over the rows of chunk g = blockIdx.x (of
/// `chunks` chunks of ceil(rows / chunks) consecutive rows): warp w takes the
/// chunk's rows w, w + 4, ... in turn, writes their dx (layerNormGradRow)
/// and adds dy xhat and dy into its shared columns c and d + c (lane l owns
/// the columns l, l + 32, ...: no two threads touch one); then the block
/// writes partials[g * 2 d + c] = the four warps' columns added in warp
/// order. The same partition and order every run: deterministic bits.
///
/// When D % 8 == 0 and dx, x, gamma, dy (and prior) are 16-byte aligned
/// (checked in the kernel), every load is 16 bytes: the block stages gamma
/// in shared memory, and the four warps take their rows w, w + 4, ... in
/// step, each round staging its row of x and dy (16-byte loads, lane l the
/// 8 elements from 8 l, then from 8 l + 256, ...), a block barrier, the
/// statistics summed from the staged row exactly as the scalar path sums x
/// and dy (lane l: columns l, l + 32, ... in order, then the butterfly: the
/// same f32 bits), the columns 8 a lane (gradVectorColumns), a barrier
/// before the next round overwrites the staged rows. dgamma's and dbeta's
/// columns get the same additions in the same row order, so the partials
/// have the scalar path's bits too. Else the scalar rows, as before.
void layerNormGradFused(KernelBuilder &k, Value dx, Value partials, Value prior, Value x,
                        Value gamma, Value dy, Value rows, Value d, Value chunks, Value eps) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  Value warp = k.threadId(gpu::Dimension::y), lane = k.threadId(gpu::Dimension::x);
  Value sums = sharedArray(k, "pe_layer_norm_grad_sums", kRowsPerBlock * 2 * kFusedGradMaxDim);
  Value xs = sharedArray(k, "pe_layer_norm_grad_x", kRowsPerBlock * kFusedGradMaxDim);
  Value dys = sharedArray(k, "pe_layer_norm_grad_dy", kRowsPerBlock * kFusedGradMaxDim);
  Value gs = sharedArray(k, "pe_layer_norm_grad_gamma", kFusedGradMaxDim);
  Value mine = k.mul(warp, k.i64(2 * kFusedGradMaxDim)); // this warp's 2 d columns
  Value cols = k.mul(d, k.i64(2));
  const int64_t width = kElementwiseVector;
  SmallVector<Value> pointers = {dx, x, gamma, dy};
  if (prior)
    pointers.push_back(prior);
  Value whole = cmpI(k, arith::CmpIPredicate::eq,
                     b.create<arith::RemUIOp>(loc, d, k.i64(width)), k.i64(0));
  Value fits = cmpI(k, arith::CmpIPredicate::sle, d, k.i64(kFusedGradMaxDim));
  Value vectors = andI(k, k.aligned16(pointers), andI(k, whole, fits));
  Value thread = k.add(k.mul(warp, k.i64(kWarp)), lane);
  k.forLoop(lane, cols, k.i64(kWarp), {}, [&](Value c, ValueRange) {
    k.store(k.f32(0.0), sums, k.add(mine, c));
    return SmallVector<Value>{};
  });
  k.ifThen(vectors, [&] {
    k.forLoop(k.mul(thread, k.i64(width)), d, k.i64(kWarp * kRowsPerBlock * width), {},
              [&](Value c, ValueRange) {
                k.storeVector(k.loadVector(gamma, c, width), gs, c);
                return SmallVector<Value>{};
              });
  });
  barrier(k); // column d + c is zeroed, and gamma staged, by other lanes than the readers
  Value g = k.blockId(gpu::Dimension::x);
  Value len = divU(k, k.sub(k.add(rows, chunks), k.i64(1)), chunks);
  Value first = minI(k, k.mul(g, len), rows);
  Value last = minI(k, k.add(first, len), rows);
  k.ifThenElse(
      vectors,
      [&] {
        Value staged = k.mul(warp, k.i64(kFusedGradMaxDim)); // this warp's row in xs, dys
        // Rounds of four rows, uniform in the block: the barriers are.
        k.forLoop(first, last, k.i64(kRowsPerBlock), {}, [&](Value round, ValueRange) {
          Value row = k.add(round, warp);
          Value mineRow = cmpI(k, arith::CmpIPredicate::slt, row, last);
          k.ifThen(mineRow, [&] {
            Value base = k.mul(row, d);
            k.forLoop(k.mul(lane, k.i64(width)), d, k.i64(kWarp * width), {},
                      [&](Value c, ValueRange) {
                        k.storeVector(k.loadVector(x, k.add(base, c), width), xs,
                                      k.add(staged, c));
                        k.storeVector(k.loadVector(dy, k.add(base, c), width), dys,
                                      k.add(staged, c));
                        return SmallVector<Value>{};
                      });
          });
          barrier(k); // a lane sums columns other lanes staged
          k.ifThen(mineRow, [&] {
            RowContext s{lane, row, staged, d, k.toF32(d)};
            GradRowStatistics st = gradRowStatistics(k, s, xs, gs, dys, eps);
            gradVectorColumns(k, s, st, xs, dys, gs, dx, prior, sums, mine);
          });
          barrier(k); // the next round overwrites the staged rows
          return SmallVector<Value>{};
        });
      },
      [&] {
        k.forLoop(k.add(first, warp), last, k.i64(kRowsPerBlock), {}, [&](Value row, ValueRange) {
          RowContext r{lane, row, k.mul(row, d), d, k.toF32(d)};
          layerNormGradRow(k, r, dx, prior, x, gamma, dy, eps, [&](Value c, Value dyc, Value xhat) {
            Value gammaAt = k.add(mine, c), betaAt = k.add(gammaAt, d);
            k.store(k.add(k.load(sums, gammaAt), k.mul(dyc, xhat)), sums, gammaAt);
            k.store(k.add(k.load(sums, betaAt), dyc), sums, betaAt);
          });
          return SmallVector<Value>{};
        });
      });
  barrier(k);
  k.forLoop(thread, cols, k.i64(kWarp * kRowsPerBlock), {}, [&](Value c, ValueRange) {
    Value total = k.load(sums, c);
    for (int64_t w = 1; w < kRowsPerBlock; ++w)
      total = k.add(total, k.load(sums, k.add(k.i64(w * 2 * kFusedGradMaxDim), c)));
    k.store(total, partials, k.add(k.mul(g, cols), c));
    return SmallVector<Value>{};
  });
}

/// The chunks of the fused kernel for `rows`: four blocks per SM of an H100
/// (kReductionBlocks is two), enough warps in flight for its loads at every
/// batch size (fewer chunks left the largest batches' kernel short of
/// bytes in flight; more, affine in the batch, made the finish's column sums
/// long), at most one row each when the row count is static.
BatchAffine fusedGradChunks(BatchAffine rows) {
  int64_t chunks = 2 * kReductionBlocks;
  if (rows.perBatch == 0)
    chunks = std::max<int64_t>(1, std::min(chunks, rows.constant));
  return BatchAffine::fixed(chunks);
}

/// The widest D whose rows pe_layer_norm stages in shared memory: four
/// warps' rows of f32, 16 KiB.
constexpr int64_t kStagedMaxDim = 1024;

/// y = (x - mean) rstd gamma + beta of the row `r`, the statistics from
/// `xs` (x itself, or the row staged at xs[r.base + c]); the columns from
/// `columns` (lane, lane + 32, ...: one element at a time, or the vectors of
/// 8 from 8 lane on).
void layerNormRow(KernelBuilder &k, const RowContext &r, Value xs, Value y, Value gamma,
                  Value beta, Value eps, bool vectors) {
  Value mean, rstd;
  std::tie(mean, rstd) = rowStatistics(k, r, xs, eps);
  auto out = [&](Value xc, Value g, Value bias) {
    return k.add(k.mul(k.mul(k.sub(xc, mean), rstd), g), bias);
  };
  if (!vectors) {
    forRowColumns(k, r, [&](Value c) {
      Value at = k.add(r.base, c);
      k.store(out(k.load(xs, at), k.load(gamma, c), k.load(beta, c)), y, at);
    });
    return;
  }
  const int64_t width = kElementwiseVector;
  Value rowAt = k.mul(r.row, r.d); // y's row (r.base is the staged row's)
  k.forLoop(k.mul(r.lane, k.i64(width)), r.d, k.i64(kWarp * width), {}, [&](Value c, ValueRange) {
    SmallVector<Value> xv = k.loadVector(xs, k.add(r.base, c), width);
    SmallVector<Value> gv = k.loadVector(gamma, c, width);
    SmallVector<Value> bv = k.loadVector(beta, c, width);
    SmallVector<Value> yv;
    for (int64_t j = 0; j < width; ++j)
      yv.push_back(out(xv[size_t(j)], gv[size_t(j)], bv[size_t(j)]));
    k.storeVector(yv, y, k.add(rowAt, c));
    return SmallVector<Value>{};
  });
}

/// pe_layer_norm. When D % 8 == 0, D <= kStagedMaxDim and y, x, gamma and
/// beta are 16-byte aligned, each warp copies its row of x into shared
/// memory with 16-byte loads (8 elements a lane, lanes on consecutive
/// vectors), then, after a block barrier, sums the staged row exactly as
/// the scalar path sums x (lane l: columns l, l + 32, ... in order, then
/// the butterfly: the same bits) and writes y with 16-byte loads of the
/// staged row, gamma and beta and 16-byte stores. Else every access is one
/// element, the kernel as it was.
void layerNormForward(KernelBuilder &k) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  Value y = k.arg(0), x = k.arg(1), gamma = k.arg(2), beta = k.arg(3), rows = k.arg(4),
        d = k.arg(5), eps = k.arg(6);
  const int64_t width = kElementwiseVector;
  Value whole = cmpI(k, arith::CmpIPredicate::eq,
                     b.create<arith::RemUIOp>(loc, d, k.i64(width)), k.i64(0));
  Value fits = cmpI(k, arith::CmpIPredicate::sle, d, k.i64(kStagedMaxDim));
  Value vectors = andI(k, k.aligned16({y, x, gamma, beta}), andI(k, whole, fits));
  k.ifThenElse(
      vectors,
      [&] {
        Value staged = sharedArray(k, "pe_layer_norm_rows", kRowsPerBlock * kStagedMaxDim);
        Value warp = k.threadId(gpu::Dimension::y), lane = k.threadId(gpu::Dimension::x);
        Value mine = k.mul(warp, k.i64(kStagedMaxDim));
        Value row = k.add(k.mul(k.blockId(gpu::Dimension::x), k.blockDim(gpu::Dimension::y)), warp);
        k.ifThen(cmpI(k, arith::CmpIPredicate::slt, row, rows), [&] {
          Value base = k.mul(row, d);
          k.forLoop(k.mul(lane, k.i64(width)), d, k.i64(kWarp * width), {},
                    [&](Value c, ValueRange) {
                      k.storeVector(k.loadVector(x, k.add(base, c), width), staged,
                                    k.add(mine, c));
                      return SmallVector<Value>{};
                    });
        });
        barrier(k); // a lane sums columns other lanes staged
        forWarpRow(k, rows, d, [&](const RowContext &r) {
          RowContext s = r;
          s.base = mine;
          layerNormRow(k, s, staged, y, gamma, beta, eps, /*vectors=*/true);
        });
      },
      [&] {
        forWarpRow(k, rows, d, [&](const RowContext &r) {
          layerNormRow(k, r, x, y, gamma, beta, eps, /*vectors=*/false);
        });
      });
}

GpuKernelSpec rowSpec(std::string name, llvm::StringRef peOp,
                   std::vector<std::pair<std::string, ParamKind>> params) {
  GpuKernelSpec spec;
  spec.name = std::move(name);
  spec.peOp = peOp.str();
  spec.params = std::move(params);
  spec.grid = GridRule::Rows;
  spec.blockX = kWarp;
  spec.blockY = kRowsPerBlock;
  return spec;
}

} // namespace

void appendNormKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;

  // y = (x - mean) rstd gamma + beta
  defs.push_back(
      {rowSpec("pe_layer_norm", pe::LayerNormOp::getOperationName(),
               {{"y", P}, {"x", P}, {"gamma", P}, {"beta", P}, {"rows", I}, {"d", I}, {"epsilon", F}}),
       layerNormForward});
  defs.back().storageParams = {0, 1}; // y, x
  defs.back().elementsPerLoad = kElementwiseVector;

  // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma; stats = (mean, rstd)
  defs.push_back(
      {rowSpec("pe_layer_norm_grad_rows", pe::LayerNormGradOp::getOperationName(),
               {{"dx", P}, {"stats", P}, {"x", P}, {"gamma", P}, {"dy", P},
                {"rows", I}, {"d", I}, {"epsilon", F}}),
       [](KernelBuilder &k) {
         layerNormGradRows(k, k.arg(0), k.arg(1), Value(), k.arg(2), k.arg(3), k.arg(4),
                           k.arg(5), k.arg(6), k.arg(7));
       }});
  defs.back().storageParams = {0, 2, 4}; // dx, x, dy
  // layer_norm_grad_acc: the same rows, dx = prior + the above.
  defs.push_back(
      {rowSpec("pe_layer_norm_grad_acc_rows", pe::LayerNormGradAccOp::getOperationName(),
               {{"dx", P}, {"stats", P}, {"prior", P}, {"x", P}, {"gamma", P}, {"dy", P},
                {"rows", I}, {"d", I}, {"epsilon", F}}),
       [](KernelBuilder &k) {
         layerNormGradRows(k, k.arg(0), k.arg(1), k.arg(2), k.arg(3), k.arg(4), k.arg(5),
                           k.arg(6), k.arg(7), k.arg(8));
       }});
  defs.back().storageParams = {0, 2, 3, 5}; // dx, prior, x, dy

  // The same in one pass with dgamma's and dbeta's partial sums per chunk
  // of rows (layerNormGradFused; D <= kFusedGradMaxDim), plain and _acc.
  for (bool accumulate : {false, true}) {
    std::vector<std::pair<std::string, ParamKind>> params = {{"dx", P}, {"partials", P}};
    if (accumulate)
      params.push_back({"prior", P});
    params.insert(params.end(), {{"x", P}, {"gamma", P}, {"dy", P}, {"rows", I}, {"d", I},
                                 {"chunks", I}, {"epsilon", F}});
    llvm::StringRef op = accumulate ? pe::LayerNormGradAccOp::getOperationName()
                                    : pe::LayerNormGradOp::getOperationName();
    defs.push_back({makeSpec(accumulate ? "pe_layer_norm_grad_acc_fused"
                                        : "pe_layer_norm_grad_fused",
                             op, params, GridRule::Explicit, kWarp, kRowsPerBlock),
                    [accumulate](KernelBuilder &k) {
                      unsigned a = accumulate ? 1 : 0; // after prior, the rest shift by one
                      layerNormGradFused(k, k.arg(0), k.arg(1), accumulate ? k.arg(2) : Value(),
                                         k.arg(2 + a), k.arg(3 + a), k.arg(4 + a), k.arg(5 + a),
                                         k.arg(6 + a), k.arg(7 + a), k.arg(8 + a));
                    }});
    if (accumulate)
      defs.back().storageParams = {0, 2, 3, 5}; // dx, prior, x, dy
    else
      defs.back().storageParams = {0, 2, 4}; // dx, x, dy
    defs.back().spec.dynamicSharedBytes = kFusedGradSharedBytes;
    defs.back().elementsPerLoad = kElementwiseVector;
  }

  // The partial sums of dgamma (columns c < d: dy xhat) and dbeta (columns
  // d + c: dy) over a chunk of rows.
  defs.push_back(columnPartialsKernel(
      "pe_layer_norm_grad_partials", pe::LayerNormGradOp::getOperationName(),
      {"x", "dy", "stats"}, {{"d", I}},
      [](KernelBuilder &k, Value r, Value c) {
        Value x = k.arg(1), dy = k.arg(2), stats = k.arg(3), d = k.arg(7);
        Value isGamma = cmpI(k, arith::CmpIPredicate::slt, c, d);
        Value column = select(k, isGamma, c, k.sub(c, d));
        Value at = k.add(k.mul(r, d), column);
        Value s = k.mul(r, k.i64(2));
        Value xhat = k.mul(k.sub(k.load(x, at), k.load(stats, s)),
                           k.load(stats, k.add(s, k.i64(1))));
        Value g = k.load(dy, at);
        return select(k, isGamma, k.mul(g, xhat), g);
      }));
  defs.back().storageParams = {1, 2}; // x, dy
}

} // namespace stringc::cudagen

namespace stringc::cudagen {

void appendNormLowerings(std::vector<OpLowering> &lowerings) {
  using A = LaunchArg;
  // Rows of D = the last dimension; `layer_norm_grad` keeps (mean, rstd) per
  // row in scratch 0 between its row and column launches.
  lowerings.push_back(loweringOf<pe::LayerNormOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto ln = cast<pe::LayerNormOp>(o);
                         Type x = o.getOperand(0).getType();
                         int64_t d = lastDimension(x);
                         std::optional<BatchAffine> rows = divideExactly(elementCount(x), d);
                         if (!rows)
                           return std::nullopt;
                         OpSteps steps;
                         steps.launches.push_back(Launch::kernelCall(
                             "pe_layer_norm",
                             {A::result(0), A::operand(0), A::operand(1), A::operand(2),
                              A::i64(*rows), A::i64(d),
                              A::f32(float(ln.getEpsilon().convertToDouble()))}));
                         return steps;
                       }));
  // layer_norm_grad and layer_norm_grad_acc (prior first): the row kernel,
  // then dgamma and dbeta as one column sum over (x, dy, stats).
  auto gradSteps = [](Operation &o, float eps, bool accumulate) -> std::optional<OpSteps> {
    const unsigned x = accumulate ? 1 : 0;
    Type xType = o.getOperand(x).getType();
    int64_t d = lastDimension(xType);
    std::optional<BatchAffine> rows = divideExactly(elementCount(xType), d);
    if (!rows)
      return std::nullopt;
    OpSteps steps;
    if (d <= kFusedGradMaxDim) {
      // One pass (layerNormGradFused), then the chunks' partials added.
      BatchAffine chunks = fusedGradChunks(*rows);
      steps.scratchBytes.push_back({chunks.perBatch * 2 * d * 4, chunks.constant * 2 * d * 4});
      std::vector<LaunchArg> args = {A::result(0), A::scratch(0)};
      if (accumulate)
        args.push_back(A::operand(0));
      for (unsigned i = x; i < x + 3; ++i) // x, gamma, dy
        args.push_back(A::operand(i));
      args.insert(args.end(), {A::i64(*rows), A::i64(d), A::i64(chunks), A::f32(eps)});
      Launch fused = Launch::kernelCall(
          accumulate ? "pe_layer_norm_grad_acc_fused" : "pe_layer_norm_grad_fused", args);
      fused.grid = ExplicitGrid{chunks, BatchAffine::fixed(1), BatchAffine::fixed(1)};
      steps.launches.push_back(fused);
      steps.launches.push_back(Launch::kernelCall(
          "pe_colsum_finish_pair", {A::result(1), A::result(2), A::scratch(0),
                                    A::i64(2 * d), A::i64(chunks), A::i64(d)}));
      return steps;
    }
    steps.scratchBytes.push_back({rows->perBatch * 8, rows->constant * 8});
    std::vector<LaunchArg> args = {A::result(0), A::scratch(0)};
    if (accumulate)
      args.push_back(A::operand(0));
    for (unsigned i = x; i < x + 3; ++i) // x, gamma, dy
      args.push_back(A::operand(i));
    args.insert(args.end(), {A::i64(*rows), A::i64(d), A::f32(eps)});
    steps.launches.push_back(Launch::kernelCall(
        accumulate ? "pe_layer_norm_grad_acc_rows" : "pe_layer_norm_grad_rows", args));
    appendColumnSumPair(steps, "pe_layer_norm_grad_partials",
                        {A::operand(x), A::operand(x + 2), A::scratch(0)}, *rows, d, {A::i64(d)},
                        A::result(1), A::result(2));
    return steps;
  };
  lowerings.push_back(loweringOf<pe::LayerNormGradOp>([gradSteps](Operation &o) {
    return gradSteps(o, float(cast<pe::LayerNormGradOp>(o).getEpsilon().convertToDouble()), false);
  }));
  lowerings.push_back(loweringOf<pe::LayerNormGradAccOp>([gradSteps](Operation &o) {
    return gradSteps(o, float(cast<pe::LayerNormGradAccOp>(o).getEpsilon().convertToDouble()),
                     true);
  }));
}

} // namespace stringc::cudagen
