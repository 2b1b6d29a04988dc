//===- AttentionMma.h - the tensor-core attention kernels' pieces -*- C++ -*-===//
//
// What the kernels of AttentionMmaKernels.cpp are built from
// (AttentionMmaTiles.cpp): bf16 bits, shared tiles and their staging (through
// registers, or by cp.async a tile ahead), m16n8k16 fragments read by
// ldmatrix, mma.sync, and a block's warps. Private to compiler/lib/CudaGen.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "AttentionCommon.h"

#include <array>
#include <functional>
#include <initializer_list>
#include <vector>

namespace stringc::cudagen::mma {

using mlir::SmallVector;
using mlir::Value;
using mlir::ValueRange;
using attention::HeadBlock;
using Pred = mlir::arith::CmpIPredicate;
using Args = attention::NamedArgs;
/// An m16n8k16 A operand (4 x i32, 8 bf16) or a C/D accumulator (4 x f32).
using Frag = std::array<Value, 4>;
/// An m16n8k16 B operand (2 x i32, 4 bf16).
using BFrag = std::array<Value, 2>;

constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = 32 * kWarps;
/// Rows a block owns (16 per warp); also the tokens per shared tile.
constexpr int64_t kRows = 16 * kWarps;
constexpr int64_t kTile = kRows;

/// Halfwords between the tokens of a shared tile (AttentionMmaKernels.cpp's
/// file comment).
inline int64_t tileStride(int64_t dh) { return dh + 8; }

//===----------------------------------------------------------------------===//
// bf16 values, shared tiles, ldmatrix
//===----------------------------------------------------------------------===//

/// The bf16 nearest (ties to even) to f32 `x`, as its 16 bits in an i32; a
/// NaN becomes the quiet NaN 0x7fc0. Integer arithmetic rather than
/// cvt.rn.bf16: identical results on every GPU and in the host emulator.
Value bf16Bits(KernelBuilder &k, Value x);

/// f32 `x` rounded to the nearest bf16 (bf16Bits), as an f32.
Value roundedToBf16(KernelBuilder &k, Value x);

/// Two bf16 (16-bit values in i32s) in one register, `low` in the low half.
Value packPair(KernelBuilder &k, Value low, Value high);

/// The same of two f32, each rounded to bf16 (bf16Bits).
Value packF32Pair(KernelBuilder &k, Value low, Value high);

/// A generic pointer to a static shared array of `count` bf16 (i16).
Value sharedHalves(KernelBuilder &k, llvm::StringRef name, int64_t count);

/// The address of halfword `index` of `ptr`.
Value halfAddress(KernelBuilder &k, Value ptr, Value index);
/// Stores two packed bf16 (packPair) at halfword `index` of `ptr` (even).
void storeHalfPair(KernelBuilder &k, Value packed, Value ptr, Value index);

/// ldmatrix.sync.aligned.m8n8.x`count`[.trans].b16 (PTX ISA, "Warp-level
/// matrix load instruction: ldmatrix"): lanes 8 m .. 8 m + 7 give the
/// addresses of rows 0..7 of the 8 x 8 bf16 matrix m, here halfword `index`
/// of the shared tile `ptr` (16-byte aligned); lane l receives in register m
/// (row l / 4, columns 2 (l % 4) and the next) of matrix m, or with
/// `transposed` (rows 2 (l % 4) and the next, column l / 4), the lower
/// element in the low half. `count` is 2 or 4.
SmallVector<Value, 4> ldmatrix(KernelBuilder &k, Value ptr, Value index, unsigned count,
                               bool transposed);

//===----------------------------------------------------------------------===//
// A block's warps, fragments and mma.sync
//===----------------------------------------------------------------------===//

/// An MMA attention block (4 warps): a HeadBlock and the lane's place in its
/// warp.
struct Warps : HeadBlock {
  Value warp, group, tig; // warp = thread / 32; group = lane / 4; tig = lane % 4
  Value blockStart;       // blockIdx.y * 64: the block's first own row
  Value warpRow;          // warp * 16: the warp's first row in the block
  Value matrix, matrixRow; // lane / 8, lane % 8: the ldmatrix row this lane addresses

  /// Key `key` is visible to query `query`: key <= query + lookahead and key < T.
  Value visible(Value query, Value key) {
    return andI(k, inRange(key), cmpI(k, Pred::sle, key, k.add(query, lookahead)));
  }
  /// The lane's two fragment rows in the block, as tokens: the warp's row g
  /// and g + 8.
  Value ownRow(int half) { return k.add(k.add(warpStart(), group), k.i64(8 * half)); }
  /// The warp's first row, as a token.
  Value warpStart() { return k.add(blockStart, warpRow); }
  /// Some row of the warp is a token (< T): a warp-uniform condition.
  Value warpHasRows() { return inRange(warpStart()); }
  /// The end of the keys any row of the warp sees: min(T, last row +
  /// lookahead + 1), the last row being min(T, warpStart + 16) - 1.
  Value warpKeyEnd() {
    Value lastRow = k.sub(minI(k, k.add(warpStart(), k.i64(16)), tokens), k.i64(1));
    return minI(k, tokens, k.add(k.add(lastRow, lookahead), k.i64(1)));
  }

  /// Halfword (row, col) of a tile (tokens x features, `tileStride(dh)`
  /// halfwords a row: 16-byte aligned for every head dim, as ldmatrix needs).
  Value tileIndex(Value row, Value col) { return k.add(k.mul(row, k.i64(tileStride(dh))), col); }
  /// The 16 x 16 square of a tile from (row0, col0) as four 8 x 8 matrices
  /// (ldmatrix.x4[.trans]) in the order of an A fragment's registers: rows
  /// +0, +8, +0, +8 and columns +0, +0, +8, +8. Lane l gives row l % 8 of
  /// matrix l / 8.
  SmallVector<Value, 4> loadSquare(Value tile, Value row0, int64_t col0, bool transposed) {
    Value row = k.add(row0, k.add(matrixRow, k.mul(remU(k, matrix, k.i64(2)), k.i64(8))));
    Value col = k.add(k.i64(col0), k.mul(divU(k, matrix, k.i64(2)), k.i64(8)));
    return ldmatrix(k, tile, tileIndex(row, col), 4, transposed);
  }
  /// The m16n8k16 A fragment of rows [row0, row0 + 16) and columns [col0,
  /// col0 + 16) of a tile (ldmatrix.x4).
  Frag loadA(Value tile, Value row0, int64_t col0) {
    SmallVector<Value, 4> r = loadSquare(tile, row0, col0, /*transposed=*/false);
    return {r[0], r[1], r[2], r[3]};
  }
  /// The B fragments (16 x 8: k rows [k0, k0 + 16), n columns n0 and n0 + 8
  /// on) of a tile (tokens k x features n): B register j holds two tokens
  /// of one feature, so the square is read transposed (ldmatrix.x4.trans).
  std::array<BFrag, 2> loadBPair(Value tile, int64_t k0, int64_t n0) {
    SmallVector<Value, 4> r = loadSquare(tile, k.i64(k0), n0, /*transposed=*/true);
    return {BFrag{r[0], r[1]}, BFrag{r[2], r[3]}};
  }
  /// The B fragment of the transposed tile (features k x tokens n) of
  /// features [k0, k0 + 16) and tokens [n0, n0 + 8) (ldmatrix.x2: matrix m
  /// = features k0 + 8 m of the 8 tokens, one token per row as the tile
  /// stores them). One x4 for two feature blocks cost more registers (ptxas,
  /// sm_90: e.g. 105 instead of 96 in the forward at Dh 32).
  BFrag loadBTransposed(Value tile, int64_t k0, int64_t n0) {
    Value m = remU(k, matrix, k.i64(2)); // lanes 16..31: ignored by x2
    Value index = tileIndex(k.add(k.i64(n0), matrixRow), k.add(k.i64(k0), k.mul(m, k.i64(8))));
    SmallVector<Value, 4> r = ldmatrix(k, tile, index, 2, /*transposed=*/false);
    return {r[0], r[1]};
  }
  /// Column of element i of a C fragment in its 8-column block: 2 t + (i & 1).
  Value fragColumn(int i) { return k.add(k.mul(tig, k.i64(2)), k.i64(i & 1)); }
};

/// The Warps of the kernel being built (reads the thread and block ids).
Warps makeWarps(KernelBuilder &k, const Args &args, int64_t dh);

/// D = A B + C on the tensor cores (m16n8k16, bf16 A row / B col, f32 C):
/// the intrinsic behind nvvm.mma.sync, called directly. MLIR 19's
/// nvvm.mma.sync verifier wants vector<2xf16> operands for bf16, while
/// LLVM's llvm.nvvm.mma.m16n8k16.row.col.bf16 takes i32 (two bf16 each).
Frag mma(KernelBuilder &k, const Frag &a, const BFrag &b, const Frag &c);

/// A C fragment of zeros.
Frag zeroFrag(KernelBuilder &k);

/// The A fragment of the 16 columns held by C fragments `left` (columns
/// 0..7) and `right` (8..15), rounded to bf16.
Frag toAFragment(KernelBuilder &k, const Frag &left, const Frag &right);

/// `op` of `value` over the 4 lanes of a quad (the lanes of one fragment
/// row). All 32 lanes must be active.
Value quadReduce(KernelBuilder &k, Value value, bool max);

/// Cooperative load of tokens [start, start + kTile) of x's head slice into
/// the bf16 tile (token c at halfword c * stride), rotated by RoPE when
/// `table` (in f32, before rounding); zeros for tokens >= T. One pair of
/// features per thread and step. The caller puts barriers around it.
void stageTile(Warps &w, Value tile, Value x, Value table, Value start);

/// cp.async.cg.shared.global of 16 bytes with a source size (PTX ISA,
/// "cp.async"): the 8 bf16 from element `srcIndex` of the bf16 tensor `x`
/// to halfword `dstIndex` of a shared tile, or 8 zeros when `valid` is
/// false (source size 0: nothing is read). Both addresses are 16-byte
/// aligned: tile rows are (dh + 8) halfwords and every tensor starts
/// kDeviceAlignment-aligned with rows of D = heads * dh bf16. The copy lands
/// when the thread waits for its group (waitGroups); other threads see it
/// after the barrier that follows.
void copy16Async(KernelBuilder &k, Value tile, Value dstIndex, Value x, Value srcIndex,
                 Value valid);

/// cp.async.commit_group: the thread's copies issued since the last one
/// form a group.
void commitGroup(KernelBuilder &k);

/// cp.async.wait_group `pending`: the thread's groups but the newest
/// `pending` are complete.
void waitGroups(KernelBuilder &k, uint32_t pending);

/// Tokens [start, start + kTile) of the bf16 tensor x's head slice copied
/// into the tile by cp.async (zeros for tokens >= T), 16 bytes a copy: what
/// stageTile writes without a table, without passing through registers.
void copyTileAsync(Warps &w, Value tile, Value x, Value start);

//===----------------------------------------------------------------------===//
// Staging a kernel's tiles
//===----------------------------------------------------------------------===//

/// One shared tile a kernel stages from tensor `x` (rotated by RoPE when
/// `table`): by cp.async when x is stored in bf16 and nothing is applied on
/// the way (the copy is the tile), else through registers (stageTile).
/// `ahead`: the loop copies tile t + 1 while it computes tile t, into the
/// other of two buffers (only a tile copied by cp.async; the others have one
/// buffer and are staged at their step's start).
struct TileStager {
  Warps &w;
  Value x, table;
  Value memory; // one tile, or two when ahead
  bool async, ahead;

  TileStager(Warps &w, llvm::StringRef name, Value x, Value table, bool wantAhead)
      : w(w), x(x), table(table), async(!table && w.k.isBf16(x)), ahead(wantAhead && async) {
    memory = sharedHalves(w.k, ahead ? (name + "_x2").str() : name.str(),
                          (ahead ? 2 : 1) * kTile * tileStride(w.dh));
  }
  /// The buffer of tile `t` (the loop's tile index).
  Value buffer(Value t) {
    if (!ahead)
      return memory;
    Value parity = remU(w.k, t, w.k.i64(2));
    return halfAddress(w.k, memory, w.k.mul(parity, w.k.i64(kTile * tileStride(w.dh))));
  }
  /// Issues tile t's staging (tokens from t * kTile): complete after the
  /// thread's wait for its group (when async) and a barrier.
  void stage(Value t) {
    Value start = w.k.mul(t, w.k.i64(kTile));
    if (async)
      copyTileAsync(w, buffer(t), x, start);
    else
      stageTile(w, buffer(t), x, table, start);
  }
};

/// The other side of a kernel's loop over tiles: `first` (k or q) staged
/// at each step's start, `second` (v or dy) a step ahead when it can be
/// (TileStager::ahead). Every step: a barrier (all warps are done with the
/// previous tile and with the buffer about to be refilled), `first` of tile
/// t, `extra` (dK/dV's lse and delta), `second` of tile t + 1 (or of t),
/// the thread's copies of tile t waited for, a barrier. Copy groups, in
/// issue order: first(t) [+ second(t)], then second(t + 1); wait_group 1
/// completes all but the newest.
struct TileLoop {
  Warps &w;
  TileStager &first, &second;
  Value end; // one past the loop's last tile

  bool anyAsync() const { return first.async || second.async; }
  /// Before the loop: the block's own rows (tile blockStart / kTile of each
  /// of `rows`) and, when ahead, tile `begin`'s second; then the barrier
  /// after which the rows may be read. A rows tile may be copied by
  /// cp.async when first and second are not (a variant storing only dy in
  /// bf16, say), so its copies are waited for here whatever they are.
  void prologue(Value begin, std::initializer_list<TileStager *> rows) {
    Value own = divU(w.k, w.blockStart, w.k.i64(kTile));
    bool rowsAsync = false;
    for (TileStager *tile : rows) {
      tile->stage(own);
      rowsAsync = rowsAsync || tile->async;
    }
    if (second.ahead) {
      commitGroup(w.k);
      w.k.ifThen(cmpI(w.k, Pred::slt, begin, end), [&] { second.stage(begin); });
    }
    finishStaging(rowsAsync);
  }
  /// The step's staging of tile t, ending with the barrier after which its
  /// tiles may be read.
  void step(Value t, const std::function<void()> &extra) {
    barrier(w.k);
    first.stage(t);
    if (extra)
      extra();
    if (second.ahead) {
      commitGroup(w.k);
      Value next = w.k.add(t, w.k.i64(1));
      w.k.ifThen(cmpI(w.k, Pred::slt, next, end), [&] { second.stage(next); });
    } else {
      second.stage(t);
    }
    finishStaging();
  }
  /// After the loop: no copy left in flight (the last step's group of tile
  /// `end` is empty, but a kernel exits with none pending).
  void epilogue() {
    if (anyAsync())
      waitGroups(w.k, 0);
  }

private:
  void finishStaging(bool rowsAsync = false) {
    if (rowsAsync || anyAsync()) {
      commitGroup(w.k);
      waitGroups(w.k, second.ahead ? 1 : 0);
    }
    barrier(w.k);
  }
};

//===----------------------------------------------------------------------===//
// Products of the warp's rows with a tile, and results
//===----------------------------------------------------------------------===//

/// The end of the keys any row of this block sees: min(T, last row +
/// lookahead + 1), the last row being min(T, blockStart + 64) - 1.
Value blockKeyEnd(Warps &w);

Value tilesUpTo(KernelBuilder &k, Value end);

/// The products of the warp's 16 rows (A fragments `rows`, one per 16
/// features) with tokens [n0, n0 + 8) of a tile (features x tokens): the
/// scores (or dP) of 8 columns.
Frag rowsTimesTile(Warps &w, const std::vector<Frag> &rows, Value tile, int64_t n0);

/// acc[nb] += P (16 x 16, A fragment) times rows [k0, k0 + 16) of a tile
/// (tokens x features), for every 8 features nb (dh / 8 is even).
void accumulateTimesTile(Warps &w, std::vector<Frag> &acc, const Frag &p, Value tile,
                         int64_t k0);

/// The warp's 16 rows of a staged tile as A fragments, per 16 features.
std::vector<Frag> warpRowFragments(Warps &w, Value tile);

/// Scales the accumulators by `factor`, rotates each pair back by RoPE's
/// transposed rotation at the row's token (when `table`) and stores the
/// rows below T: acc[nb][i] is (row ownRow(i >= 2), feature 8 nb + 2 t + (i & 1)).
void storeRows(Warps &w, const std::vector<Frag> &acc, Value factor, Value table, Value out);

/// Fragments as a loop's carried values, 4 per fragment, and back (`count`
/// fragments from value `from`).
std::vector<Value> flatten(const std::vector<Frag> &frags);
std::vector<Frag> unflatten(ValueRange values, size_t from, size_t count);

} // namespace stringc::cudagen::mma
