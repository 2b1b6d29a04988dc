//===- AttentionMmaKernels.cpp - attention on tensor cores (bf16 MMA) -----===//
//
// pe.attention, pe.rope_attention and their gradients (masks none and
// causal, head dims 16, 32, 64) for packages compiled with
// --gpu-precision=bf16 (docs/cuda.md, "Tensor-core attention"): the
// FlashAttention-2 algorithm of AttentionKernels.cpp with every product on
// the tensor cores, `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`
// (bf16 operands, f32 accumulation). The kernels take the same parameters
// as the f32 kernels (the forward writes the log-sum-exp, the gradient
// kernels read it and delta); skip masks, `rel` and
// other head dims stay on the f32 kernels (these lowerings decline them).
// q, k, v, dy, y, dq, dk and dv are storage parameters (storageParams): a
// bf16 package's variants read and write them in bf16 (KernelBuilder::load
// / store); lse, delta and the RoPE table are always f32.
//
// - Blocks of 4 warps, grid (B * H, ceil(T / 64), 1): each warp owns 16 rows
//   (queries for the forward and dQ kernels; keys for dK/dV), 64
//   per block. The other side goes through static shared memory 64 tokens at
//   a time.
// - Staging (TileStager, TileLoop): a tile whose tensor a variant stores in
//   bf16 and that needs no rotation (v, dy; q and k without RoPE) is copied
//   by cp.async, 16 bytes at a time; v (forward, dQ) and dy (dK/dV) a tile
//   ahead into the other of two buffers, so the copy of tile t + 1 overlaps
//   the products of tile t (FlashAttention-2's pipelining). The rest goes
//   through registers (stageTile).
// - Shared tiles hold bf16, one token per row, `dh + 8` halfwords apart (the
//   8 pad the 8 rows an ldmatrix phase reads over the 32 banks; 48, 80 and
//   144 bytes a row, so every row address is 16-byte aligned). q and k are
//   rotated by RoPE in f32 as they load (widened from bf16 in a bf16
//   variant), then rounded to bf16 (nearest even) with integer arithmetic:
//   the same bits on a GPU and in the host emulator.
// - Fragments (PTX ISA, m16n8k16; g = lane / 4, t = lane % 4) are read from
//   the tiles with ldmatrix.sync.aligned.m8n8 (lane l gives row l % 8 of
//   matrix l / 8): A register j holds (row g + 8 (j & 1), columns 2t + 8
//   (j >> 1) and the next), one x4 of the 16 x 16 square (loadA); B register
//   j (k = 2t + 8 j and the next, n = g): from a tile (tokens k x features
//   n) the same square read .trans gives the B fragments of two 8-feature
//   blocks (loadBPair), from the transposed tile (features k x tokens n)
//   x2 gives one of 16 features of 8 tokens (loadBTransposed). The
//   registers are the bits the plain loads gave before (the outputs are
//   bit-identical).
//   C register i is (row g + 8 (i >= 2), column 2t + (i & 1)). Two f32 C
//   fragments of adjacent 8-column blocks are, rounded to bf16, the A
//   fragment of the next product over those 16 columns, so P and dS never
//   leave the registers.
// - Forward: S = Q K^T, scaled and masked (-inf) in f32, online softmax per
//   row with the row maximum and sum across the 4 lanes of a quad (xor
//   shuffles 1 and 2), P in bf16, O += P V. y = O / l and lse = m + log l
//   in f32.
// - Backward (three launches, no atomics, like the f32 kernels): the delta
//   kernel (delta = bf16(dy) . y from the forward's y), then dK/dV (a warp
//   owns 16 keys and computes S^T = K
//   Q^T and dP^T = V dO^T directly, P^T = exp(scale S^T - lse), dS^T = P^T
//   (dP^T - delta), dV += P^T dO, dK += dS^T Q over the query tiles, 16
//   queries at a time) and dQ (S = Q K^T, dP = dO V^T, dQ += dS K over the
//   key tiles, 16 keys at a time). dq and dk are scaled and rotated back
//   (RoPE pairs are the two adjacent columns a lane holds) in f32; y, dq,
//   dk and dv are rounded once, as they are stored (bf16 variants).
// - Masks: key j is visible to query i when j <= i + lookahead (0 for causal,
//   T - 1 for none; an i64 that may be 0) and j < T, else
//   its score is -inf (P = 0); causal blocks stop at the key tile of their
//   last query, dK/dV blocks start at the first query tile that sees their
//   first key. Tokens past T load as zeros and are never stored.
// - Skipped work (skipOf): at head dim 64 a warp whose rows are all past T
//   skips each tile's products (forward, dQ), and the forward
//   and dQ skip the blocks of keys none of the warp's rows sees; chosen per
//   kernel by what an H100 measured (dK/dV skips nothing).
//
//===----------------------------------------------------------------------===//
#include "AttentionMma.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <array>
#include <cfloat>
#include <cmath>

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace attention;
using namespace mma;
using A = LaunchArg;

/// The gradient's delta kernel of this family (attention::deltaKernel, dy
/// rounded to bf16).
constexpr const char *kDeltaKernel = "pe_attention_mma_grad_delta";

std::string kernelName(Kind kind, bool rope, int64_t dh) {
  return attention::kernelName(rope ? "pe_rope_attention_mma" : "pe_attention_mma", kind, dh);
}

/// Static shared memory of a kernel at most (a variant that stores v or dy
/// in bf16; TileStager): bf16 tiles of kTile tokens, two for the tile
/// copied a step ahead (and the f32 lse and delta of a query tile for
/// dK/dV).
int64_t sharedBytes(Kind kind, int64_t dh) {
  const int64_t tile = kTile * tileStride(dh) * 2;
  switch (kind) {
  case Kind::Forward:
    return 4 * tile; // q, k, 2 x v
  case Kind::DkDv:
    return 5 * tile + 2 * kTile * 4; // k, v rows; q, 2 x dy tiles; lse, delta
  case Kind::Dq:
    return 5 * tile; // q, dy rows; k, 2 x v tiles
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Skipping work that cannot change the results
//===----------------------------------------------------------------------===//

/// What a kernel leaves out of a tile's work instead of computing and
/// masking it. Every condition is warp-uniform (mma.sync and the quad
/// shuffles need all 32 lanes), and a skipped product would only have added
/// zeros (P = 0) or produced scores masked to -inf: the results are the same.
enum class Skip {
  Nothing, // every warp computes every product of the tile
  Warps,   // a warp whose 16 rows are all past T skips the tile's products
  Blocks,  // ...and the blocks of keys its rows do not see (8 forward, 16 dQ)
};

/// Chosen per kernel from `ncu` on an H100 (vit_s_rope, bf16, batch 256:
/// T = 197, Dh = 64, 64-row blocks, so 13 of 16 warps have rows and 25 of 32
/// key blocks of 8 are below T; docs/cuda.md, "Tensor-core attention"). In
/// ms per step, Nothing / Warps / Blocks: forward 9.44 / 9.46 / 8.04,
/// statistics 9.38 / 7.94 / 9.21, dQ 10.15 / 10.04 / 9.77, dK/dV 13.20 /
/// 17.52 / 17.52 (the branches cost dK/dV more registers and scheduling than
/// they save; a cap of 128 registers did not help it: 14.5-14.8), so
/// dkdvBody has no skipping. Nothing at Dh 16 and 32: with vit_rope's T = 50
/// there is nothing to skip, and the branches made its step 3% slower at
/// batch 1024.
Skip skipOf(Kind kind, int64_t dh) {
  if (dh != 64)
    return Skip::Nothing;
  switch (kind) {
  case Kind::Forward:
  case Kind::Dq:
    return Skip::Blocks;
  case Kind::DkDv: // skips nothing (dkdvBody): its skipping variants were slower
    return Skip::Nothing;
  }
  return Skip::Nothing;
}

/// A tile's next carried values: `body()`, or (Skip::Warps and Blocks)
/// `carried` unchanged for a warp without rows.
SmallVector<Value> unlessRowless(KernelBuilder &k, Skip skip, Value hasRows, ValueRange carried,
                                 const std::function<SmallVector<Value>()> &body) {
  if (skip == Skip::Nothing)
    return body();
  ValueRange next = k.ifThenOr(hasRows, carried, body);
  return SmallVector<Value>(next.begin(), next.end());
}

/// `then()`'s fragments, or (Skip::Blocks) `otherwise` where `seen` is false.
std::vector<Frag> unlessUnseen(KernelBuilder &k, Skip skip, Value seen,
                               const std::vector<Frag> &otherwise,
                               const std::function<std::vector<Frag>()> &then) {
  if (skip != Skip::Blocks)
    return then();
  std::vector<Value> flat = flatten(otherwise);
  ValueRange chosen = k.ifThenOr(seen, flat, [&] {
    std::vector<Value> computed = flatten(then());
    return SmallVector<Value>(computed.begin(), computed.end());
  });
  return unflatten(chosen, 0, otherwise.size());
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

void forwardBody(KernelBuilder &k, const Args &args, int64_t dh) {
  const Kind kind = Kind::Forward;
  Warps w = makeWarps(k, args, dh);
  Value table = args.optional("table");
  const int64_t featureBlocks = dh / 8;
  TileStager qRows(w, "mma_q_tile", args("q"), table, /*ahead=*/false);
  TileStager keys(w, "mma_k_tile", args("k"), table, /*ahead=*/false);
  TileStager values(w, "mma_v_tile", args("v"), Value(), /*ahead=*/true);
  TileLoop loop{w, keys, values, tilesUpTo(k, blockKeyEnd(w))};
  loop.prologue(k.i64(0), {&qRows});
  const std::vector<Frag> qa = warpRowFragments(w, qRows.memory);
  const Value rows[2] = {w.ownRow(0), w.ownRow(1)};
  const Value lowest = k.f32(-FLT_MAX), minusInf = k.f32(-INFINITY), zero = k.f32(0.0);
  const Value hasRows = w.warpHasRows(), keyEnd = w.warpKeyEnd();
  const Skip skip = skipOf(kind, dh);

  // Carried: m (2 rows), l (the lane's partial sums, 2 rows), O fragments.
  SmallVector<Value> init = {lowest, lowest, zero, zero};
  std::vector<Value> o0 = flatten(std::vector<Frag>(featureBlocks, zeroFrag(k)));
  init.append(o0.begin(), o0.end());
  ValueRange done = k.forLoop(
      k.i64(0), loop.end, k.i64(1), init, [&](Value t, ValueRange carried) {
        Value start = k.mul(t, k.i64(kTile));
        loop.step(t, nullptr);
        Value kTileMem = keys.memory, vTileMem = values.buffer(t);
        return unlessRowless(k, skip, hasRows, carried, [&] {
          // Scores of 8 keys per fragment, scaled and masked (-inf).
          std::vector<Frag> s(kTile / 8);
          Value tileMax[2] = {minusInf, minusInf};
          const Frag hidden = {minusInf, minusInf, minusInf, minusInf};
          for (int64_t nb = 0; nb < kTile / 8; ++nb) {
            Value seen = cmpI(k, Pred::slt, k.add(start, k.i64(8 * nb)), keyEnd);
            s[nb] = unlessUnseen(k, skip, seen, {hidden}, [&] {
              return std::vector<Frag>{rowsTimesTile(w, qa, kTileMem, 8 * nb)};
            })[0];
            for (int i = 0; i < 4; ++i) {
              Value key = k.add(start, k.add(k.i64(8 * nb), w.fragColumn(i)));
              s[nb][i] = select(k, w.visible(rows[i / 2], key), k.mul(s[nb][i], w.scale), minusInf);
              tileMax[i / 2] = maxF(k, tileMax[i / 2], s[nb][i]);
            }
          }
          Value m[2], alpha[2], l[2];
          for (int r = 0; r < 2; ++r) {
            m[r] = maxF(k, carried[r], quadReduce(k, tileMax[r], /*max=*/true));
            alpha[r] = expF(k, k.sub(carried[r], m[r])); // 0 on the first tile seen
            l[r] = k.mul(carried[2 + r], alpha[r]);
          }
          for (int64_t nb = 0; nb < kTile / 8; ++nb)
            for (int i = 0; i < 4; ++i) {
              s[nb][i] = expF(k, k.sub(s[nb][i], m[i / 2])); // exp(-inf) = 0
              l[i / 2] = k.add(l[i / 2], s[nb][i]);
            }
          std::vector<Frag> o = unflatten(carried, 4, featureBlocks);
          for (Frag &f : o)
            for (int i = 0; i < 4; ++i)
              f[i] = k.mul(f[i], alpha[i / 2]);
          for (int64_t c = 0; c < kTile / 16; ++c) {
            Value seen = cmpI(k, Pred::slt, k.add(start, k.i64(16 * c)), keyEnd);
            o = unlessUnseen(k, skip, seen, o, [&] {
              std::vector<Frag> sum = o;
              accumulateTimesTile(w, sum, toAFragment(k, s[2 * c], s[2 * c + 1]), vTileMem, 16 * c);
              return sum;
            });
          }
          SmallVector<Value> values = {m[0], m[1], l[0], l[1]};
          std::vector<Value> flat = flatten(o);
          values.append(flat.begin(), flat.end());
          return values;
        });
      });
  loop.epilogue();

  std::vector<Frag> o = unflatten(done, 4, featureBlocks);
  Value inverse[2], sum[2];
  for (int r = 0; r < 2; ++r) {
    sum[r] = quadReduce(k, done[2 + r], /*max=*/false);
    // A row without visible keys (only padding rows) outputs zeros.
    Value positive = cmpF(k, arith::CmpFPredicate::OGT, sum[r], zero);
    inverse[r] = select(k, positive, k.div(k.f32(1.0), select(k, positive, sum[r], k.f32(1.0))),
                        zero);
  }
  for (Frag &f : o)
    for (int i = 0; i < 4; ++i)
      f[i] = k.mul(f[i], inverse[i / 2]);
  storeRows(w, o, k.f32(1.0), Value(), args("y"));
  // lse[bh * T + i] = m + log l (FLT_MAX for a row without visible keys, so
  // that exp(s - lse) = 0; only padding rows have none, and they are not
  // stored).
  for (int r = 0; r < 2; ++r) {
    Value positive = cmpF(k, arith::CmpFPredicate::OGT, sum[r], zero);
    Value lse = select(k, positive, k.add(done[r], logF(k, select(k, positive, sum[r],
                                                                    k.f32(1.0)))),
                       k.f32(FLT_MAX));
    Value writer = andI(k, w.inRange(rows[r]), cmpI(k, Pred::eq, w.tig, k.i64(0)));
    k.ifThen(writer, [&] { k.store(lse, args("lse"), k.add(k.mul(w.bh, w.tokens), rows[r])); });
  }
}

//===----------------------------------------------------------------------===//
// Backward: dK/dV and dQ
//===----------------------------------------------------------------------===//

/// stat[bh * T + token] (0 for token >= T): the forward's lse or delta.
Value loadStat(Warps &w, Value stat, Value token) {
  KernelBuilder &k = w.k;
  Value v = k.load(stat, k.add(k.mul(w.bh, w.tokens), w.clamp(token)));
  return select(k, w.inRange(token), v, k.f32(0.0));
}

/// P = exp(scale s - lse) where visible (else 0) and dS = P (dP - delta),
/// elementwise on C fragments.
void softmaxGrad(Warps &w, Frag &s, Frag &dp, const std::array<Value, 4> &visible,
                 const std::array<Value, 4> &lse, const std::array<Value, 4> &delta) {
  KernelBuilder &k = w.k;
  for (int i = 0; i < 4; ++i) {
    Value p = select(k, visible[i], expF(k, k.sub(k.mul(w.scale, s[i]), lse[i])), k.f32(0.0));
    s[i] = p;
    dp[i] = k.mul(p, k.sub(dp[i], delta[i]));
  }
}

/// A warp owns 16 keys: dV = sum P^T dO and dK = scale sum dS^T Q over the
/// query tiles that see them, 16 queries per step.
void dkdvBody(KernelBuilder &k, const Args &args, int64_t dh) {
  Warps w = makeWarps(k, args, dh);
  Value table = args.optional("table");
  const int64_t featureBlocks = dh / 8;
  TileStager kRows(w, "mma_k_rows", args("k"), table, /*ahead=*/false);
  TileStager vRows(w, "mma_v_rows", args("v"), Value(), /*ahead=*/false);
  TileStager queries(w, "mma_q_tile", args("q"), table, /*ahead=*/false);
  TileStager grads(w, "mma_dy_tile", args("dy"), Value(), /*ahead=*/true);
  Value lseTile = sharedArray(k, "mma_lse_tile", kTile);
  Value deltaTile = sharedArray(k, "mma_delta_tile", kTile);
  Value lseIn = args("lse"), deltaIn = args("delta");

  // Queries before blockStart - lookahead see none of the block's keys.
  Value firstQuery = k.sub(w.blockStart, w.lookahead);
  firstQuery = k.builder().create<arith::MaxSIOp>(k.location(), firstQuery, k.i64(0));
  Value firstTile = divU(k, firstQuery, k.i64(kTile));
  TileLoop loop{w, queries, grads, tilesUpTo(k, w.tokens)};
  loop.prologue(firstTile, {&kRows, &vRows});
  const std::vector<Frag> ka = warpRowFragments(w, kRows.memory);
  const std::vector<Frag> va = warpRowFragments(w, vRows.memory);
  const Value keys[2] = {w.ownRow(0), w.ownRow(1)};

  std::vector<Value> zeros = flatten(std::vector<Frag>(2 * featureBlocks, zeroFrag(k)));
  SmallVector<Value> init(zeros.begin(), zeros.end());
  ValueRange done = k.forLoop(
      firstTile, loop.end, k.i64(1), init, [&](Value t, ValueRange carried) {
        Value start = k.mul(t, k.i64(kTile));
        loop.step(t, [&] {
          k.ifThen(cmpI(k, Pred::slt, w.thread, k.i64(kTile)), [&] {
            Value query = k.add(start, w.thread);
            k.store(loadStat(w, lseIn, query), lseTile, w.thread);
            k.store(loadStat(w, deltaIn, query), deltaTile, w.thread);
          });
        });
        Value qTile = queries.memory, dyTile = grads.buffer(t);
        std::vector<Frag> dk = unflatten(carried, 0, featureBlocks);
        std::vector<Frag> dv = unflatten(carried, 4 * featureBlocks, featureBlocks);
        for (int64_t c = 0; c < kTile / 16; ++c) {
          Frag p[2], ds[2];
          for (int nb = 0; nb < 2; ++nb) {
            const int64_t n0 = 16 * c + 8 * nb; // queries n0 .. n0 + 7 of the tile
            p[nb] = rowsTimesTile(w, ka, qTile, n0);  // S^T
            ds[nb] = rowsTimesTile(w, va, dyTile, n0); // dP^T
            std::array<Value, 4> visible, lse, delta;
            for (int i = 0; i < 4; ++i) {
              Value local = k.add(k.i64(n0), w.fragColumn(i));
              Value query = k.add(start, local);
              visible[i] = andI(k, w.inRange(query), w.visible(query, keys[i / 2]));
              lse[i] = k.load(lseTile, local);
              delta[i] = k.load(deltaTile, local);
            }
            softmaxGrad(w, p[nb], ds[nb], visible, lse, delta);
          }
          accumulateTimesTile(w, dv, toAFragment(k, p[0], p[1]), dyTile, 16 * c);
          accumulateTimesTile(w, dk, toAFragment(k, ds[0], ds[1]), qTile, 16 * c);
        }
        std::vector<Value> next = flatten(dk), flatDv = flatten(dv);
        next.insert(next.end(), flatDv.begin(), flatDv.end());
        return SmallVector<Value>(next.begin(), next.end());
      });
  loop.epilogue();
  storeRows(w, unflatten(done, 0, featureBlocks), w.scale, table, args("dk"));
  storeRows(w, unflatten(done, 4 * featureBlocks, featureBlocks), k.f32(1.0), Value(),
            args("dv"));
}

/// A warp owns 16 queries: dQ = scale sum dS K over the key tiles they see,
/// 16 keys per step.
void dqBody(KernelBuilder &k, const Args &args, int64_t dh) {
  Warps w = makeWarps(k, args, dh);
  Value table = args.optional("table");
  const int64_t featureBlocks = dh / 8;
  TileStager qRows(w, "mma_q_rows", args("q"), table, /*ahead=*/false);
  TileStager dyRows(w, "mma_dy_rows", args("dy"), Value(), /*ahead=*/false);
  TileStager keys(w, "mma_k_tile", args("k"), table, /*ahead=*/false);
  TileStager values(w, "mma_v_tile", args("v"), Value(), /*ahead=*/true);
  TileLoop loop{w, keys, values, tilesUpTo(k, blockKeyEnd(w))};
  loop.prologue(k.i64(0), {&qRows, &dyRows});
  const std::vector<Frag> qa = warpRowFragments(w, qRows.memory);
  const std::vector<Frag> dya = warpRowFragments(w, dyRows.memory);
  const Value rows[2] = {w.ownRow(0), w.ownRow(1)};
  const Value lse[2] = {loadStat(w, args("lse"), rows[0]), loadStat(w, args("lse"), rows[1])};
  const Value delta[2] = {loadStat(w, args("delta"), rows[0]),
                          loadStat(w, args("delta"), rows[1])};
  const Value hasRows = w.warpHasRows(), keyEnd = w.warpKeyEnd();
  const Skip skip = skipOf(Kind::Dq, dh);

  std::vector<Value> zeros = flatten(std::vector<Frag>(featureBlocks, zeroFrag(k)));
  SmallVector<Value> init(zeros.begin(), zeros.end());
  ValueRange done = k.forLoop(
      k.i64(0), loop.end, k.i64(1), init, [&](Value t, ValueRange carried) {
        Value start = k.mul(t, k.i64(kTile));
        loop.step(t, nullptr);
        Value kTileMem = keys.memory, vTileMem = values.buffer(t);
        return unlessRowless(k, skip, hasRows, carried, [&] {
          std::vector<Frag> dq = unflatten(carried, 0, featureBlocks);
          for (int64_t c = 0; c < kTile / 16; ++c) {
            // Keys [start + 16 c, + 16) against the warp's queries.
            Value seen = cmpI(k, Pred::slt, k.add(start, k.i64(16 * c)), keyEnd);
            dq = unlessUnseen(k, skip, seen, dq, [&] {
              std::vector<Frag> sum = dq;
              Frag ds[2];
              for (int nb = 0; nb < 2; ++nb) {
                const int64_t n0 = 16 * c + 8 * nb; // keys n0 .. n0 + 7 of the tile
                Frag s = rowsTimesTile(w, qa, kTileMem, n0);
                ds[nb] = rowsTimesTile(w, dya, vTileMem, n0); // dP
                std::array<Value, 4> visible, rowLse, rowDelta;
                for (int i = 0; i < 4; ++i) {
                  Value key = k.add(start, k.add(k.i64(n0), w.fragColumn(i)));
                  visible[i] = w.visible(rows[i / 2], key);
                  rowLse[i] = lse[i / 2];
                  rowDelta[i] = delta[i / 2];
                }
                softmaxGrad(w, s, ds[nb], visible, rowLse, rowDelta);
              }
              accumulateTimesTile(w, sum, toAFragment(k, ds[0], ds[1]), kTileMem, 16 * c);
              return sum;
            });
          }
          std::vector<Value> next = flatten(dq);
          return SmallVector<Value>(next.begin(), next.end());
        });
      });
  loop.epilogue();
  storeRows(w, unflatten(done, 0, featureBlocks), w.scale, table, args("dq"));
}

/// The parameters a kernel of this family reads or writes only through
/// KernelBuilder::load / store, element by element (stageTile, storeRows):
/// the activations q, k, v, dy and the results y, dq, dk, dv, which a bf16
/// package may store in bf16 (KernelDef::storageParams). lse and delta (f32
/// statistics) and the RoPE table stay f32.
std::vector<unsigned> storageParams(const GpuKernelSpec &spec) {
  std::vector<unsigned> params;
  for (unsigned i = 0; i < spec.params.size(); ++i)
    if (llvm::is_contained({"y", "dq", "dk", "dv", "q", "k", "v", "dy"}, spec.params[i].first))
      params.push_back(i);
  return params;
}

KernelDef mmaKernel(Kind kind, bool rope, int64_t dh) {
  KernelDef def = kindKernel(kernelName(kind, rope, dh), kind, rope ? Enc::Rope : Enc::Plain, dh,
                             kThreads, sharedBytes(kind, dh), {forwardBody, dkdvBody, dqBody});
  def.tensorCores = true;
  def.storageParams = storageParams(def.spec);
  return def;
}

//===----------------------------------------------------------------------===//
// Lowering side (GpuPrecision::BF16 only)
//===----------------------------------------------------------------------===//

/// q [B, T, D] (attentionShape) with a head dim with MMA kernels and a
/// row-tile count within grid.y's limit; no skip mask.
std::optional<AttentionShape> mmaShape(Type q, int64_t heads, pe::MaskKind mask) {
  auto s = attentionShape(q, heads);
  if (mask == pe::MaskKind::Skip || !s || !llvm::is_contained(kHeadDims, s->dh) ||
      ceilDiv(s->tokens, kRows) > 65535)
    return std::nullopt;
  return s;
}

Launch mmaLaunch(const AttentionShape &s, Kind kind, bool rope, std::vector<LaunchArg> args) {
  Launch launch = Launch::kernelCall(kernelName(kind, rope, s.dh), std::move(args));
  launch.grid = rowTileGrid(s, kRows);
  return launch;
}

/// The forward launch: y = result 0 from operands q, k, v[, table].
OpSteps forwardSteps(Operation &op, const AttentionShape &s, bool rope, pe::MaskKind mask,
                     double scale) {
  OpSteps steps;
  std::vector<LaunchArg> front = {A::result(0), forwardLse(op, s, steps), A::operand(0),
                                  A::operand(1), A::operand(2)};
  if (rope)
    front.push_back(A::operand(3));
  steps.launches.push_back(
      mmaLaunch(s, Kind::Forward, rope, concat(std::move(front), sizeArgs(s, mask, scale))));
  return steps;
}

/// The backward launches of attention::gradSteps on the MMA kernels.
OpSteps mmaGradSteps(const AttentionShape &s, bool rope, pe::MaskKind mask, double scale) {
  return gradSteps(rope ? Enc::Rope : Enc::Plain, s, sizeArgs(s, mask, scale), kDeltaKernel,
                   [&](Kind kind, std::vector<LaunchArg> args) {
                     return mmaLaunch(s, kind, rope, std::move(args));
                   });
}

std::optional<OpSteps> lowerAttention(Operation &op) {
  auto attention = cast<pe::AttentionOp>(op);
  auto s = mmaShape(attention.getQ().getType(), int64_t(attention.getHeads()),
                    attention.getMask());
  if (!s || attention.getRel())
    return std::nullopt;
  return forwardSteps(op, *s, false, attention.getMask(),
                      attention.getScale().convertToDouble());
}

std::optional<OpSteps> lowerAttentionGrad(Operation &op) {
  auto grad = cast<pe::AttentionGradOp>(op);
  auto s = mmaShape(grad.getQ().getType(), int64_t(grad.getHeads()), grad.getMask());
  if (!s || grad.getRel())
    return std::nullopt;
  return mmaGradSteps(*s, false, grad.getMask(), grad.getScale().convertToDouble());
}

std::optional<OpSteps> lowerRopeAttention(Operation &op) {
  auto attention = cast<pe::RopeAttentionOp>(op);
  auto s = mmaShape(attention.getQ().getType(), int64_t(attention.getHeads()),
                    attention.getMask());
  if (!s || !ropeTableFits(*s, attention.getTable().getType()))
    return std::nullopt;
  return forwardSteps(op, *s, true, attention.getMask(),
                      attention.getScale().convertToDouble());
}

std::optional<OpSteps> lowerRopeAttentionGrad(Operation &op) {
  auto grad = cast<pe::RopeAttentionGradOp>(op);
  auto s = mmaShape(grad.getQ().getType(), int64_t(grad.getHeads()), grad.getMask());
  if (!s || !ropeTableFits(*s, grad.getTable().getType()))
    return std::nullopt;
  return mmaGradSteps(*s, true, grad.getMask(), grad.getScale().convertToDouble());
}

} // namespace

void appendAttentionMmaKernels(std::vector<KernelDef> &defs) {
  for (bool rope : {false, true})
    for (int64_t dh : kHeadDims)
      for (Kind kind : {Kind::Forward, Kind::DkDv, Kind::Dq})
        defs.push_back(mmaKernel(kind, rope, dh));
  // dy rounded to bf16 as the dQ and dK/dV kernels round it for dP = dO V^T:
  // dS = P (dP - delta) cancels, and an f32 delta against a bf16 dP left the
  // q and k gradients of vit_s_rope 5-20% off the f32 ones.
  KernelDef delta = deltaKernel(kDeltaKernel, pe::AttentionGradOp::getOperationName(),
                                roundedToBf16);
  delta.tensorCores = true; // generated for bf16 packages only, as the kernels above
  delta.storageParams = storageParams(delta.spec); // y, dy
  defs.push_back(std::move(delta));
}

void appendAttentionMmaLowerings(std::vector<OpLowering> &lowerings) {
  // Tried before the f32 attention lowerings of the same ops (benefit 1).
  const GpuPrecision bf16 = GpuPrecision::BF16;
  const int preferred = 1;
  lowerings.push_back(loweringOf<pe::AttentionOp>(lowerAttention, bf16, preferred));
  lowerings.push_back(loweringOf<pe::AttentionGradOp>(lowerAttentionGrad, bf16, preferred));
  lowerings.push_back(loweringOf<pe::RopeAttentionOp>(lowerRopeAttention, bf16, preferred));
  lowerings.push_back(
      loweringOf<pe::RopeAttentionGradOp>(lowerRopeAttentionGrad, bf16, preferred));
}

} // namespace stringc::cudagen
