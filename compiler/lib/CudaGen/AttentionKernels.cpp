//===- AttentionKernels.cpp - FlashAttention-style attention kernels ------===//
//
// pe.attention, pe.attention_grad, pe.rope_attention and
// pe.rope_attention_grad on the GPU (docs/cuda.md, "Attention kernels"), in
// the FlashAttention-2 style with f32 FMA math (no tensor cores yet):
//
// - One block per (batch * heads + head, row tile): grid x = B * H, grid y =
//   ceil(T / R) (GridRule::Explicit). Each thread owns one row (a query for
//   the forward, the statistics and dQ kernels, a key for dK/dV); R = 64
//   rows per block for head dims up to 32, 32 for 64.
// - The other side (keys/values, or queries/dO) goes through shared memory in
//   tiles of kTile = 32 tokens, loaded cooperatively and coalesced along the
//   head dimension; every thread then reads the same tile element at once (a
//   broadcast, no bank conflicts).
// - Online softmax: per query row the running maximum m and sum l; each key
//   tile's scores go to a per-thread column of shared memory, then the tile
//   maximum rescales l and the accumulator once per tile. No score matrix is
//   ever written to global memory.
// - Masks: a key j is visible to query i when j <= i + lookahead (T - 1 for
//   `none`, 0 for `causal`), so causal blocks stop at the key tile holding
//   their last query and the dK/dV blocks start at the first query tile that
//   can see their keys. `skip` masks have exactly one key per query: plain
//   gather kernels (pe_attention_skip*, SkipAttentionKernels.cpp), no softmax.
// - The forward writes y and each query row's log-sum-exp lse_i = m + log l
//   (the op's second result in @gradients, a scratch buffer otherwise).
// - Backward (FA2): pe_attention_grad_delta computes delta_i = dy_i . y_i
//   (= sum_j P_ij dP_ij) from the forward's y into a scratch buffer; P is
//   rebuilt as exp(s - lse) from the forward's lse (no second pass over the
//   keys); pe_attention_grad_dkdv (one thread per key, looping over the
//   query tiles) accumulates dK and dV in registers; pe_attention_grad_dq
//   (one thread per query, looping over the key tiles) accumulates dQ. No
//   atomics: every gradient element is summed by one thread in a fixed order.
// - RoPE variants (pe_rope_*): q and k are rotated as they are loaded (the
//   own row in registers, the staged tile as it goes to shared memory) with
//   the table's (cos, sin) of their token; dq and dk are rotated back with
//   the transposed rotation before they are stored.
// - Relative variants (pe_rel_*, `rel` [T, T, Dh, Dh], Dh 16): the staged
//   row enters rotated by R_ij, and a drel kernel follows the gradient
//   (RelativeAttentionKernels.cpp). The lowerings use them only where the
//   batch x head rows kernels (pe_rel_attention_rows_*,
//   RelativeAttentionRows.cpp: R_ij shared by a warp's 32 rows) decline.
//
// Kernels are specialised by head dimension (16, 32, 64): a thread's own
// rows and accumulators are unrolled over it (registers; for Dh = 64 the
// read-only own rows live in a per-thread column of shared memory instead,
// to stay clear of the 255-register limit). Other head dims, `rel` with a
// head dim other than 16 or a skip mask, and grids beyond the launch limits
// are left uncovered.
//
// Integer parameters carry their natural values, 0 included (KernelSet::launch
// skips only a launch whose grid has no block): the mask is the lookahead (0
// or T - 1) and the skip gathers take skip_base itself.
//
//===----------------------------------------------------------------------===//
#include "AttentionF32.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cfloat>
#include <cmath>

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace attention;
using Pred = arith::CmpIPredicate;
using A = LaunchArg;
using Args = NamedArgs;

/// Tokens of the other side staged per shared-memory tile.
constexpr int64_t kTile = 32;

/// Rows (threads) per block.
int64_t rowsPerBlock(int64_t dh) { return dh > 32 ? 32 : 64; }
/// Whether a thread's read-only own rows live in shared memory (else registers).
bool ownRowsShared(int64_t dh) { return dh > 32; }

/// The kernel family of an encoding: pe_attention, pe_rope_attention, pe_rel_attention.
std::string kernelName(Kind kind, Enc enc, int64_t dh) {
  const char *family = enc == Enc::Rope  ? "pe_rope_attention"
                       : enc == Enc::Rel ? "pe_rel_attention"
                                         : "pe_attention";
  return attention::kernelName(family, kind, dh);
}

/// Shared memory of a kernel in floats (checked against the static limit).
int64_t sharedFloats(Kind kind, int64_t dh) {
  const int64_t rows = rowsPerBlock(dh), own = ownRowsShared(dh) ? rows * dh : 0;
  switch (kind) {
  case Kind::Forward:
    return 2 * kTile * dh + kTile * rows + own; // K, V tiles, scores, q
  case Kind::DkDv:
    return 2 * kTile * dh + 2 * kTile + 2 * own; // Q, dO tiles, lse, delta, k, v
  case Kind::Dq:
    return 2 * kTile * dh + 2 * own; // K, V tiles, q, dy
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Kernel side
//===----------------------------------------------------------------------===//

/// An f32 attention block: a HeadBlock whose thread owns one row.
struct Block : HeadBlock {
  int64_t rows;
  Value row;       // tileStart + thread
  Value tileStart; // blockIdx.y * rows

  /// Whether query `query` sees key `key`: key <= query + lookahead.
  Value visible(Value query, Value key) {
    return cmpI(k, Pred::sle, key, k.add(query, lookahead));
  }
  /// The end of the keys a block's queries see: past its last query (tileStart
  /// + rows - 1) + lookahead nothing is visible.
  Value keysEnd() {
    return minI(k, tokens, k.add(k.add(tileStart, k.i64(rows)), lookahead));
  }
};

Block makeBlock(KernelBuilder &k, const Args &args, int64_t dh) {
  Block g{makeHeadBlock(k, args, dh), rowsPerBlock(dh), {}, {}};
  g.tileStart = k.mul(k.blockId(gpu::Dimension::y), k.i64(g.rows));
  g.row = k.add(g.tileStart, g.thread);
  return g;
}

/// A shared-memory load that LLVM may neither hoist out of a loop nor merge
/// with an earlier load of the same element (ld.volatile.shared). For Dh =
/// 64 the own rows and the second reads of a tile row use it: hoisted or
/// reused, they would hold 64 more registers each and push the dK/dV and dQ
/// kernels past 255 registers into local-memory spills.
Value loadStreamed(KernelBuilder &k, Value ptr, Value index) {
  OpBuilder &b = k.builder();
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  Value address = b.create<LLVM::GEPOp>(k.location(), ptrType, b.getF32Type(), ptr,
                                        ValueRange{index});
  return b.create<LLVM::LoadOp>(k.location(), b.getF32Type(), address, /*alignment=*/4,
                                /*isVolatile=*/true);
}

/// The elements of row `base / dh` of a shared tile (`base` a multiple of
/// dh), read for the second time in one step, asked for in order d = 0, 1,
/// ...: one 16-byte load per four (a quarter of the shared-load
/// instructions; on an H200 this did not change the kernels' time, which
/// occupancy bounds), or loadStreamed one by one where each element's
/// register must stay short-lived (Dh 64).
class TileRowReader {
public:
  TileRowReader(KernelBuilder &k, int64_t dh, Value tile, Value base)
      : k(k), dh(dh), tile(tile), base(base) {}
  Value at(int64_t d) {
    if (ownRowsShared(dh))
      return loadStreamed(k, tile, k.add(base, k.i64(d)));
    if (d % 4 == 0)
      four = k.load4(tile, k.add(base, k.i64(d)));
    return four[size_t(d % 4)];
  }

private:
  KernelBuilder &k;
  int64_t dh;
  Value tile, base;
  std::array<Value, 4> four;
};

/// Rotates the pairs (x[2p], x[2p+1]) of `token`'s head slice by the RoPE
/// table's (cos, sin) at [token, h * Dh / 2 + p] (the transpose when
/// `inverse`).
void rotatePairs(Block &g, Value table, Value token, std::vector<Value> &x, bool inverse) {
  KernelBuilder &k = g.k;
  Value base = g.tableAt(token);
  for (int64_t p = 0; p < g.dh / 2; ++p) {
    Value cs = k.load(table, k.add(base, k.i64(2 * p)));
    Value sn = k.load(table, k.add(base, k.i64(2 * p + 1)));
    Value x0 = x[2 * p], x1 = x[2 * p + 1];
    if (!inverse) {
      x[2 * p] = k.sub(k.mul(x0, cs), k.mul(x1, sn));
      x[2 * p + 1] = k.add(k.mul(x0, sn), k.mul(x1, cs));
    } else {
      x[2 * p] = k.add(k.mul(x0, cs), k.mul(x1, sn));
      x[2 * p + 1] = k.sub(k.mul(x1, cs), k.mul(x0, sn));
    }
  }
}

/// `token`'s head slice of x (rotated when `table`), zeros for token >= T.
std::vector<Value> loadHeadRow(Block &g, Value x, Value table, Value token) {
  KernelBuilder &k = g.k;
  Value clamped = g.clamp(token), valid = g.inRange(token);
  Value base = g.at(clamped);
  std::vector<Value> values;
  for (int64_t d = 0; d < g.dh; ++d)
    values.push_back(k.load(x, k.add(base, k.i64(d))));
  if (table)
    rotatePairs(g, table, clamped, values, /*inverse=*/false);
  Value zero = k.f32(0.0);
  for (Value &v : values)
    v = select(k, valid, v, zero);
  return values;
}

void storeHeadRow(Block &g, Value x, Value token, const std::vector<Value> &values) {
  Value base = g.at(token);
  for (int64_t d = 0; d < g.dh; ++d)
    g.k.store(values[d], x, g.k.add(base, g.k.i64(d)));
}

/// A thread's read-only row of Dh values: registers, or its own column
/// [d * rows + thread] of a shared array (written and read by that thread
/// only, so no barrier).
struct OwnRow {
  Block *g = nullptr;
  std::vector<Value> registers;
  Value shared;
  Value get(int64_t d) const {
    if (!shared)
      return registers[d];
    KernelBuilder &k = g->k;
    return loadStreamed(k, shared, k.add(k.i64(d * g->rows), g->thread));
  }
};

OwnRow makeOwnRow(Block &g, std::vector<Value> values, Value sharedColumns) {
  OwnRow row;
  row.g = &g;
  if (!ownRowsShared(g.dh)) {
    row.registers = std::move(values);
    return row;
  }
  row.shared = sharedColumns;
  for (int64_t d = 0; d < g.dh; ++d)
    g.k.store(values[d], sharedColumns, g.k.add(g.k.i64(d * g.rows), g.thread));
  return row;
}

/// Cooperative load of tokens [start, start + kTile) of x's head slice into
/// tile[c * Dh + d] (rotated when `table`; zeros for tokens >= T). The
/// caller puts barriers around it.
void stageTile(Block &g, Value tile, Value x, Value table, Value start) {
  KernelBuilder &k = g.k;
  const int64_t perToken = table ? g.dh / 2 : g.dh; // pairs or elements
  k.forLoop(g.thread, k.i64(kTile * perToken), k.i64(g.rows), {}, [&](Value e, ValueRange) {
    Value c = divU(k, e, k.i64(perToken)), part = remU(k, e, k.i64(perToken));
    Value token = k.add(start, c);
    Value clamped = g.clamp(token), valid = g.inRange(token);
    Value zero = k.f32(0.0);
    Value source = g.at(clamped), dest = k.mul(c, k.i64(g.dh));
    if (!table) {
      Value v = k.load(x, k.add(source, part));
      k.store(select(k, valid, v, zero), tile, k.add(dest, part));
      return SmallVector<Value>{};
    }
    Value d0 = k.mul(part, k.i64(2)), d1 = k.add(d0, k.i64(1));
    Value x0 = k.load(x, k.add(source, d0)), x1 = k.load(x, k.add(source, d1));
    Value pair = g.tableAt(clamped);
    Value cs = k.load(table, k.add(pair, d0)), sn = k.load(table, k.add(pair, d1));
    Value y0 = k.sub(k.mul(x0, cs), k.mul(x1, sn));
    Value y1 = k.add(k.mul(x0, sn), k.mul(x1, cs));
    k.store(select(k, valid, y0, zero), tile, k.add(dest, d0));
    k.store(select(k, valid, y1, zero), tile, k.add(dest, d1));
    return SmallVector<Value>{};
  });
}

/// sum_d row(d) * tile[c * Dh + d] (sequential FMAs).
Value dotWithTile(Block &g, const std::function<Value(int64_t)> &row, Value tile, Value c) {
  KernelBuilder &k = g.k;
  Value base = k.mul(c, k.i64(g.dh));
  Value sum = k.f32(0.0);
  for (int64_t d = 0; d < g.dh; d += 4) { // 16-byte loads; the FMAs in order of d
    std::array<Value, 4> four = k.load4(tile, k.add(base, k.i64(d)));
    for (int64_t i = 0; i < 4; ++i)
      sum = fma(k, row(d + i), four[size_t(i)], sum);
  }
  return sum;
}

/// The forward pass of this thread's query row over the visible key tiles:
/// the running maximum m, sum l and unnormalised output acc (Dh values).
struct RowSoftmax {
  Value m, l;
  std::vector<Value> acc;
};

RowSoftmax forwardRow(Block &g, const Args &args, const OwnRow &q) {
  KernelBuilder &k = g.k;
  Value table = args.optional("table");
  Value rel = args.optional("rel");
  Value kTileMem = sharedArray(k, "attn_k_tile", kTile * g.dh);
  Value vTileMem = sharedArray(k, "attn_v_tile", kTile * g.dh);
  Value scores = sharedArray(k, "attn_scores", kTile * g.rows);
  Value keysEnd = g.keysEnd();
  const Value lowest = k.f32(-FLT_MAX), zero = k.f32(0.0);
  SmallVector<Value> init = {lowest, zero};
  init.append(g.dh, zero);
  ValueRange done = k.forLoop(k.i64(0), keysEnd, k.i64(kTile), init, [&](Value start,
                                                                       ValueRange carried) {
    barrier(k); // the previous tile is no longer read
    stageTile(g, kTileMem, args("k"), table, start);
    stageTile(g, vTileMem, args("v"), Value(), start);
    barrier(k);
    Value count = minI(k, k.i64(kTile), k.sub(keysEnd, start));
    // Scores of the tile into this thread's column; their maximum.
    ValueRange tileMax = k.forLoop(k.i64(0), count, k.i64(1), {lowest}, [&](Value c,
                                                                          ValueRange mx) {
      Value dot;
      if (rel) { // q . (R_ij k_j)
        std::vector<Value> w =
            rotateTileRow(g, rel, g.clamp(g.row), k.add(start, c), kTileMem, c, false);
        dot = k.f32(0.0);
        for (int64_t d = 0; d < g.dh; ++d)
          dot = fma(k, q.get(d), w[d], dot);
      } else {
        dot = dotWithTile(g, [&](int64_t d) { return q.get(d); }, kTileMem, c);
      }
      Value s = k.mul(g.scale, dot);
      k.store(s, scores, k.add(k.mul(c, k.i64(g.rows)), g.thread));
      Value seen = g.visible(g.row, k.add(start, c));
      return SmallVector<Value>{select(k, seen, maxF(k, mx[0], s), mx[0])};
    });
    Value mOld = carried[0];
    Value mNew = maxF(k, mOld, tileMax[0]);
    Value alpha = expF(k, k.sub(mOld, mNew)); // 0 on the first tile (m = -FLT_MAX)
    SmallVector<Value> inner = {k.mul(carried[1], alpha)};
    for (int64_t d = 0; d < g.dh; ++d)
      inner.push_back(k.mul(carried[2 + d], alpha));
    ValueRange next = k.forLoop(k.i64(0), count, k.i64(1), inner, [&](Value c, ValueRange acc) {
      Value s = k.load(scores, k.add(k.mul(c, k.i64(g.rows)), g.thread));
      Value seen = g.visible(g.row, k.add(start, c));
      Value p = select(k, seen, expF(k, k.sub(s, mNew)), zero);
      SmallVector<Value> out = {k.add(acc[0], p)};
      Value base = k.mul(c, k.i64(g.dh));
      for (int64_t d = 0; d < g.dh; d += 4) {
        std::array<Value, 4> v = k.load4(vTileMem, k.add(base, k.i64(d)));
        for (int64_t i = 0; i < 4; ++i)
          out.push_back(fma(k, p, v[size_t(i)], acc[1 + d + i]));
      }
      return out;
    });
    SmallVector<Value> result = {mNew};
    result.append(next.begin(), next.end());
    return result;
  });
  RowSoftmax row{done[0], done[1], {}};
  for (int64_t d = 0; d < g.dh; ++d)
    row.acc.push_back(done[2 + d]);
  return row;
}

/// acc / l, or 0 where no key was visible (l = 0).
std::vector<Value> normalised(Block &g, const RowSoftmax &row) {
  KernelBuilder &k = g.k;
  Value positive = cmpF(k, arith::CmpFPredicate::OGT, row.l, k.f32(0.0));
  Value safeL = select(k, positive, row.l, k.f32(1.0));
  std::vector<Value> out;
  for (Value a : row.acc)
    out.push_back(select(k, positive, k.div(a, safeL), k.f32(0.0)));
  return out;
}

void forwardBody(KernelBuilder &k, const Args &args, int64_t dh) {
  Block g = makeBlock(k, args, dh);
  Value table = args.optional("table");
  Value qShared = ownRowsShared(dh) ? sharedArray(k, "attn_own_q", g.rows * dh) : Value();
  OwnRow q = makeOwnRow(g, loadHeadRow(g, args("q"), table, g.row), qShared);
  RowSoftmax row = forwardRow(g, args, q);
  std::vector<Value> y = normalised(g, row);
  k.ifThen(g.inRange(g.row), [&] {
    storeHeadRow(g, args("y"), g.row, y);
    // lse[bh * T + i] = m + log l. A row with no visible key would get
    // FLT_MAX (exp(s - lse) = 0 in the gradient kernels); with the masks
    // served here every query sees a key.
    Value positive = cmpF(k, arith::CmpFPredicate::OGT, row.l, k.f32(0.0));
    Value safeL = select(k, positive, row.l, k.f32(1.0));
    Value lse = select(k, positive, k.add(row.m, logF(k, safeL)), k.f32(FLT_MAX));
    Value bh = k.blockId(gpu::Dimension::x);
    k.store(lse, args("lse"), k.add(k.mul(bh, g.tokens), g.row));
  });
}

/// Loads stat[bh * T + token] (0 for token >= T): the forward's lse or the
/// delta kernel's row sums.
Value loadStat(Block &g, Value stat, Value token) {
  KernelBuilder &k = g.k;
  Value bh = k.blockId(gpu::Dimension::x);
  Value v = k.load(stat, k.add(k.mul(bh, g.tokens), g.clamp(token)));
  return select(k, g.inRange(token), v, k.f32(0.0));
}

/// dK, dV: one thread per key j, over the query tiles that can see the block's keys.
void dkdvBody(KernelBuilder &k, const Args &args, int64_t dh) {
  Block g = makeBlock(k, args, dh);
  Value table = args.optional("table");
  Value rel = args.optional("rel");
  bool shared = ownRowsShared(dh);
  OwnRow key = makeOwnRow(g, loadHeadRow(g, args("k"), table, g.row),
                          shared ? sharedArray(k, "attn_own_k", g.rows * dh) : Value());
  OwnRow value = makeOwnRow(g, loadHeadRow(g, args("v"), Value(), g.row),
                            shared ? sharedArray(k, "attn_own_v", g.rows * dh) : Value());
  Value qTileMem = sharedArray(k, "attn_q_tile", kTile * dh);
  Value dyTileMem = sharedArray(k, "attn_dy_tile", kTile * dh);
  Value lseTile = sharedArray(k, "attn_lse_tile", kTile);
  Value deltaTile = sharedArray(k, "attn_delta_tile", kTile);
  Value lseIn = args("lse"), deltaIn = args("delta");
  // Query i sees key j when i >= j - lookahead: the block's first key
  // tileStart is seen from query tileStart - lookahead on (rounded down to a
  // tile).
  Value firstQuery = k.sub(g.tileStart, g.lookahead);
  Value zeroI = k.i64(0);
  firstQuery = select(k, cmpI(k, Pred::slt, firstQuery, zeroI), zeroI, firstQuery);
  firstQuery = k.mul(divU(k, firstQuery, k.i64(kTile)), k.i64(kTile));
  const Value zero = k.f32(0.0);
  SmallVector<Value> init(2 * dh, zero); // dk, dv
  ValueRange done = k.forLoop(firstQuery, g.tokens, k.i64(kTile), init, [&](Value start,
                                                                         ValueRange carried) {
    barrier(k);
    stageTile(g, qTileMem, args("q"), table, start);
    stageTile(g, dyTileMem, args("dy"), Value(), start);
    k.forLoop(g.thread, k.i64(kTile), k.i64(g.rows), {}, [&](Value c, ValueRange) {
      Value token = k.add(start, c);
      k.store(loadStat(g, lseIn, token), lseTile, c);
      k.store(loadStat(g, deltaIn, token), deltaTile, c);
      return SmallVector<Value>{};
    });
    barrier(k);
    Value count = minI(k, k.i64(kTile), k.sub(g.tokens, start));
    ValueRange next = k.forLoop(k.i64(0), count, k.i64(1), carried, [&](Value c, ValueRange acc) {
      Value query = k.add(start, c);
      // With rel, q_i enters as u = R_ij^T q_i: s = scale u . k_j, dk_j += scale dS u.
      std::vector<Value> u;
      if (rel)
        u = rotateTileRow(g, rel, g.clamp(g.row), query, qTileMem, c, true);
      Value dot = k.f32(0.0);
      if (rel)
        for (int64_t d = 0; d < dh; ++d)
          dot = fma(k, u[d], key.get(d), dot);
      else
        dot = dotWithTile(g, [&](int64_t d) { return key.get(d); }, qTileMem, c);
      Value s = k.mul(g.scale, dot);
      Value p = select(k, g.visible(query, g.row), expF(k, k.sub(s, k.load(lseTile, c))), zero);
      Value dp = dotWithTile(g, [&](int64_t d) { return value.get(d); }, dyTileMem, c);
      Value ds = k.mul(g.scale, k.mul(p, k.sub(dp, k.load(deltaTile, c))));
      Value base = k.mul(c, k.i64(dh));
      SmallVector<Value> next;
      TileRowReader qRow(k, dh, qTileMem, base), dyRow(k, dh, dyTileMem, base);
      for (int64_t d = 0; d < dh; ++d) // dk_j += scale dS_ij q_i
        next.push_back(fma(k, ds, rel ? u[d] : qRow.at(d), acc[d]));
      for (int64_t d = 0; d < dh; ++d) // dv_j += P_ij dy_i
        next.push_back(fma(k, p, dyRow.at(d), acc[dh + d]));
      return next;
    });
    return SmallVector<Value>(next.begin(), next.end());
  });
  k.ifThen(g.inRange(g.row), [&] {
    std::vector<Value> dk(done.begin(), done.begin() + dh), dv(done.begin() + dh, done.end());
    if (table)
      rotatePairs(g, table, g.row, dk, /*inverse=*/true);
    storeHeadRow(g, args("dk"), g.row, dk);
    storeHeadRow(g, args("dv"), g.row, dv);
  });
}

/// dQ: one thread per query i, over the key tiles it can see.
void dqBody(KernelBuilder &k, const Args &args, int64_t dh) {
  Block g = makeBlock(k, args, dh);
  Value table = args.optional("table");
  Value rel = args.optional("rel");
  bool shared = ownRowsShared(dh);
  OwnRow q = makeOwnRow(g, loadHeadRow(g, args("q"), table, g.row),
                        shared ? sharedArray(k, "attn_own_q", g.rows * dh) : Value());
  OwnRow dy = makeOwnRow(g, loadHeadRow(g, args("dy"), Value(), g.row),
                         shared ? sharedArray(k, "attn_own_dy", g.rows * dh) : Value());
  Value lse = loadStat(g, args("lse"), g.row);
  Value delta = loadStat(g, args("delta"), g.row);
  Value kTileMem = sharedArray(k, "attn_k_tile", kTile * dh);
  Value vTileMem = sharedArray(k, "attn_v_tile", kTile * dh);
  Value keysEnd = g.keysEnd();
  const Value zero = k.f32(0.0);
  SmallVector<Value> init(dh, zero);
  ValueRange done = k.forLoop(k.i64(0), keysEnd, k.i64(kTile), init, [&](Value start,
                                                                       ValueRange carried) {
    barrier(k);
    stageTile(g, kTileMem, args("k"), table, start);
    stageTile(g, vTileMem, args("v"), Value(), start);
    barrier(k);
    Value count = minI(k, k.i64(kTile), k.sub(keysEnd, start));
    ValueRange next = k.forLoop(k.i64(0), count, k.i64(1), carried, [&](Value c, ValueRange acc) {
      Value key = k.add(start, c);
      // With rel, k_j enters as w = R_ij k_j: s = scale q . w, dq_i += scale dS w.
      std::vector<Value> w;
      if (rel)
        w = rotateTileRow(g, rel, g.clamp(g.row), key, kTileMem, c, false);
      Value dot = k.f32(0.0);
      if (rel)
        for (int64_t d = 0; d < dh; ++d)
          dot = fma(k, q.get(d), w[d], dot);
      else
        dot = dotWithTile(g, [&](int64_t d) { return q.get(d); }, kTileMem, c);
      Value s = k.mul(g.scale, dot);
      Value p = select(k, g.visible(g.row, key), expF(k, k.sub(s, lse)), zero);
      Value dp = dotWithTile(g, [&](int64_t d) { return dy.get(d); }, vTileMem, c);
      Value dsRaw = k.mul(p, k.sub(dp, delta));
      if (rel) // ds[bh, i, j] = dS_ij (unscaled) for the drel kernel
        k.ifThen(g.inRange(g.row), [&] {
          Value bh = k.blockId(gpu::Dimension::x);
          Value row = k.add(k.mul(bh, g.tokens), g.row);
          k.store(dsRaw, args("ds"), k.add(k.mul(row, g.tokens), key));
        });
      Value ds = k.mul(g.scale, dsRaw);
      Value base = k.mul(c, k.i64(dh));
      SmallVector<Value> next;
      TileRowReader kRow(k, dh, kTileMem, base);
      for (int64_t d = 0; d < dh; ++d) // dq_i += scale dS_ij k_j
        next.push_back(fma(k, ds, rel ? w[d] : kRow.at(d), acc[d]));
      return next;
    });
    return SmallVector<Value>(next.begin(), next.end());
  });
  k.ifThen(g.inRange(g.row), [&] {
    std::vector<Value> dq(done.begin(), done.end());
    if (table)
      rotatePairs(g, table, g.row, dq, /*inverse=*/true);
    storeHeadRow(g, args("dq"), g.row, dq);
  });
}

KernelDef attentionKernel(Kind kind, Enc enc, int64_t dh) {
  return kindKernel(kernelName(kind, enc, dh), kind, enc, dh, rowsPerBlock(dh),
                    sharedFloats(kind, dh) * 4, {forwardBody, dkdvBody, dqBody});
}

//===----------------------------------------------------------------------===//
// Lowering side
//===----------------------------------------------------------------------===//

/// Whether the flash kernels serve this shape: a head dim with kernels and a
/// row-tile count within grid.y's limit.
bool flashServes(const AttentionShape &s) {
  return llvm::is_contained(kHeadDims, s.dh) &&
         ceilDiv(s.tokens, rowsPerBlock(s.dh)) <= 65535;
}

Launch flashLaunch(const AttentionShape &s, Kind kind, Enc enc, std::vector<LaunchArg> args) {
  Launch launch = Launch::kernelCall(kernelName(kind, enc, s.dh), std::move(args));
  launch.grid = rowTileGrid(s, rowsPerBlock(s.dh));
  return launch;
}

/// The backward launches (attention::gradSteps), then for Rel the drel sum.
OpSteps flashGradSteps(const AttentionShape &s, Enc enc, pe::MaskKind mask, double scale) {
  std::vector<LaunchArg> sizes = sizeArgs(s, mask, scale);
  OpSteps steps = gradSteps(enc, s, sizes, "pe_attention_grad_delta",
                            [&](Kind kind, std::vector<LaunchArg> args) {
    return flashLaunch(s, kind, enc, std::move(args));
  });
  if (enc == Enc::Rel)
    steps.launches.push_back(Launch::kernelCall(
        relGradKernelName(s.dh, /*pairMajor=*/false),
        {A::result(3), A::operand(0), A::operand(1), A::scratch(1),
         A::i64(s.tokens * s.tokens * s.dh), A::i64(s.tokens), A::i64(s.width), A::i64(s.heads),
         A::i64(s.batch * s.heads), sizes[3], sizes[4]}));
  return steps;
}

std::optional<OpSteps> lowerAttention(Operation &op) {
  auto attention = cast<pe::AttentionOp>(op);
  auto s = attentionShape(attention.getQ().getType(), int64_t(attention.getHeads()));
  if (!s)
    return std::nullopt;
  const double scale = attention.getScale().convertToDouble();
  if (Value rel = attention.getRel()) {
    if (relRowsFit(*s, rel.getType(), attention.getMask()))
      return relRowsForward(op, *s, sizeArgs(*s, attention.getMask(), scale));
    if (!flashServes(*s) || !relFits(*s, rel.getType(), attention.getMask()))
      return std::nullopt;
    OpSteps steps; // rel with the query's token fastest (rotateTileRow), then the kernel
    steps.scratchBytes.push_back(relLayoutBytes(*s));
    steps.launches.push_back(relLayoutLaunch(*s, A::operand(3), A::scratch(0), false));
    LaunchArg lse = forwardLse(op, *s, steps);
    steps.launches.push_back(flashLaunch(
        *s, Kind::Forward, Enc::Rel,
        concat({A::result(0), lse, A::operand(0), A::operand(1), A::operand(2), A::scratch(0)},
               sizeArgs(*s, attention.getMask(), scale))));
    return steps;
  }
  if (attention.getMask() == pe::MaskKind::Skip)
    return lowerSkipAttention(attention, *s);
  if (!flashServes(*s))
    return std::nullopt;
  OpSteps steps;
  LaunchArg lse = forwardLse(op, *s, steps);
  steps.launches.push_back(flashLaunch(
      *s, Kind::Forward, Enc::Plain,
      concat({A::result(0), lse, A::operand(0), A::operand(1), A::operand(2)},
             sizeArgs(*s, attention.getMask(), scale))));
  return steps;
}

std::optional<OpSteps> lowerAttentionGrad(Operation &op) {
  auto grad = cast<pe::AttentionGradOp>(op);
  auto s = attentionShape(grad.getQ().getType(), int64_t(grad.getHeads()));
  if (!s)
    return std::nullopt;
  if (Value rel = grad.getRel()) {
    if (relRowsFit(*s, rel.getType(), grad.getMask()))
      return relRowsGrad(*s, sizeArgs(*s, grad.getMask(), grad.getScale().convertToDouble()));
    if (!flashServes(*s) || !relFits(*s, rel.getType(), grad.getMask()))
      return std::nullopt;
    return flashGradSteps(*s, Enc::Rel, grad.getMask(), grad.getScale().convertToDouble());
  }
  if (grad.getMask() == pe::MaskKind::Skip)
    return lowerSkipAttentionGrad(grad, *s);
  if (!flashServes(*s))
    return std::nullopt;
  return flashGradSteps(*s, Enc::Plain, grad.getMask(), grad.getScale().convertToDouble());
}

std::optional<OpSteps> lowerRopeAttention(Operation &op) {
  auto attention = cast<pe::RopeAttentionOp>(op);
  auto s = attentionShape(attention.getQ().getType(), int64_t(attention.getHeads()));
  if (!s || attention.getMask() == pe::MaskKind::Skip || !flashServes(*s) ||
      !ropeTableFits(*s, attention.getTable().getType()))
    return std::nullopt;
  OpSteps steps;
  LaunchArg lse = forwardLse(op, *s, steps);
  steps.launches.push_back(flashLaunch(
      *s, Kind::Forward, Enc::Rope,
      concat({A::result(0), lse, A::operand(0), A::operand(1), A::operand(2), A::operand(3)},
             sizeArgs(*s, attention.getMask(), attention.getScale().convertToDouble()))));
  return steps;
}

std::optional<OpSteps> lowerRopeAttentionGrad(Operation &op) {
  auto grad = cast<pe::RopeAttentionGradOp>(op);
  auto s = attentionShape(grad.getQ().getType(), int64_t(grad.getHeads()));
  if (!s || grad.getMask() == pe::MaskKind::Skip || !flashServes(*s) ||
      !ropeTableFits(*s, grad.getTable().getType()))
    return std::nullopt;
  return flashGradSteps(*s, Enc::Rope, grad.getMask(), grad.getScale().convertToDouble());
}

} // namespace

Value attention::fma(KernelBuilder &k, Value a, Value b, Value c) {
  return k.builder().create<LLVM::FMAOp>(k.location(), a.getType(), a, b, c);
}

void appendAttentionKernels(std::vector<KernelDef> &defs) {
  const Kind kinds[] = {Kind::Forward, Kind::DkDv, Kind::Dq};
  for (Enc enc : {Enc::Plain, Enc::Rope})
    for (int64_t dh : kHeadDims)
      for (Kind kind : kinds)
        defs.push_back(attentionKernel(kind, enc, dh));
  for (int64_t dh : kRelHeadDims) {
    for (Kind kind : kinds)
      defs.push_back(attentionKernel(kind, Enc::Rel, dh));
    defs.push_back(relGradKernel(dh, /*pairMajor=*/false));
  }
  defs.push_back(relLayoutKernel());
  defs.push_back(deltaKernel("pe_attention_grad_delta", pe::AttentionGradOp::getOperationName(),
                             nullptr));
  appendSkipKernels(defs);
  appendRelRowsKernels(defs);
}

void appendAttentionLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::AttentionOp>(lowerAttention));
  lowerings.push_back(loweringOf<pe::AttentionGradOp>(lowerAttentionGrad));
  lowerings.push_back(loweringOf<pe::RopeAttentionOp>(lowerRopeAttention));
  lowerings.push_back(loweringOf<pe::RopeAttentionGradOp>(lowerRopeAttentionGrad));
}

} // namespace stringc::cudagen
