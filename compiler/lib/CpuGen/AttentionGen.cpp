//===- AttentionGen.cpp - attention and fused RoPE attention kernels ------===//
//
// pe.attention / pe.attention_grad (masks none, causal, skip; no `rel`) and
// pe.rope_attention / pe.rope_attention_grad (none, causal). q, k, v, dy and
// the results are [d0, T, D] (T and D static), the table [T, D/2, 2]. The
// parallel loop runs over the batch d0 (the package's range can only be a
// constant or the batch, not batch * heads); each iteration does all the
// heads of its batch element, one (b, h) tile [T, Dh] at a time.
//
// Forward, per tile (no T x T matrix: the scores of a group of kGroup = 4
// queries at a time):
//   kT [Dh, T]  = k^T of the head (rotated by the table for rope)
//   qs [T, Dh]  = scale q (rotated)
//   for each group of queries: s_ij = qs_i . kT[:, j] (j < n: all keys, or
//     j <= the group's last query when causal); per query e_ij = exp(s_ij -
//     max_j s_ij) over the keys it sees (0 for the others);
//     y_i = (sum_j e_ij v_j) / sum_j e_ij, and (when the op returns it,
//     in @gradients) lse_i = max_j s_ij + log(sum_j e_ij)
// Backward, per tile, following the reference's attention_grad (the saved
// y and lse operands are not read: P is one pass of products here):
//   P [T, T] = softmax rows as above (hidden keys exactly 0)
//   dv_j = sum_i P_ij dy_i
//   row i: dP_ij = dy_i . vT[:, j]; P_ij <- scale P_ij (dP_ij - sum_l P_il dP_il)
//          (now scale dS, in place), dq_i = sum_j P_ij k_j
//   dk_j = sum_i P_ij q_i
//   rope: q, k rotated as they are loaded; dq, dk turned back by the
//   table's transpose as they are stored.
// Every loop runs over a group of queries (scores, dP, y, dq) or of keys
// (dv, dk) at once, then the rest of T one at a time; each member's result
// is one running sum in a fixed order (d from 0, or j / i from the first),
// the same whatever its group. Both kinds of inner loop are explicit
// vectors. Over keys j (scores, the softmax, dP): blocks of kKeyBlock = 16
// keys as vector<16xf32> (kT / vT padded to a multiple of 16 keys, the
// lanes past the visible keys masked: -inf before the max, exactly 0 after
// exp); max and sum by a fixed halving tree. Over the head width d (y_i,
// dv_j, dq_i, dk_j, the rotations): one vector<Dh x f32> value per head row
// (vector.load / vector.fma / vector.shuffle). Written as scalar loops for
// LLVM's loop vectoriser, the kernels were 2-2.6x slower than the
// runtime's: LLVM fully unrolled the short Dh loop before vectorising and
// kept Dh scalar accumulators, and left the row max as a scalar
// llvm.maximum chain.
// The table is seen as [T, D]: head h's pairs of token t are the Dh floats
// [c0 s0 c1 s1 ..] at column h * Dh, loaded as one vector.
// The scratch tiles are allocas at the function entry (static sizes): one
// set per kernel call, reused by every tile; kernels whose scratch would
// exceed kMaxScratchBytes (the backward's [T, T] P: T > ~220 with Dh = 16)
// stay on the runtime's kernels.
//
// Skip masks (attention / attention_grad only): one visible key per query,
// so the softmax is exactly 1 and the kernel copies rows
// (SkipAttentionGen.cpp).
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

/// Scratch per kernel call (on the stack of the runtime's worker threads).
constexpr int64_t kMaxScratchBytes = 256 * 1024;

/// What a kernel computes, from the op.
struct AttentionOp {
  bool grad = false, rope = false;
  bool lse = false; // a forward op that returns its log-sum-exp
  pe::MaskKind mask = pe::MaskKind::None;
  int64_t heads = 1, skipBase = 0;
  double scale = 1.0;
};

std::optional<AttentionOp> describe(Operation *op) {
  AttentionOp a;
  if (auto fwd = dyn_cast<pe::AttentionOp>(op)) {
    if (fwd.getRel())
      return std::nullopt;
    a.heads = fwd.getHeads();
    a.scale = fwd.getScale().convertToDouble();
    a.mask = fwd.getMask();
    a.skipBase = fwd.getSkipBase().value_or(0);
    a.lse = bool(fwd.getLse());
  } else if (auto bwd = dyn_cast<pe::AttentionGradOp>(op)) {
    if (bwd.getRel())
      return std::nullopt;
    a.grad = true;
    a.heads = bwd.getHeads();
    a.scale = bwd.getScale().convertToDouble();
    a.mask = bwd.getMask();
    a.skipBase = bwd.getSkipBase().value_or(0);
  } else if (auto rope = dyn_cast<pe::RopeAttentionOp>(op)) {
    a.rope = true;
    a.lse = bool(rope.getLse());
    a.heads = rope.getHeads();
    a.scale = rope.getScale().convertToDouble();
    a.mask = rope.getMask();
  } else if (auto ropeGrad = dyn_cast<pe::RopeAttentionGradOp>(op)) {
    a.rope = a.grad = true;
    a.heads = ropeGrad.getHeads();
    a.scale = ropeGrad.getScale().convertToDouble();
    a.mask = ropeGrad.getMask();
  } else {
    return std::nullopt;
  }
  if (a.rope && a.mask == pe::MaskKind::Skip)
    return std::nullopt; // the verifier forbids it; the library reports it
  if (a.mask == pe::MaskKind::Skip && a.skipBase < 0)
    return std::nullopt;
  if (a.mask == pe::MaskKind::Skip && a.lse)
    return std::nullopt; // the runtime's kernels compute a skip row's one score
  return a;
}

/// Keys per block: the scores, the softmax and dP run over keys W at a time
/// as vector<W x f32> (one AVX-512 register; two AVX2 ones); T is padded to
/// a multiple of W in the scratch tiles.
constexpr int64_t kKeyBlock = 16;
int64_t paddedTokens(int64_t T) { return (T + kKeyBlock - 1) / kKeyBlock * kKeyBlock; }

/// Queries (or keys) computed together, a group: each key block of K^T
/// or V^T and each head row loaded feeds one FMA per member, and the
/// members' running sums are independent chains. (One query at a time,
/// with four partial sums over d or over keys, the kernels made 1.5 vector
/// loads per FMA and issued about one FMA a cycle of the two a Zen 3 core
/// can.)
constexpr int64_t kGroup = 4;

/// Geometry and helpers shared by the kernel bodies.
class AttentionBuilder {
public:
  AttentionBuilder(MemrefKernelBuilder &kb, const KernelSpec &spec, const AttentionOp &a)
      : kb(kb), b(kb.b()), loc(kb.loc()), a(a), T(spec.views[0][1]), Tp(paddedTokens(T)),
        D(spec.views[0][2]), Dh(D / a.heads), rowType(VectorType::get({Dh}, b.getF32Type())),
        blockType(VectorType::get({kKeyBlock}, b.getF32Type())) {}

  void build();

private:
  // Index arithmetic.
  Value addi(Value x, Value y) { return b.create<arith::AddIOp>(loc, x, y); }
  Value subi(Value x, Value y) { return b.create<arith::SubIOp>(loc, x, y); }
  Value muli(Value x, int64_t c) { return b.create<arith::MulIOp>(loc, x, kb.index(c)); }
  Value addc(Value x, int64_t c) { return c == 0 ? x : addi(x, kb.index(c)); }
  Value divc(Value x, int64_t c) { return b.create<arith::DivUIOp>(loc, x, kb.index(c)); }

  // Vectors: a head's row (Dh floats, `rowType`) or a block of keys
  // (kKeyBlock floats, `blockType`).
  Value vload(VectorType t, Value m, ValueRange idx) { return b.create<vector::LoadOp>(loc, t, m, idx); }
  void vstore(Value v, Value m, ValueRange idx) { b.create<vector::StoreOp>(loc, v, m, idx); }
  Value splat(VectorType t, Value x) { return b.create<vector::BroadcastOp>(loc, t, x); }
  Value vfma(Value x, Value y, Value acc) { return b.create<vector::FMAOp>(loc, x, y, acc); }
  Value vmul(Value x, Value y) { return b.create<arith::MulFOp>(loc, x, y); }
  Value vsub(Value x, Value y) { return b.create<arith::SubFOp>(loc, x, y); }
  Value vadd(Value x, Value y) { return b.create<arith::AddFOp>(loc, x, y); }
  Value vconst(VectorType t, llvm::ArrayRef<float> values) {
    return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(t, values));
  }
  Value vfill(VectorType t, float x) {
    return vconst(t, std::vector<float>(size_t(t.getNumElements()), x));
  }
  Value shuffle(Value x, int64_t lanes, llvm::function_ref<int64_t(int64_t)> lane) {
    SmallVector<int64_t> mask;
    for (int64_t d = 0; d < lanes; ++d)
      mask.push_back(lane(d));
    return b.create<vector::ShuffleOp>(loc, x, x, mask);
  }
  /// The lanes of `v` combined pairwise, halves at a time (a fixed order).
  Value horizontal(Value v, const std::function<Value(Value, Value)> &combine) {
    for (int64_t w = kKeyBlock; w > 1; w /= 2) {
      Value lo = shuffle(v, w / 2, [](int64_t l) { return l; });
      Value hi = shuffle(v, w / 2, [&](int64_t l) { return l + w / 2; });
      v = combine(lo, hi);
    }
    return b.create<vector::ExtractOp>(loc, v, 0);
  }
  /// A key block of `width` keys (kKeyBlock, or half of it for a last
  /// block, see lastBlockWidth).
  VectorType block(int64_t width) { return VectorType::get({width}, b.getF32Type()); }
  /// Lanes of the key block at j0 that are visible keys (j0 + l < n).
  Value blockMask(Value j0, Value n, int64_t width = kKeyBlock) {
    std::vector<int32_t> lanes;
    for (int32_t l = 0; l < width; ++l)
      lanes.push_back(l);
    auto laneType = VectorType::get({width}, b.getI32Type());
    Value laneIds = b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(laneType, llvm::ArrayRef(lanes)));
    Value left = b.create<arith::IndexCastOp>(loc, b.getI32Type(), subi(n, j0));
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, laneIds,
                                   b.create<vector::BroadcastOp>(loc, laneType, left));
  }
  Value scratch(llvm::ArrayRef<int64_t> shape) {
    return b.create<memref::AllocaOp>(loc, MemRefType::get(shape, b.getF32Type()));
  }
  /// Keys query i sees: T, or i + 1 when causal.
  Value visible(Value i) { return a.mask == pe::MaskKind::Causal ? addc(i, 1) : kb.index(T); }
  /// First query that sees key j: 0, or j when causal.
  Value firstQuery(Value j) { return a.mask == pe::MaskKind::Causal ? j : kb.index(0); }
  /// Keys of the last block of a loop over [0, n): half a block when n is
  /// static and at most half of its last block is visible (T = 50: keys 48
  /// and 49 of 48 .. 63), so that the other half, all padding, is never
  /// computed; a whole block otherwise (and for the causal mask's dynamic n).
  int64_t lastBlockWidth(Value n) {
    std::optional<int64_t> keys = getConstantIntValue(n);
    const int64_t last = keys ? *keys % kKeyBlock : 0;
    return last != 0 && last <= kKeyBlock / 2 ? kKeyBlock / 2 : kKeyBlock;
  }
  /// for each key block covering [0, n): body(j0, width), width the block's
  /// keys (lastBlockWidth for the last one).
  void keyBlocks(Value n, const std::function<void(Value, int64_t)> &body) {
    if (lastBlockWidth(n) == kKeyBlock)
      return kb.loop(kb.index(0), divc(addc(n, kKeyBlock - 1), kKeyBlock),
                     [&](Value jb) { body(muli(jb, kKeyBlock), kKeyBlock); });
    const int64_t whole = *getConstantIntValue(n) / kKeyBlock;
    kb.loop(kb.index(0), kb.index(whole), [&](Value jb) { body(muli(jb, kKeyBlock), kKeyBlock); });
    body(kb.index(whole * kKeyBlock), kKeyBlock / 2);
  }
  /// acc = init (a whole block); for each key block covering [0, n): acc =
  /// body(j0, width, acc), a half block combining into the low half of acc
  /// only. The high half is left as it was, as a whole block of padding
  /// (max with -inf, sums of exact zeros) would have left it: the same bits.
  Value reduceKeyBlocks(Value n, Value init,
                        const std::function<Value(Value, int64_t, Value)> &body) {
    auto whole = [&](Value blocks) {
      return kb.reduce(kb.index(0), blocks, init, [&](Value jb, Value acc) {
        return body(muli(jb, kKeyBlock), kKeyBlock, acc);
      });
    };
    if (lastBlockWidth(n) == kKeyBlock)
      return whole(divc(addc(n, kKeyBlock - 1), kKeyBlock));
    const int64_t blocks = *getConstantIntValue(n) / kKeyBlock, half = kKeyBlock / 2;
    Value acc = whole(kb.index(blocks));
    Value lo = shuffle(acc, half, [](int64_t l) { return l; });
    Value hi = shuffle(acc, half, [&](int64_t l) { return l + half; });
    lo = body(kb.index(blocks * kKeyBlock), half, lo);
    SmallVector<int64_t> both;
    for (int64_t l = 0; l < kKeyBlock; ++l)
      both.push_back(l);
    return b.create<vector::ShuffleOp>(loc, lo, hi, both);
  }

  /// Row t of head h of x ([d0, T, D]): rotated by table row t for rope
  /// (the transpose when `inverse`), as is otherwise.
  Value rotate(Value x, Value t, Value col0, bool inverse);
  Value loadRow(Value x, Value bi, Value t, Value col0) {
    return rotate(vload(rowType, x, {bi, t, col0}), t, col0, false);
  }
  void storeRow(Value row, Value out, Value bi, Value t, Value col0) {
    vstore(rotate(row, t, col0, true), out, {bi, t, col0});
  }
  /// body(first, size) for the groups of kGroup consecutive indices of
  /// [0, T), then for the rest one at a time. Query groups and key groups
  /// are the same, so a key group never starts inside a query group.
  void groups(const std::function<void(Value, int64_t)> &body) {
    const int64_t whole = T / kGroup;
    kb.loop(kb.index(0), kb.index(whole), [&](Value g) { body(muli(g, kGroup), kGroup); });
    kb.loop(kb.index(whole * kGroup), kb.index(T), [&](Value i) { body(i, 1); });
  }
  /// For each member r < members: sum_d a(r, d) * tile[d, j0 .. j0 + W),
  /// a key block, one running sum over d (d = 0 first), the block loaded
  /// once for all members.
  SmallVector<Value> blockProducts(int64_t members, const std::function<Value(int64_t, Value)> &a,
                                   Value tile, Value j0, int64_t width);
  /// blockProducts of the group's members for every key block covering
  /// [0, cover), stored to out[row(r), block].
  void storeBlockProducts(int64_t members, const std::function<Value(int64_t, Value)> &a, Value tile,
                          Value cover, Value out, const std::function<Value(int64_t)> &row) {
    keyBlocks(cover, [&](Value j0, int64_t width) {
      SmallVector<Value> s = blockProducts(members, a, tile, j0, width);
      for (int64_t r = 0; r < members; ++r)
        vstore(s[r], out, {row(r), j0});
    });
  }
  /// For each member r < members: sum over j in [lb, ub) of weight(r, j) *
  /// row(j), a head row, one running sum over j (lb first), each row
  /// loaded once for all members (wide heads: for each chunk of members
  /// whose sums fit in 64 floats, eight AVX2 registers).
  SmallVector<Value> weightedSums(int64_t members, Value lb, Value ub,
                                  const std::function<Value(int64_t, Value)> &weight,
                                  const std::function<Value(Value)> &row);
  /// Head rows of tokens t0 .. t0 + 7 (`rows`, vector<Dh>) transposed into
  /// tile[d, t0 .. t0 + 7] for every d; Dh a multiple of 8. Each 8 x 8 block
  /// by the shuffles of the AVX 8 x 8 transpose (unpack pairs of rows, then
  /// pairs of pairs, then 128-bit halves), one vector store per d: written
  /// lane by lane, the K^T and V^T tiles took 10% of rope_attention_grad.
  void storeTransposed8(llvm::ArrayRef<Value> rows, Value tile, Value t0);
  /// Whether storeTransposed8 applies to this head width.
  bool transposesBy8() const { return Dh % 8 == 0; }
  /// Zeroes columns [T, Tp) of a [Dh, Tp] tile (the padding keys' lanes are
  /// masked, but must not be NaN where they are multiplied by 0).
  void zeroPadding(Value tile) {
    if (Tp == T)
      return;
    kb.loop(kb.index(0), kb.index(Dh), [&](Value d) {
      kb.loop(kb.index(T), kb.index(Tp), [&](Value j) { kb.store(kb.f32(0), tile, {d, j}); });
    });
  }

  /// One query's softmax numerators in place: p[at(j0)] holds its scores
  /// for the key blocks covering [0, cover); keys at or past n (hidden from
  /// it) are -inf before the max and exactly 0 after exp. Returns
  /// 1 / sum_j e_j, and sets *lse to max + log(sum_j e_j) when lse is given.
  Value exponentials(Value p, Value n, Value cover,
                     const std::function<SmallVector<Value>(Value)> &at, Value *lse = nullptr);
  /// Zeroes the key blocks of row i of p ([T, Tp]) past those covering
  /// [0, cover): the later columns' gradient loops read them.
  void zeroBlocksPast(Value p, Value i, Value cover) {
    Value first = divc(addc(cover, kKeyBlock - 1), kKeyBlock);
    kb.loop(first, kb.index(Tp / kKeyBlock), [&](Value jb) {
      vstore(vfill(blockType, 0), p, {i, muli(jb, kKeyBlock)});
    });
  }

  void buildForward();
  void buildBackward();

  MemrefKernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  AttentionOp a;
  int64_t T, Tp, D, Dh;
  VectorType rowType, blockType;
  Value table; // rope only: [T, D], pair p of token t at (2p, 2p + 1)
};

Value AttentionBuilder::rotate(Value x, Value t, Value col0, bool inverse) {
  if (!a.rope)
    return x;
  // Pair p: (x0 c - x1 s, x0 s + x1 c); the transpose: s -> -s. As vectors:
  // x * [c0 c0 c1 c1 ..] + [x1 x0 x3 x2 ..] * [s0 s0 s1 s1 ..] * [-1 1 -1 1 ..].
  Value cs = vload(rowType, table, {t, col0}); // [c0 s0 c1 s1 ..] of this head's pairs
  Value c = shuffle(cs, Dh, [](int64_t d) { return d & ~int64_t(1); });
  Value s = shuffle(cs, Dh, [](int64_t d) { return d | 1; });
  Value swapped = shuffle(x, Dh, [](int64_t d) { return d ^ 1; });
  std::vector<float> sign;
  for (int64_t d = 0; d < Dh; ++d)
    sign.push_back((d % 2 == 0) != inverse ? -1.0f : 1.0f);
  return vfma(x, c, vmul(swapped, vmul(s, vconst(rowType, sign))));
}

void AttentionBuilder::storeTransposed8(llvm::ArrayRef<Value> rows, Value tile, Value t0) {
  auto pick = [&](Value x, Value y, llvm::ArrayRef<int64_t> mask) {
    return b.create<vector::ShuffleOp>(loc, x, y, mask).getResult();
  };
  const int64_t unpackLo[] = {0, 8, 1, 9, 4, 12, 5, 13}, unpackHi[] = {2, 10, 3, 11, 6, 14, 7, 15};
  const int64_t pairsLo[] = {0, 1, 8, 9, 4, 5, 12, 13}, pairsHi[] = {2, 3, 10, 11, 6, 7, 14, 15};
  const int64_t halvesLo[] = {0, 1, 2, 3, 8, 9, 10, 11}, halvesHi[] = {4, 5, 6, 7, 12, 13, 14, 15};
  for (int64_t c0 = 0; c0 < Dh; c0 += 8) {
    SmallVector<Value, 8> r, t(8), u(8);
    for (Value row : rows) // lanes c0 .. c0 + 7 of each token's row
      r.push_back(shuffle(row, 8, [&](int64_t l) { return c0 + l; }));
    for (int p = 0; p < 4; ++p) {
      t[2 * p] = pick(r[2 * p], r[2 * p + 1], unpackLo);
      t[2 * p + 1] = pick(r[2 * p], r[2 * p + 1], unpackHi);
    }
    for (int q = 0; q < 2; ++q) // rows 0-3, then 4-7
      for (int h = 0; h < 2; ++h) {
        u[4 * q + 2 * h] = pick(t[4 * q + h], t[4 * q + h + 2], pairsLo);
        u[4 * q + 2 * h + 1] = pick(t[4 * q + h], t[4 * q + h + 2], pairsHi);
      }
    for (int64_t j = 0; j < 8; ++j) { // column j of the block: lane c0 + j of the 8 tokens
      Value column = pick(u[j % 4], u[j % 4 + 4], j < 4 ? halvesLo : halvesHi);
      vstore(column, tile, {kb.index(c0 + j), t0});
    }
  }
}

SmallVector<Value> AttentionBuilder::blockProducts(int64_t members,
                                                   const std::function<Value(int64_t, Value)> &a,
                                                   Value tile, Value j0, int64_t width) {
  VectorType keysType = block(width);
  SmallVector<Value> zeros(members, vfill(keysType, 0));
  auto loop = b.create<scf::ForOp>(loc, kb.index(0), kb.index(Dh), kb.index(1), zeros);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value d = loop.getInductionVar();
    Value keys = vload(keysType, tile, {d, j0});
    SmallVector<Value> next;
    for (int64_t r = 0; r < members; ++r)
      next.push_back(vfma(splat(keysType, a(r, d)), keys, loop.getRegionIterArgs()[r]));
    b.create<scf::YieldOp>(loc, next);
  }
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> AttentionBuilder::weightedSums(int64_t members, Value lb, Value ub,
                                                  const std::function<Value(int64_t, Value)> &weight,
                                                  const std::function<Value(Value)> &row) {
  const int64_t chunk = std::clamp<int64_t>(64 / Dh, 1, members);
  SmallVector<Value> sums;
  for (int64_t first = 0; first < members; first += chunk) {
    const int64_t count = std::min(chunk, members - first);
    SmallVector<Value> zeros(count, vfill(rowType, 0));
    auto loop = b.create<scf::ForOp>(loc, lb, ub, kb.index(1), zeros);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value j = loop.getInductionVar();
      Value x = row(j);
      SmallVector<Value> next;
      for (int64_t c = 0; c < count; ++c)
        next.push_back(vfma(splat(rowType, weight(first + c, j)), x, loop.getRegionIterArgs()[c]));
      b.create<scf::YieldOp>(loc, next);
    }
    llvm::append_range(sums, loop.getResults());
  }
  return sums;
}

Value AttentionBuilder::exponentials(Value p, Value n, Value cover,
                                     const std::function<SmallVector<Value>(Value)> &at,
                                     Value *lse) {
  // The max of the visible scores (the rest masked to -inf).
  Value maxes = reduceKeyBlocks(cover, vfill(blockType, -INFINITY), [&](Value j0, int64_t w, Value acc) {
    Value s = b.create<arith::SelectOp>(loc, blockMask(j0, n, w), vload(block(w), p, at(j0)),
                                        vfill(block(w), -INFINITY));
    return b.create<arith::MaxNumFOp>(loc, acc, s);
  });
  Value mx = horizontal(maxes, [&](Value x, Value y) { return b.create<arith::MaxNumFOp>(loc, x, y); });
  Value sums = reduceKeyBlocks(cover, vfill(blockType, 0), [&](Value j0, int64_t w, Value acc) {
    Value e = kb.expOfNonPositive(vsub(vload(block(w), p, at(j0)), splat(block(w), mx)));
    e = b.create<arith::SelectOp>(loc, blockMask(j0, n, w), e, vfill(block(w), 0)); // exactly 0 when hidden
    vstore(e, p, at(j0));
    return vadd(acc, e);
  });
  Value sum = horizontal(sums, [&](Value x, Value y) { return vadd(x, y); });
  if (lse)
    *lse = b.create<arith::AddFOp>(loc, mx, b.create<math::LogOp>(loc, sum));
  return kb.div(kb.f32(1), sum);
}

void AttentionBuilder::buildForward() {
  // Operands q, k, v (, table), results y (, lse [d0, heads, T]).
  Value q = kb.arg(0), k = kb.arg(1), v = kb.arg(2);
  if (a.rope)
    table = kb.arg(3);
  Value y = kb.arg(a.rope ? 4 : 3);
  Value lse = a.lse ? kb.arg(a.rope ? 5 : 4) : Value();
  Value kr = scratch({T, Dh}), kT = scratch({Dh, Tp}), qs = scratch({T, Dh});
  Value p = scratch({kGroup, Tp}); // a group's scores, then exponentials
  Value zero = kb.index(0);
  Value scale = splat(rowType, kb.f32(a.scale));
  zeroPadding(kT);
  kb.loop(kb.begin(), kb.end(), [&](Value bi) {
    kb.loop(zero, kb.index(a.heads), [&](Value h) {
      Value col0 = muli(h, Dh);
      // scale * q (rotated) into qs, K^T of the head (rotated): eight
      // tokens at a time by shuffles where Dh allows, the rest token by
      // token.
      auto loadTokens = [&](Value t) {
        vstore(vmul(scale, loadRow(q, bi, t, col0)), qs, {t, zero});
        return loadRow(k, bi, t, col0);
      };
      const int64_t byEight = transposesBy8() ? T / 8 * 8 : 0;
      kb.loop(zero, kb.index(byEight / 8), [&](Value group) {
        Value t0 = muli(group, 8);
        SmallVector<Value, 8> rows;
        for (int64_t r = 0; r < 8; ++r)
          rows.push_back(loadTokens(addc(t0, r)));
        storeTransposed8(rows, kT, t0);
      });
      kb.loop(kb.index(byEight), kb.index(T), [&](Value t) {
        vstore(loadTokens(t), kr, {t, zero});
        kb.loop(zero, kb.index(Dh), [&](Value d) { kb.store(kb.load(kr, {t, d}), kT, {d, t}); });
      });
      // A group of queries i0 ..: their scores over the key blocks the
      // last one sees, each one's exponentials (its hidden keys 0), then
      // y_i = (sum_j e_j v_j) / sum_j e_j.
      groups([&](Value i0, int64_t members) {
        Value cover = visible(addc(i0, members - 1));
        storeBlockProducts(
            members, [&](int64_t r, Value d) { return kb.load(qs, {addc(i0, r), d}); }, kT, cover, p,
            [&](int64_t r) { return kb.index(r); });
        SmallVector<Value> inv;
        for (int64_t r = 0; r < members; ++r) {
          Value rowLse;
          inv.push_back(exponentials(
              p, visible(addc(i0, r)), cover,
              [&](Value j0) { return SmallVector<Value>{kb.index(r), j0}; },
              lse ? &rowLse : nullptr));
          if (lse)
            kb.store(rowLse, lse, {bi, h, addc(i0, r)});
        }
        SmallVector<Value> sums = weightedSums(
            members, zero, cover, [&](int64_t r, Value j) { return kb.load(p, {kb.index(r), j}); },
            [&](Value j) { return vload(rowType, v, {bi, j, col0}); });
        for (int64_t r = 0; r < members; ++r)
          vstore(vmul(sums[r], splat(rowType, inv[r])), y, {bi, addc(i0, r), col0});
      });
    });
  });
  kb.finish();
}

void AttentionBuilder::buildBackward() {
  // Operands q, k, v, y, lse, dy (attention_grad) or q, k, v, table, y,
  // lse, dy (rope_attention_grad); results dq, dk, dv. y and lse unread.
  Value q = kb.arg(0), k = kb.arg(1), v = kb.arg(2);
  if (a.rope)
    table = kb.arg(3);
  unsigned next = (a.rope ? 4 : 3) + 2;
  Value dy = kb.arg(next), dq = kb.arg(next + 1), dk = kb.arg(next + 2), dv = kb.arg(next + 3);
  Value kr = scratch({T, Dh}), kT = scratch({Dh, Tp}), vT = scratch({Dh, Tp});
  Value p = scratch({T, Tp}), dp = scratch({kGroup, Tp}), qs = scratch({T, Dh});
  // Rotated q rows for rope; plain attention reads q itself.
  Value qr = a.rope ? scratch({T, Dh}) : Value();
  Value zero = kb.index(0), tokens = kb.index(T);
  Value scaleF = kb.f32(a.scale);
  Value scaleRow = splat(rowType, scaleF);
  zeroPadding(kT);
  zeroPadding(vT);
  kb.loop(kb.begin(), kb.end(), [&](Value bi) {
    kb.loop(zero, kb.index(a.heads), [&](Value h) {
      Value col0 = muli(h, Dh);
      auto qRow = [&](Value t) {
        return a.rope ? vload(rowType, qr, {t, zero}) : vload(rowType, q, {bi, t, col0});
      };
      // The rotated rows of k (and q) into kr (qr), scale * q into qs, K^T
      // and V^T: eight tokens at a time by shuffles where Dh allows, the
      // rest token by token, lane by lane (the other loop order vectorises
      // into gathers, slow on some CPUs).
      auto loadTokens = [&](Value t) {
        Value kRow = loadRow(k, bi, t, col0), vRow = vload(rowType, v, {bi, t, col0});
        Value qRotated = loadRow(q, bi, t, col0);
        vstore(kRow, kr, {t, zero});
        vstore(vmul(scaleRow, qRotated), qs, {t, zero});
        if (a.rope)
          vstore(qRotated, qr, {t, zero});
        return std::make_pair(kRow, vRow);
      };
      const int64_t byEight = transposesBy8() ? T / 8 * 8 : 0;
      kb.loop(zero, kb.index(byEight / 8), [&](Value group) {
        Value t0 = muli(group, 8);
        SmallVector<Value, 8> kRows, vRows;
        for (int64_t r = 0; r < 8; ++r) {
          auto [kRow, vRow] = loadTokens(addc(t0, r));
          kRows.push_back(kRow);
          vRows.push_back(vRow);
        }
        storeTransposed8(kRows, kT, t0);
        storeTransposed8(vRows, vT, t0);
      });
      kb.loop(kb.index(byEight), tokens, [&](Value t) {
        auto [kRow, vRow] = loadTokens(t);
        for (int64_t d = 0; d < Dh; ++d) {
          kb.store(b.create<vector::ExtractOp>(loc, kRow, d), kT, {kb.index(d), t});
          kb.store(b.create<vector::ExtractOp>(loc, vRow, d), vT, {kb.index(d), t});
        }
      });
      // P, a group of queries at a time: scores over the blocks the last
      // one sees, then each row's softmax (hidden keys exactly 0, and the
      // blocks past the group's 0 too: the column loops below read them).
      groups([&](Value i0, int64_t members) {
        Value cover = visible(addc(i0, members - 1));
        storeBlockProducts(
            members, [&](int64_t r, Value d) { return kb.load(qs, {addc(i0, r), d}); }, kT, cover, p,
            [&](int64_t r) { return addc(i0, r); });
        for (int64_t r = 0; r < members; ++r) {
          Value i = addc(i0, r);
          auto at = [&](Value j0) { return SmallVector<Value>{i, j0}; };
          Value inv = exponentials(p, visible(i), cover, at);
          keyBlocks(cover, [&](Value j0, int64_t w) {
            vstore(vmul(vload(block(w), p, at(j0)), splat(block(w), inv)), p, at(j0));
          });
          if (a.mask == pe::MaskKind::Causal)
            zeroBlocksPast(p, i, cover);
        }
      });
      // dv_j = sum_i P_ij dy_i, a group of keys at a time (causal: from
      // the group's first key, the first query that sees it; P is 0 where
      // hidden).
      groups([&](Value j0, int64_t members) {
        SmallVector<Value> sums = weightedSums(
            members, firstQuery(j0), tokens,
            [&](int64_t r, Value i) { return kb.load(p, {i, addc(j0, r)}); },
            [&](Value i) { return vload(rowType, dy, {bi, i, col0}); });
        for (int64_t r = 0; r < members; ++r)
          vstore(sums[r], dv, {bi, addc(j0, r), col0});
      });
      // A group of queries: dP = dy V^T over the blocks the last one sees;
      // for each row sum_j P_ij dP_ij, then scale dS in place of P; then
      // dq_i = sum_j (scale dS_ij) k_j.
      groups([&](Value i0, int64_t members) {
        Value cover = visible(addc(i0, members - 1));
        storeBlockProducts(
            members, [&](int64_t r, Value d) { return kb.load(dy, {bi, addc(i0, r), addi(col0, d)}); },
            vT, cover, dp, [&](int64_t r) { return kb.index(r); });
        for (int64_t r = 0; r < members; ++r) {
          Value i = addc(i0, r), member = kb.index(r);
          Value dots = reduceKeyBlocks(cover, vfill(blockType, 0), [&](Value j0, int64_t w, Value acc) {
            return vfma(vload(block(w), p, {i, j0}), vload(block(w), dp, {member, j0}), acc);
          });
          Value dot = horizontal(dots, [&](Value x, Value y) { return vadd(x, y); });
          keyBlocks(cover, [&](Value j0, int64_t w) {
            Value ds = vmul(vload(block(w), p, {i, j0}), vsub(vload(block(w), dp, {member, j0}), splat(block(w), dot)));
            vstore(vmul(splat(block(w), scaleF), ds), p, {i, j0});
          });
        }
        SmallVector<Value> sums = weightedSums(
            members, zero, cover, [&](int64_t r, Value j) { return kb.load(p, {addc(i0, r), j}); },
            [&](Value j) { return vload(rowType, kr, {j, zero}); });
        for (int64_t r = 0; r < members; ++r)
          storeRow(sums[r], dq, bi, addc(i0, r), col0);
      });
      // dk_j = sum_i (scale dS_ij) q_i, a group of keys at a time.
      groups([&](Value j0, int64_t members) {
        SmallVector<Value> sums = weightedSums(
            members, firstQuery(j0), tokens,
            [&](int64_t r, Value i) { return kb.load(p, {i, addc(j0, r)}); }, qRow);
        for (int64_t r = 0; r < members; ++r)
          storeRow(sums[r], dk, bi, addc(j0, r), col0);
      });
    });
  });
  kb.finish();
}

void AttentionBuilder::build() { return a.grad ? buildBackward() : buildForward(); }

/// Scratch floats of a kernel (see the builders).
int64_t scratchFloats(const AttentionOp &a, int64_t T, int64_t Dh) {
  const int64_t Tp = paddedTokens(T);
  if (a.mask == pe::MaskKind::Skip)
    return 0;
  if (!a.grad) // kr, kT, qs, p
    return T * Dh + Dh * Tp + T * Dh + kGroup * Tp;
  // kr, kT, vT, p, dp, qs (, qr)
  return T * Dh + 2 * Dh * Tp + T * Tp + kGroup * Tp + T * Dh + (a.rope ? T * Dh : 0);
}

} // namespace

std::vector<KernelSpec> attentionSpecs(Operation *op) {
  std::optional<AttentionOp> a = describe(op);
  if (!a)
    return {};
  std::optional<Shape> x = kernelShape(op->getOperand(0).getType());
  if (!x || x->size() != 3 || a->heads < 1 || (*x)[2] % a->heads != 0)
    return {};
  const int64_t T = (*x)[1], D = (*x)[2], Dh = D / a->heads;
  const Shape table = {T, D / 2, 2};
  const Shape tableView = {T, D}; // pair p of token t at columns 2p, 2p + 1
  if (a->rope && Dh % 2 != 0)
    return {};
  // Every operand and result is x's shape, but the table and the
  // log-sum-exp [d0, heads, T] (the forward's second result; the
  // gradient's operand after y).
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  const size_t tableAt = a->rope ? 3 : types.size();
  const size_t lseAt = a->grad ? (a->rope ? 5 : 4) : (a->lse ? op->getNumOperands() + 1 : types.size());
  const Shape lse = {(*x)[0], a->heads, T};
  KernelSpec spec;
  for (auto [n, t] : llvm::enumerate(types)) {
    std::optional<Shape> s = kernelShape(t);
    const Shape &want = n == tableAt ? table : n == lseAt ? lse : *x;
    if (!s || *s != want)
      return {};
    spec.views.push_back(n == tableAt ? tableView : *s);
  }
  if (scratchFloats(*a, T, Dh) * int64_t(sizeof(float)) > kMaxScratchBytes)
    return {};

  spec.kind = std::string(a->rope ? "rope_" : "") + (a->grad ? "attention_grad" : "attention");
  // Work per batch element: about heads * T^2 * Dh multiply-adds (2-3x in
  // the backward); the runtime's grain per element.
  spec.grain = grainFor(a->heads * T * T * Dh);
  spec.key = spec.kind + "|h" + std::to_string(a->heads) + "|s" +
             llvm::utohexstr(llvm::APFloat(a->scale).bitcastToAPInt().getZExtValue()) + "|m" +
             std::to_string(int(a->mask)) + "|n" + std::to_string(a->skipBase);
  for (const Shape &v : spec.views)
    spec.key += "|" + shapeKey(v);
  return {spec};
}

void buildAttentionKernel(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  const AttentionOp a = *describe(op);
  if (a.mask == pe::MaskKind::Skip)
    return buildSkipAttentionKernel(spec, kb, a.grad, a.heads, a.skipBase);
  AttentionBuilder(kb, spec, a).build();
}

} // namespace stringc::codegen::detail
