//===- RelativeAttentionRows.cpp - relative attention over batch x head rows ===//
//
// pe.attention and pe.attention_grad with `rel` [T, T, Dh, Dh] (masks none
// and causal, Dh 16 and 32; vit_generators) with the batch x head axis
// across the lanes of a warp, as the CPU kernel
// (runtime/src/cpu/RelativeAttention.cpp) makes it the M of small GEMMs: the
// rotation R_ij = rel[i, j] is the same for every (batch, head), so the 32
// lanes of a warp, 32 (batch, head) rows of one token pair, read the same R
// from shared memory (a broadcast) and each rotates its own row with Dh^2
// FMAs. The FlashAttention-2 kernels with Enc::Rel
// (RelativeAttentionKernels.cpp) give each thread its own pair instead, and
// so read a different R_ij per thread from L2 for every key: B H T^2 Dh^2 x
// 4 bytes a kernel (the launch report's "chain"; ~1.7 ms a call measured on
// an H200 at batch 128).
//
// - Block: 4 warps, warp w owns token t0 + w (a query for the forward and
//   dQ, a key for dK/dV), lane l the row bh = r0 + l of the batch x heads:
//   a work item (r0 / 32, t0 / 4) of the ceil(B H / 32) x ceil(T / 4). The
//   grid is the `elements` rule's ceil(n / 128) blocks with n = 4 G B H +
//   124 G (G = ceil(T / 4)): an affine count of the batch that is at least
//   the work items (at most G - 1 more; the runtime caps it at 65536), and
//   each block runs the items blockIdx.x, + gridDim.x, ...
// - The other side goes through shared memory in tiles of `tile` tokens
//   (4 for Dh 16, 1 for Dh 32): the block's R for its 4 x tile pairs, and
//   the tile's rows of the other side for the block's 32 (batch, head) rows
//   (k and v, or q, dy and the rows' lse and delta), staged with coalesced
//   16-byte loads, rows padded to Dh + 4 floats (a lane's 16-byte reads of
//   its own row hit distinct banks across a quarter warp).
// - Forward: w = R_ij k_j, s = scale q_i . w, then the online softmax per
//   key (running maximum m and sum l, rescaled as each visible key comes),
//   y = acc / l and lse = m + log l as the FA-2 kernels write them.
// - dQ: P = exp(s - lse), dS = P (dy . v - delta), dq_i += scale dS w; it
//   writes dS (unscaled) to a scratch buffer laid out [T, T, B H], so a
//   warp's 32 stores are coalesced and the drel kernel reads each pair's dS
//   of every (batch, head) in a row (relGradKernel, pair-major).
// - dK/dV: u = R_ij^T q_i, s = scale u . k_j, dk_j += scale dS u, dv_j +=
//   P dy_i, over the query tiles that can see the block's keys.
// Every sum runs in a fixed order (the tile's tokens ascending, the
// rotation over e ascending); no atomics.
//
// f32 FMAs, not tensor cores: the rotations of a warp's 32 rows by one R
// are a [32, Dh] x [Dh, Dh] product that mma.sync m16n8k8 TF32 could run,
// but TF32 rounds q and k to 10-bit significands (errors ~1e-3 where these
// kernels are within 2e-6 of the f32 reference, as fp32 packages expect),
// the CUDA emulator has no TF32 mma to test it with (bf16 m16n8k16 only),
// and with the broadcast R the report already predicts these kernels at
// about RoPE attention's measured time (25 us a call at vit_generators'
// batch 128 against 30 us for pe_rope_attention_d16). A measured profile
// showing them issue-bound would be the reason to go to 3xTF32 mma.
//
//===----------------------------------------------------------------------===//
#include "AttentionF32.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "llvm/ADT/STLExtras.h"

#include <cfloat>

using namespace mlir;

namespace stringc::cudagen::attention {
namespace {

using Pred = arith::CmpIPredicate;
using A = LaunchArg;

/// (batch, head) rows per warp and warps (own tokens) per block.
constexpr int64_t kLanes = 32;
constexpr int64_t kOwnTokens = 4;
constexpr int64_t kThreads = kLanes * kOwnTokens;

/// Other-side tokens per staged tile: R for 4 x tile pairs (16 KiB) and the
/// tile's rows stay within the static shared memory.
int64_t otherTile(int64_t dh) { return dh <= 16 ? 4 : 1; }
/// Floats per staged row (16-byte aligned, conflict-free 16-byte reads).
int64_t rowStride(int64_t dh) { return dh + 4; }

std::string rowsKernelName(Kind kind, int64_t dh) {
  return kernelName("pe_rel_attention_rows", kind, dh);
}

/// kernelParams(kind, Rel) with the grid's element count `n` before the
/// sizes (the `elements` rule reads the first integer) and the number of
/// (batch, head) rows after them.
ParamList rowsParams(Kind kind) {
  ParamList params = kernelParams(kind, Enc::Rel);
  auto sizes = llvm::find_if(params, [](const auto &p) { return p.first == "tokens"; });
  params.insert(sizes, {"n", ParamKind::I64});
  params.push_back({"batch_heads", ParamKind::I64});
  return params;
}

/// Shared memory of a kernel in floats: R, two row tiles, for dK/dV the
/// rows' lse and delta.
int64_t rowsSharedFloats(Kind kind, int64_t dh) {
  const int64_t tile = otherTile(dh);
  int64_t floats = kOwnTokens * tile * dh * dh + 2 * tile * kLanes * rowStride(dh);
  if (kind == Kind::DkDv)
    floats += 2 * tile * kLanes;
  return floats;
}

/// What a thread of these kernels knows.
struct RowsBlock {
  KernelBuilder &k;
  int64_t dh, tile;
  Value tokens, width, heads, lookahead, scale, batchHeads;
  Value thread, lane, warp;
  Value rowBase;  // the work item's first (batch, head) row
  Value ownStart; // its first own token
  Value own;      // ownStart + warp: this warp's token
  Value bh;       // rowBase + lane, clamped to the last row (loads stay in bounds)
  Value valid;    // own < T and rowBase + lane < B H: the thread writes

  Value clampToken(Value token) { return minI(k, token, k.sub(tokens, k.i64(1))); }
  /// Element of (row `row`'s batch, `token`, its head's feature 0) in a [B, T, D] tensor.
  Value at(Value row, Value token) {
    Value b = divU(k, row, heads), h = remU(k, row, heads);
    return k.add(k.mul(k.add(k.mul(b, tokens), token), width), k.mul(h, k.i64(dh)));
  }
};

/// The block's state for work item `work` of `groups` token groups a row tile.
RowsBlock makeRowsBlock(KernelBuilder &k, const NamedArgs &args, int64_t dh, Value work,
                        Value groups) {
  RowsBlock g{k, dh, otherTile(dh), args("tokens"), args("width"), args("heads"),
              args("lookahead"), args("scale"), args("batch_heads"), {}, {}, {}, {}, {}, {},
              {}, {}};
  g.thread = k.threadId(gpu::Dimension::x);
  g.lane = remU(k, g.thread, k.i64(kLanes));
  g.warp = divU(k, g.thread, k.i64(kLanes));
  g.rowBase = k.mul(divU(k, work, groups), k.i64(kLanes));
  g.ownStart = k.mul(remU(k, work, groups), k.i64(kOwnTokens));
  g.own = k.add(g.ownStart, g.warp);
  Value row = k.add(g.rowBase, g.lane);
  g.bh = minI(k, row, k.sub(g.batchHeads, k.i64(1)));
  g.valid = andI(k, cmpI(k, Pred::slt, g.own, g.tokens), cmpI(k, Pred::slt, row, g.batchHeads));
  return g;
}

/// The block's R: r[(w * tile + c) * Dh^2 + e] = rel[i, j, e] for own token
/// w and other token c of [start, start + tile): (i, j) = (own, other), or
/// (other, own) when the own tokens are keys. Tokens past T are clamped
/// (their pairs are never used).
void stageRel(RowsBlock &g, Value r, Value rel, Value start, bool ownIsKey) {
  KernelBuilder &k = g.k;
  const int64_t per = g.dh * g.dh, total = kOwnTokens * g.tile * per;
  k.forLoop(k.mul(g.thread, k.i64(4)), k.i64(total), k.i64(4 * kThreads), {},
            [&](Value e, ValueRange) {
              Value entry = remU(k, e, k.i64(per)), pair = divU(k, e, k.i64(per));
              Value c = remU(k, pair, k.i64(g.tile)), w = divU(k, pair, k.i64(g.tile));
              Value own = g.clampToken(k.add(g.ownStart, w));
              Value other = g.clampToken(k.add(start, c));
              Value i = ownIsKey ? other : own, j = ownIsKey ? own : other;
              Value from = k.add(k.mul(k.add(k.mul(i, g.tokens), j), k.i64(per)), entry);
              std::array<Value, 4> four = k.load4(rel, from);
              for (int64_t x = 0; x < 4; ++x)
                k.store(four[size_t(x)], r, k.add(e, k.i64(x)));
              return SmallVector<Value>{};
            });
}

/// What a thread stages of a tile's rows (stageRows): the same slots for
/// every tile, so their (batch, head) offsets, which divide by the head
/// count (an emulated 64-bit division), are computed once per kernel.
struct RowStage {
  struct Slot {
    Value token;  // c: the tile's token
    Value offset; // element of (batch, token 0, h * Dh + d) in [B, T, D]
    Value to;     // (c * 32 + l) * stride + d in the tile
  };
  std::vector<Slot> slots;
};

/// The slots e = thread + 128 n of the tile * 32 * Dh / 4 quads (a static
/// count: 4 for Dh 16, 2 for Dh 32), quad fastest, then lane, then token.
RowStage makeRowStage(RowsBlock &g) {
  KernelBuilder &k = g.k;
  const int64_t quads = g.dh / 4, total = g.tile * kLanes * quads;
  if (total % kThreads)
    llvm::report_fatal_error("pe_rel_attention_rows: a tile's rows are not whole block strides");
  RowStage stage;
  for (int64_t n = 0; n * kThreads < total; ++n) {
    Value e = k.add(g.thread, k.i64(n * kThreads));
    Value quad = remU(k, e, k.i64(quads)), slot = divU(k, e, k.i64(quads));
    Value l = remU(k, slot, k.i64(kLanes)), c = divU(k, slot, k.i64(kLanes));
    Value row = minI(k, k.add(g.rowBase, l), k.sub(g.batchHeads, k.i64(1)));
    Value d = k.mul(quad, k.i64(4));
    stage.slots.push_back(
        {c, k.add(g.at(row, k.i64(0)), d), k.add(k.mul(slot, k.i64(rowStride(g.dh))), d)});
  }
  return stage;
}

/// The tile's rows of x for the block's (batch, head) rows:
/// tile[(c * 32 + l) * stride + d] = x[row rowBase + l, token start + c, d]
/// (16-byte loads, coalesced along the rows of a batch).
void stageRows(RowsBlock &g, const RowStage &stage, Value tile, Value x, Value start) {
  KernelBuilder &k = g.k;
  for (const RowStage::Slot &slot : stage.slots) {
    Value token = g.clampToken(k.add(start, slot.token));
    std::array<Value, 4> four = k.load4(x, k.add(slot.offset, k.mul(token, g.width)));
    for (int64_t i = 0; i < 4; ++i)
      k.store(four[size_t(i)], tile, k.add(slot.to, k.i64(i)));
  }
}

/// stats[c * 32 + l] = stat[(rowBase + l) * T + start + c] (lse or delta).
void stageStats(RowsBlock &g, Value stats, Value stat, Value start) {
  KernelBuilder &k = g.k;
  k.forLoop(g.thread, k.i64(g.tile * kLanes), k.i64(kThreads), {}, [&](Value e, ValueRange) {
    Value l = remU(k, e, k.i64(kLanes)), c = divU(k, e, k.i64(kLanes));
    Value row = minI(k, k.add(g.rowBase, l), k.sub(g.batchHeads, k.i64(1)));
    Value token = g.clampToken(k.add(start, c));
    k.store(k.load(stat, k.add(k.mul(row, g.tokens), token)), stats, e);
    return SmallVector<Value>{};
  });
}

/// This thread's row of a staged tile at other token c.
std::vector<Value> tileRow(RowsBlock &g, Value tile, Value c) {
  KernelBuilder &k = g.k;
  Value base = k.mul(k.add(k.mul(c, k.i64(kLanes)), g.lane), k.i64(rowStride(g.dh)));
  std::vector<Value> row;
  for (int64_t d = 0; d < g.dh; d += 4)
    for (Value v : k.load4(tile, k.add(base, k.i64(d))))
      row.push_back(v);
  return row;
}

/// This thread's own row of x [B, T, D] (its own token clamped).
std::vector<Value> ownRow(RowsBlock &g, Value x) {
  KernelBuilder &k = g.k;
  Value base = g.at(g.bh, g.clampToken(g.own));
  std::vector<Value> row;
  for (int64_t d = 0; d < g.dh; d += 4)
    for (Value v : k.load4(x, k.add(base, k.i64(d))))
      row.push_back(v);
  return row;
}

void storeOwnRow(RowsBlock &g, Value x, const std::vector<Value> &row) {
  KernelBuilder &k = g.k;
  Value base = g.at(g.bh, g.own);
  for (int64_t d = 0; d < g.dh; ++d)
    k.store(row[size_t(d)], x, k.add(base, k.i64(d)));
}

/// R x (or R^T x when `transpose`) for R the staged pair (warp, c): every
/// lane of the warp reads the same R (a broadcast). Both sum over e
/// ascending: (R x)[a] = sum_e R[a, e] x[e], (R^T x)[a] = sum_e R[e, a] x[e].
std::vector<Value> rotate(RowsBlock &g, Value r, Value c, const std::vector<Value> &x,
                          bool transpose) {
  KernelBuilder &k = g.k;
  const int64_t dh = g.dh;
  Value base = k.mul(k.add(k.mul(g.warp, k.i64(g.tile)), c), k.i64(dh * dh));
  std::vector<Value> out(size_t(dh), k.f32(0.0));
  // Both read R by rows, 16 bytes at a time: row e for R^T x (columns a..a+3
  // of it go to four outputs), row a for R x (one output).
  for (int64_t e = 0; e < dh && transpose; ++e)
    for (int64_t a = 0; a < dh; a += 4) {
      std::array<Value, 4> four = k.load4(r, k.add(base, k.i64(e * dh + a)));
      for (int64_t i = 0; i < 4; ++i)
        out[size_t(a + i)] = fma(k, four[size_t(i)], x[size_t(e)], out[size_t(a + i)]);
    }
  for (int64_t a = 0; a < dh && !transpose; ++a)
    for (int64_t e = 0; e < dh; e += 4) {
      std::array<Value, 4> four = k.load4(r, k.add(base, k.i64(a * dh + e)));
      for (int64_t i = 0; i < 4; ++i)
        out[size_t(a)] = fma(k, four[size_t(i)], x[size_t(e + i)], out[size_t(a)]);
    }
  return out;
}

Value dot(KernelBuilder &k, const std::vector<Value> &a, const std::vector<Value> &b) {
  Value sum = k.f32(0.0);
  for (size_t d = 0; d < a.size(); ++d)
    sum = fma(k, a[d], b[d], sum);
  return sum;
}

/// The end of the keys the block's queries see: past its last query
/// (ownStart + 3) + lookahead nothing is visible.
Value keysEnd(RowsBlock &g) {
  KernelBuilder &k = g.k;
  return minI(k, g.tokens, k.add(k.add(g.ownStart, k.i64(kOwnTokens)), g.lookahead));
}

/// Runs `body` for each work item of the block (blockIdx.x, + gridDim.x,
/// ... below ceil(B H / 32) ceil(T / 4)): uniform over the block, so its
/// barriers are too.
void forEachWork(KernelBuilder &k, const NamedArgs &args, int64_t dh,
                 const std::function<void(RowsBlock &)> &body) {
  Value groups = divU(k, k.add(args("tokens"), k.i64(kOwnTokens - 1)), k.i64(kOwnTokens));
  Value tiles = divU(k, k.add(args("batch_heads"), k.i64(kLanes - 1)), k.i64(kLanes));
  k.forLoop(k.blockId(gpu::Dimension::x), k.mul(tiles, groups), k.gridDim(gpu::Dimension::x),
            {}, [&](Value work, ValueRange) {
              RowsBlock g = makeRowsBlock(k, args, dh, work, groups);
              body(g);
              return SmallVector<Value>{};
            });
}

void forwardBody(KernelBuilder &k, const NamedArgs &args, int64_t dh) {
  // Shared arrays first: sharedArray finds the gpu.module from the insertion
  // block, which a loop body under construction is not yet inside.
  const int64_t tile = otherTile(dh);
  Value r = sharedArray(k, "rel_rows_r", kOwnTokens * tile * dh * dh);
  Value kTile = sharedArray(k, "rel_rows_k", tile * kLanes * rowStride(dh));
  Value vTile = sharedArray(k, "rel_rows_v", tile * kLanes * rowStride(dh));
  forEachWork(k, args, dh, [&](RowsBlock &g) {
    RowStage stage = makeRowStage(g);
    std::vector<Value> q = ownRow(g, args("q"));
    Value end = keysEnd(g);
    const Value zero = k.f32(0.0);
    SmallVector<Value> init = {k.f32(-FLT_MAX), zero};
    init.append(size_t(dh), zero);
    ValueRange done = k.forLoop(k.i64(0), end, k.i64(g.tile), init, [&](Value start,
                                                                        ValueRange carried) {
      barrier(k); // the previous tile is no longer read
      stageRel(g, r, args("rel"), start, false);
      stageRows(g, stage, kTile, args("k"), start);
      stageRows(g, stage, vTile, args("v"), start);
      barrier(k);
      Value count = minI(k, k.i64(g.tile), k.sub(end, start));
      return k.forLoop(k.i64(0), count, k.i64(1), carried, [&](Value c, ValueRange st) {
        Value key = k.add(start, c);
        std::vector<Value> w = rotate(g, r, c, tileRow(g, kTile, c), false); // R_ij k_j
        Value s = k.mul(g.scale, dot(k, q, w));
        Value seen = cmpI(k, Pred::sle, key, k.add(g.own, g.lookahead));
        Value m = st[0];
        Value mNew = select(k, seen, maxF(k, m, s), m);
        Value alpha = expF(k, k.sub(m, mNew)); // 0 on the first visible key
        Value p = select(k, seen, expF(k, k.sub(s, mNew)), zero);
        SmallVector<Value> next = {mNew, fma(k, st[1], alpha, p)};
        std::vector<Value> v = tileRow(g, vTile, c);
        for (int64_t d = 0; d < dh; ++d)
          next.push_back(fma(k, p, v[size_t(d)], k.mul(st[2 + d], alpha)));
        return next;
      });
    });
    k.ifThen(g.valid, [&] {
      // As the FA-2 kernels: y = acc / l, lse = m + log l (every query of
      // the masks served sees a key, so l > 0).
      Value l = done[1];
      Value positive = cmpF(k, arith::CmpFPredicate::OGT, l, zero);
      Value safeL = select(k, positive, l, k.f32(1.0));
      std::vector<Value> y;
      for (int64_t d = 0; d < dh; ++d)
        y.push_back(select(k, positive, k.div(done[2 + d], safeL), zero));
      storeOwnRow(g, args("y"), y);
      Value lse = select(k, positive, k.add(done[0], logF(k, safeL)), k.f32(FLT_MAX));
      k.store(lse, args("lse"), k.add(k.mul(g.bh, g.tokens), g.own));
    });
  });
}

/// dQ, and dS [T, T, B H] for the drel kernel.
void dqBody(KernelBuilder &k, const NamedArgs &args, int64_t dh) {
  // Shared arrays first: sharedArray finds the gpu.module from the insertion
  // block, which a loop body under construction is not yet inside.
  const int64_t tile = otherTile(dh);
  Value r = sharedArray(k, "rel_rows_r", kOwnTokens * tile * dh * dh);
  Value kTile = sharedArray(k, "rel_rows_k", tile * kLanes * rowStride(dh));
  Value vTile = sharedArray(k, "rel_rows_v", tile * kLanes * rowStride(dh));
  forEachWork(k, args, dh, [&](RowsBlock &g) {
    RowStage stage = makeRowStage(g);
    std::vector<Value> q = ownRow(g, args("q")), dy = ownRow(g, args("dy"));
    Value stat = k.add(k.mul(g.bh, g.tokens), g.clampToken(g.own));
    Value lse = k.load(args("lse"), stat), delta = k.load(args("delta"), stat);
    Value end = keysEnd(g);
    const Value zero = k.f32(0.0);
    SmallVector<Value> init(size_t(dh), zero);
    ValueRange done = k.forLoop(k.i64(0), end, k.i64(g.tile), init, [&](Value start,
                                                                        ValueRange carried) {
      barrier(k);
      stageRel(g, r, args("rel"), start, false);
      stageRows(g, stage, kTile, args("k"), start);
      stageRows(g, stage, vTile, args("v"), start);
      barrier(k);
      Value count = minI(k, k.i64(g.tile), k.sub(end, start));
      return k.forLoop(k.i64(0), count, k.i64(1), carried, [&](Value c, ValueRange acc) {
        Value key = k.add(start, c);
        std::vector<Value> w = rotate(g, r, c, tileRow(g, kTile, c), false);
        Value s = k.mul(g.scale, dot(k, q, w));
        Value seen = cmpI(k, Pred::sle, key, k.add(g.own, g.lookahead));
        Value p = select(k, seen, expF(k, k.sub(s, lse)), zero);
        Value dp = dot(k, dy, tileRow(g, vTile, c));
        Value dsRaw = k.mul(p, k.sub(dp, delta));
        k.ifThen(g.valid, [&] { // ds[(i * T + j) * B H + bh]
          Value pair = k.add(k.mul(g.own, g.tokens), key);
          k.store(dsRaw, args("ds"), k.add(k.mul(pair, g.batchHeads), g.bh));
        });
        Value ds = k.mul(g.scale, dsRaw);
        SmallVector<Value> next;
        for (int64_t d = 0; d < dh; ++d) // dq_i += scale dS_ij R_ij k_j
          next.push_back(fma(k, ds, w[size_t(d)], acc[d]));
        return next;
      });
    });
    k.ifThen(g.valid, [&] { storeOwnRow(g, args("dq"), std::vector<Value>(done.begin(), done.end())); });
  });
}

/// dK, dV: the own tokens are keys, over the query tiles that can see them.
void dkdvBody(KernelBuilder &k, const NamedArgs &args, int64_t dh) {
  // Shared arrays first: sharedArray finds the gpu.module from the insertion
  // block, which a loop body under construction is not yet inside.
  const int64_t tile = otherTile(dh);
  Value r = sharedArray(k, "rel_rows_r", kOwnTokens * tile * dh * dh);
  Value qTile = sharedArray(k, "rel_rows_q", tile * kLanes * rowStride(dh));
  Value dyTile = sharedArray(k, "rel_rows_dy", tile * kLanes * rowStride(dh));
  Value lseTile = sharedArray(k, "rel_rows_lse", tile * kLanes);
  Value deltaTile = sharedArray(k, "rel_rows_delta", tile * kLanes);
  forEachWork(k, args, dh, [&](RowsBlock &g) {
    RowStage stage = makeRowStage(g);
    std::vector<Value> key = ownRow(g, args("k")), value = ownRow(g, args("v"));
    // Query i sees key j when i >= j - lookahead.
    Value first = k.sub(g.ownStart, g.lookahead);
    first = select(k, cmpI(k, Pred::slt, first, k.i64(0)), k.i64(0), first);
    const Value zero = k.f32(0.0);
    SmallVector<Value> init(size_t(2 * dh), zero); // dk, dv
    ValueRange done = k.forLoop(first, g.tokens, k.i64(g.tile), init, [&](Value start,
                                                                        ValueRange carried) {
      barrier(k);
      stageRel(g, r, args("rel"), start, true);
      stageRows(g, stage, qTile, args("q"), start);
      stageRows(g, stage, dyTile, args("dy"), start);
      stageStats(g, lseTile, args("lse"), start);
      stageStats(g, deltaTile, args("delta"), start);
      barrier(k);
      Value count = minI(k, k.i64(g.tile), k.sub(g.tokens, start));
      return k.forLoop(k.i64(0), count, k.i64(1), carried, [&](Value c, ValueRange acc) {
        Value query = k.add(start, c);
        std::vector<Value> u = rotate(g, r, c, tileRow(g, qTile, c), true); // R_ij^T q_i
        Value s = k.mul(g.scale, dot(k, u, key));
        Value stat = k.add(k.mul(c, k.i64(kLanes)), g.lane);
        Value seen = cmpI(k, Pred::sle, g.own, k.add(query, g.lookahead));
        Value p = select(k, seen, expF(k, k.sub(s, k.load(lseTile, stat))), zero);
        std::vector<Value> dyRow = tileRow(g, dyTile, c);
        Value dp = dot(k, dyRow, value);
        Value ds = k.mul(g.scale, k.mul(p, k.sub(dp, k.load(deltaTile, stat))));
        SmallVector<Value> next;
        for (int64_t d = 0; d < dh; ++d) // dk_j += scale dS_ij R_ij^T q_i
          next.push_back(fma(k, ds, u[size_t(d)], acc[d]));
        for (int64_t d = 0; d < dh; ++d) // dv_j += P_ij dy_i
          next.push_back(fma(k, p, dyRow[size_t(d)], acc[dh + d]));
        return next;
      });
    });
    k.ifThen(g.valid, [&] {
      storeOwnRow(g, args("dk"), std::vector<Value>(done.begin(), done.begin() + dh));
      storeOwnRow(g, args("dv"), std::vector<Value>(done.begin() + dh, done.end()));
    });
  });
}

KernelDef rowsKernel(Kind kind, int64_t dh) {
  std::string name = rowsKernelName(kind, dh);
  if (rowsSharedFloats(kind, dh) * 4 > kSharedLimitBytes)
    llvm::report_fatal_error(llvm::Twine("attention kernel ") + name +
                             " exceeds 48 KiB of static shared memory");
  ParamList params = rowsParams(kind);
  GpuKernelSpec spec = makeSpec(name, servedOp(kind, false), params, GridRule::Elements, kThreads);
  return {std::move(spec), [kind, dh, params](KernelBuilder &k) {
            NamedArgs args{k, params};
            switch (kind) {
            case Kind::Forward:
              forwardBody(k, args, dh);
              break;
            case Kind::DkDv:
              dkdvBody(k, args, dh);
              break;
            case Kind::Dq:
              dqBody(k, args, dh);
              break;
            }
          }};
}

/// The launch: `front` (outputs and inputs), then n = 4 G B H + 124 G
/// (ceil(n / 128) = ceil(G (B H + 31) / 32) blocks, at least the
/// ceil(B H / 32) G work items), the sizes and B H.
Launch rowsLaunch(const AttentionShape &s, Kind kind, std::vector<LaunchArg> front,
                  const std::vector<LaunchArg> &sizes) {
  const int64_t groups = ceilDiv(s.tokens, kOwnTokens);
  BatchAffine n = s.batch * (s.heads * kOwnTokens * groups);
  n.constant += (kThreads - kOwnTokens) * groups;
  front.push_back(A::i64(n));
  std::vector<LaunchArg> args = concat(std::move(front), sizes);
  args.push_back(A::i64(s.batch * s.heads));
  return Launch::kernelCall(rowsKernelName(kind, s.dh), std::move(args));
}

} // namespace

void appendRelRowsKernels(std::vector<KernelDef> &defs) {
  for (int64_t dh : kRelRowsHeadDims) {
    for (Kind kind : {Kind::Forward, Kind::DkDv, Kind::Dq})
      defs.push_back(rowsKernel(kind, dh));
    defs.push_back(relGradKernel(dh, /*pairMajor=*/true));
  }
}

bool relRowsFit(const AttentionShape &s, Type rel, pe::MaskKind mask) {
  auto shape = batchShape(rel);
  return mask != pe::MaskKind::Skip && llvm::is_contained(kRelRowsHeadDims, s.dh) && shape &&
         *shape == std::vector<int64_t>{s.tokens, s.tokens, s.dh, s.dh} &&
         ceilDiv(s.tokens, kOwnTokens) <= 65535;
}

OpSteps relRowsForward(Operation &op, const AttentionShape &s,
                       const std::vector<LaunchArg> &sizes) {
  OpSteps steps;
  LaunchArg lse = forwardLse(op, s, steps);
  steps.launches.push_back(rowsLaunch(
      s, Kind::Forward,
      {A::result(0), lse, A::operand(0), A::operand(1), A::operand(2), A::operand(3)}, sizes));
  return steps;
}

OpSteps relRowsGrad(const AttentionShape &s, const std::vector<LaunchArg> &sizes) {
  // Operands q, k, v, y, lse, dy, rel; results dq, dk, dv, drel.
  OpSteps steps;
  const BatchAffine rows = s.batch * (s.heads * s.tokens);
  steps.scratchBytes.push_back(rows * 4); // delta [B H T]
  steps.scratchBytes.push_back(s.batch * (s.heads * s.tokens * s.tokens * 4)); // dS [T, T, B H]
  steps.launches.push_back(Launch::kernelCall(
      "pe_attention_grad_delta", {A::scratch(0), A::operand(3), A::operand(5), A::i64(rows),
                                  A::i64(s.tokens), A::i64(s.width), A::i64(s.heads)}));
  const std::vector<LaunchArg> inputs = {A::operand(0), A::operand(1), A::operand(2),
                                         A::operand(6), A::operand(5), A::operand(4),
                                         A::scratch(0)};
  steps.launches.push_back(
      rowsLaunch(s, Kind::DkDv, concat({A::result(1), A::result(2)}, inputs), sizes));
  steps.launches.push_back(
      rowsLaunch(s, Kind::Dq, concat({A::result(0), A::scratch(1)}, inputs), sizes));
  steps.launches.push_back(Launch::kernelCall(
      relGradKernelName(s.dh, /*pairMajor=*/true),
      {A::result(3), A::operand(0), A::operand(1), A::scratch(1),
       A::i64(s.tokens * s.tokens * s.dh), A::i64(s.tokens), A::i64(s.width), A::i64(s.heads),
       A::i64(s.batch * s.heads), sizes[3], sizes[4]}));
  return steps;
}

} // namespace stringc::cudagen::attention
