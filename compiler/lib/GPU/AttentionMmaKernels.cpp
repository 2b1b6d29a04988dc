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
#include "AttentionCommon.h"

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
using Pred = arith::CmpIPredicate;
using A = LaunchArg;
using Args = NamedArgs;
/// An m16n8k16 A operand (4 x i32, 8 bf16) or a C/D accumulator (4 x f32).
using Frag = std::array<Value, 4>;
/// An m16n8k16 B operand (2 x i32, 4 bf16).
using BFrag = std::array<Value, 2>;

constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = 32 * kWarps;
/// Rows a block owns (16 per warp); also the tokens per shared tile.
constexpr int64_t kRows = 16 * kWarps;
constexpr int64_t kTile = kRows;
/// The gradient's delta kernel of this family (attention::deltaKernel, dy
/// rounded to bf16).
constexpr const char *kDeltaKernel = "pe_attention_mma_grad_delta";

/// Halfwords between the tokens of a shared tile (see the file comment).
int64_t tileStride(int64_t dh) { return dh + 8; }

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
// Kernel side: bf16 values, shared tiles, fragments, mma.sync
//===----------------------------------------------------------------------===//

Value i32Const(KernelBuilder &k, int32_t v) { return k.i32(v); }

/// The bf16 nearest (ties to even) to f32 `x`, as its 16 bits in an i32; a
/// NaN becomes the quiet NaN 0x7fc0. Integer arithmetic rather than
/// cvt.rn.bf16: identical results on every GPU and in the host emulator.
Value bf16Bits(KernelBuilder &k, Value x) {
  OpBuilder &b = k.builder();
  Value bits = b.create<arith::BitcastOp>(k.location(), b.getI32Type(), x);
  Value sixteen = i32Const(k, 16);
  Value lsb = andI(k, shrU(k, bits, sixteen), i32Const(k, 1));
  Value rounded = shrU(k, k.add(k.add(bits, i32Const(k, 0x7fff)), lsb), sixteen);
  Value isNan = cmpF(k, arith::CmpFPredicate::UNO, x, x);
  return select(k, isNan, i32Const(k, 0x7fc0), rounded);
}

/// f32 `x` rounded to the nearest bf16 (bf16Bits), as an f32.
Value roundedToBf16(KernelBuilder &k, Value x) {
  Value bits = shl(k, bf16Bits(k, x), i32Const(k, 16));
  return k.builder().create<arith::BitcastOp>(k.location(), k.builder().getF32Type(), bits);
}

/// Two bf16 (16-bit values in i32s) in one register, `low` in the low half.
Value packPair(KernelBuilder &k, Value low, Value high) {
  return orI(k, low, shl(k, high, i32Const(k, 16)));
}
Value packF32Pair(KernelBuilder &k, Value low, Value high) {
  return packPair(k, bf16Bits(k, low), bf16Bits(k, high));
}

/// A generic pointer to a static shared array of `count` bf16 (i16).
Value sharedHalves(KernelBuilder &k, llvm::StringRef name, int64_t count) {
  return sharedArrayOf(k, name, k.builder().getI16Type(), count);
}

Value halfAddress(KernelBuilder &k, Value ptr, Value index) {
  OpBuilder &b = k.builder();
  return b.create<LLVM::GEPOp>(k.location(), LLVM::LLVMPointerType::get(b.getContext()),
                               b.getI16Type(), ptr, ValueRange{index});
}
void storeHalfPair(KernelBuilder &k, Value packed, Value ptr, Value index) {
  k.builder().create<LLVM::StoreOp>(k.location(), packed, halfAddress(k, ptr, index),
                                    /*alignment=*/4);
}

/// ldmatrix.sync.aligned.m8n8.x`count`[.trans].b16 (PTX ISA, "Warp-level
/// matrix load instruction: ldmatrix"): lanes 8 m .. 8 m + 7 give the
/// addresses of rows 0..7 of the 8 x 8 bf16 matrix m, here halfword `index`
/// of the shared tile `ptr` (16-byte aligned); lane l receives in register m
/// (row l / 4, columns 2 (l % 4) and the next) of matrix m, or with
/// `transposed` (rows 2 (l % 4) and the next, column l / 4), the lower
/// element in the low half. `count` is 2 or 4.
SmallVector<Value, 4> ldmatrix(KernelBuilder &k, Value ptr, Value index, unsigned count,
                               bool transposed) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  MLIRContext *context = b.getContext();
  constexpr unsigned kSharedAddressSpace = 3;
  Value row = b.create<LLVM::AddrSpaceCastOp>(
      loc, LLVM::LLVMPointerType::get(context, kSharedAddressSpace), halfAddress(k, ptr, index));
  auto resultType =
      LLVM::LLVMStructType::getLiteral(context, SmallVector<Type>(count, b.getI32Type()));
  Value result = b.create<NVVM::LdMatrixOp>(loc, resultType, row, count,
                                            transposed ? NVVM::MMALayout::col
                                                       : NVVM::MMALayout::row);
  SmallVector<Value, 4> registers;
  for (unsigned m = 0; m < count; ++m)
    registers.push_back(b.create<LLVM::ExtractValueOp>(loc, result, ArrayRef<int64_t>{m}));
  return registers;
}

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

Warps makeWarps(KernelBuilder &k, const Args &args, int64_t dh) {
  Warps w{makeHeadBlock(k, args, dh), {}, {}, {}, {}, {}, {}, {}};
  w.warp = divU(k, w.thread, k.i64(32));
  Value lane = remU(k, w.thread, k.i64(32));
  w.group = divU(k, lane, k.i64(4));
  w.tig = remU(k, lane, k.i64(4));
  w.matrix = divU(k, lane, k.i64(8));
  w.matrixRow = remU(k, lane, k.i64(8));
  w.blockStart = k.mul(k.blockId(gpu::Dimension::y), k.i64(kRows));
  w.warpRow = k.mul(w.warp, k.i64(16));
  return w;
}

/// D = A B + C on the tensor cores (m16n8k16, bf16 A row / B col, f32 C):
/// the intrinsic behind nvvm.mma.sync, called directly. MLIR 19's
/// nvvm.mma.sync verifier wants vector<2xf16> operands for bf16, while
/// LLVM's llvm.nvvm.mma.m16n8k16.row.col.bf16 takes i32 (two bf16 each).
Frag mma(KernelBuilder &k, const Frag &a, const BFrag &b, const Frag &c) {
  OpBuilder &builder = k.builder();
  Location loc = k.location();
  MLIRContext *context = builder.getContext();
  Type f32 = builder.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  SmallVector<Value, 10> operands(a.begin(), a.end());
  operands.append(b.begin(), b.end());
  operands.append(c.begin(), c.end());
  NamedAttribute attributes[] = {
      builder.getNamedAttr("intrin", builder.getStringAttr("llvm.nvvm.mma.m16n8k16.row.col.bf16")),
      builder.getNamedAttr("fastmathFlags",
                           LLVM::FastmathFlagsAttr::get(context, LLVM::FastmathFlags::none))};
  auto call = builder.create<LLVM::CallIntrinsicOp>(loc, TypeRange{resultType}, operands,
                                                    attributes);
  Frag d;
  for (int i = 0; i < 4; ++i)
    d[i] = builder.create<LLVM::ExtractValueOp>(loc, call.getResult(0), ArrayRef<int64_t>{i});
  return d;
}

Frag zeroFrag(KernelBuilder &k) {
  Value zero = k.f32(0.0);
  return {zero, zero, zero, zero};
}

/// The A fragment of the 16 columns held by C fragments `left` (columns
/// 0..7) and `right` (8..15), rounded to bf16.
Frag toAFragment(KernelBuilder &k, const Frag &left, const Frag &right) {
  return {packF32Pair(k, left[0], left[1]), packF32Pair(k, left[2], left[3]),
          packF32Pair(k, right[0], right[1]), packF32Pair(k, right[2], right[3])};
}

/// `op` of `value` over the 4 lanes of a quad (the lanes of one fragment
/// row). All 32 lanes must be active.
Value quadReduce(KernelBuilder &k, Value value, bool max) {
  for (int offset : {1, 2}) {
    auto shuffle = k.builder().create<gpu::ShuffleOp>(k.location(), value, k.i32(offset),
                                                      k.i32(32), gpu::ShuffleMode::XOR);
    value = max ? maxF(k, value, shuffle.getShuffleResult())
                : k.add(value, shuffle.getShuffleResult());
  }
  return value;
}

/// Cooperative load of tokens [start, start + kTile) of x's head slice into
/// the bf16 tile (token c at halfword c * stride), rotated by RoPE when
/// `table` (in f32, before rounding); zeros for tokens >= T. One pair of
/// features per thread and step. The caller puts barriers around it.
void stageTile(Warps &w, Value tile, Value x, Value table, Value start) {
  KernelBuilder &k = w.k;
  const int64_t pairs = w.dh / 2;
  k.forLoop(w.thread, k.i64(kTile * pairs), k.i64(kThreads), {}, [&](Value e, ValueRange) {
    Value c = divU(k, e, k.i64(pairs)), d0 = k.mul(remU(k, e, k.i64(pairs)), k.i64(2));
    Value token = k.add(start, c);
    Value clamped = w.clamp(token), valid = w.inRange(token);
    Value source = k.add(w.at(clamped), d0);
    Value x0 = k.load(x, source), x1 = k.load(x, k.add(source, k.i64(1)));
    if (table) {
      Value pair = k.add(w.tableAt(clamped), d0);
      Value cs = k.load(table, pair), sn = k.load(table, k.add(pair, k.i64(1)));
      Value y0 = k.sub(k.mul(x0, cs), k.mul(x1, sn));
      Value y1 = k.add(k.mul(x0, sn), k.mul(x1, cs));
      x0 = y0;
      x1 = y1;
    }
    Value zero = k.f32(0.0);
    Value packed = packF32Pair(k, select(k, valid, x0, zero), select(k, valid, x1, zero));
    storeHalfPair(k, packed, tile, k.add(k.mul(c, k.i64(tileStride(w.dh))), d0));
    return SmallVector<Value>{};
  });
}

/// cp.async.cg.shared.global of 16 bytes with a source size (PTX ISA,
/// "cp.async"): the 8 bf16 from element `srcIndex` of the bf16 tensor `x`
/// to halfword `dstIndex` of a shared tile, or 8 zeros when `valid` is
/// false (source size 0: nothing is read). Both addresses are 16-byte
/// aligned: tile rows are (dh + 8) halfwords and every tensor starts
/// kDeviceAlignment-aligned with rows of D = heads * dh bf16. The copy lands
/// when the thread waits for its group (waitGroups); other threads see it
/// after the barrier that follows.
void copy16Async(KernelBuilder &k, Value tile, Value dstIndex, Value x, Value srcIndex,
                 Value valid) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  MLIRContext *context = b.getContext();
  constexpr unsigned kGlobal = 1, kShared = 3;
  Value dst = b.create<LLVM::AddrSpaceCastOp>(loc, LLVM::LLVMPointerType::get(context, kShared),
                                              halfAddress(k, tile, dstIndex));
  Value src = b.create<LLVM::AddrSpaceCastOp>(loc, LLVM::LLVMPointerType::get(context, kGlobal),
                                              halfAddress(k, x, srcIndex));
  Value bytes = select(k, valid, k.i32(16), k.i32(0));
  NamedAttribute attributes[] = {
      b.getNamedAttr("intrin", b.getStringAttr("llvm.nvvm.cp.async.cg.shared.global.16.s")),
      b.getNamedAttr("fastmathFlags",
                     LLVM::FastmathFlagsAttr::get(context, LLVM::FastmathFlags::none))};
  b.create<LLVM::CallIntrinsicOp>(loc, TypeRange{}, ValueRange{dst, src, bytes}, attributes);
}

/// cp.async.commit_group: the thread's copies issued since the last one
/// form a group.
void commitGroup(KernelBuilder &k) { k.builder().create<NVVM::CpAsyncCommitGroupOp>(k.location()); }
/// cp.async.wait_group `pending`: the thread's groups but the newest
/// `pending` are complete.
void waitGroups(KernelBuilder &k, uint32_t pending) {
  k.builder().create<NVVM::CpAsyncWaitGroupOp>(k.location(), pending);
}

/// Tokens [start, start + kTile) of the bf16 tensor x's head slice copied
/// into the tile by cp.async (zeros for tokens >= T), 16 bytes a copy: what
/// stageTile writes without a table, without passing through registers.
void copyTileAsync(Warps &w, Value tile, Value x, Value start) {
  KernelBuilder &k = w.k;
  const int64_t chunks = w.dh / 8; // 16-byte copies a token
  k.forLoop(w.thread, k.i64(kTile * chunks), k.i64(kThreads), {}, [&](Value e, ValueRange) {
    Value c = divU(k, e, k.i64(chunks)), d0 = k.mul(remU(k, e, k.i64(chunks)), k.i64(8));
    Value token = k.add(start, c);
    copy16Async(k, tile, k.add(k.mul(c, k.i64(tileStride(w.dh))), d0), x,
                k.add(w.at(w.clamp(token)), d0), w.inRange(token));
    return SmallVector<Value>{};
  });
}

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
  /// Before the loop: the rows tiles (staged by the caller through
  /// `stageRows`) and, when ahead, tile `begin`'s second; then the barrier
  /// after which the rows may be read.
  void prologue(Value begin, const std::function<void()> &stageRows) {
    stageRows();
    if (second.ahead) {
      commitGroup(w.k);
      w.k.ifThen(cmpI(w.k, Pred::slt, begin, end), [&] { second.stage(begin); });
    }
    finishStaging();
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
  void finishStaging() {
    if (anyAsync()) {
      commitGroup(w.k);
      waitGroups(w.k, second.ahead ? 1 : 0);
    }
    barrier(w.k);
  }
};

/// The end of the keys any row of this block sees: min(T, last row +
/// lookahead + 1), the last row being min(T, blockStart + 64) - 1.
Value blockKeyEnd(Warps &w) {
  KernelBuilder &k = w.k;
  Value lastRow = k.sub(minI(k, k.add(w.blockStart, k.i64(kRows)), w.tokens), k.i64(1));
  return minI(k, w.tokens, k.add(k.add(lastRow, w.lookahead), k.i64(1)));
}
Value tilesUpTo(KernelBuilder &k, Value end) {
  return divU(k, k.add(end, k.i64(kTile - 1)), k.i64(kTile));
}

/// The products of the warp's 16 rows (A fragments `rows`, one per 16
/// features) with tokens [n0, n0 + 8) of a tile (features x tokens): the
/// scores (or dP) of 8 columns.
Frag rowsTimesTile(Warps &w, const std::vector<Frag> &rows, Value tile, int64_t n0) {
  Frag c = zeroFrag(w.k);
  for (size_t kc = 0; kc < rows.size(); ++kc)
    c = mma(w.k, rows[kc], w.loadBTransposed(tile, int64_t(16 * kc), n0), c);
  return c;
}

/// acc[nb] += P (16 x 16, A fragment) times rows [k0, k0 + 16) of a tile
/// (tokens x features), for every 8 features nb (dh / 8 is even).
void accumulateTimesTile(Warps &w, std::vector<Frag> &acc, const Frag &p, Value tile,
                         int64_t k0) {
  for (size_t nb = 0; nb < acc.size(); nb += 2) {
    std::array<BFrag, 2> b = w.loadBPair(tile, k0, int64_t(8 * nb));
    for (size_t i = 0; i < 2; ++i)
      acc[nb + i] = mma(w.k, p, b[i], acc[nb + i]);
  }
}

/// The warp's 16 rows of a staged tile as A fragments, per 16 features.
std::vector<Frag> warpRowFragments(Warps &w, Value tile) {
  std::vector<Frag> frags;
  for (int64_t kc = 0; kc < w.dh / 16; ++kc)
    frags.push_back(w.loadA(tile, w.warpRow, 16 * kc));
  return frags;
}

/// Scales the accumulators by `factor`, rotates each pair back by RoPE's
/// transposed rotation at the row's token (when `table`) and stores the
/// rows below T: acc[nb][i] is (row ownRow(i >= 2), feature 8 nb + 2 t + (i & 1)).
void storeRows(Warps &w, const std::vector<Frag> &acc, Value factor, Value table, Value out) {
  KernelBuilder &k = w.k;
  for (int half = 0; half < 2; ++half) {
    Value row = w.ownRow(half);
    k.ifThen(w.inRange(row), [&] {
      Value base = w.at(row);
      for (size_t nb = 0; nb < acc.size(); ++nb) {
        Value d0 = k.add(k.i64(int64_t(8 * nb)), w.fragColumn(0));
        Value x0 = k.mul(factor, acc[nb][2 * half]), x1 = k.mul(factor, acc[nb][2 * half + 1]);
        if (table) {
          Value pair = k.add(w.tableAt(row), d0);
          Value cs = k.load(table, pair), sn = k.load(table, k.add(pair, k.i64(1)));
          Value y0 = k.add(k.mul(x0, cs), k.mul(x1, sn));
          Value y1 = k.sub(k.mul(x1, cs), k.mul(x0, sn));
          x0 = y0;
          x1 = y1;
        }
        k.store(x0, out, k.add(base, d0));
        k.store(x1, out, k.add(base, k.add(d0, k.i64(1))));
      }
    });
  }
}

std::vector<Value> flatten(const std::vector<Frag> &frags) {
  std::vector<Value> values;
  for (const Frag &f : frags)
    values.insert(values.end(), f.begin(), f.end());
  return values;
}
std::vector<Frag> unflatten(ValueRange values, size_t from, size_t count) {
  std::vector<Frag> frags(count);
  for (size_t i = 0; i < count; ++i)
    for (size_t e = 0; e < 4; ++e)
      frags[i][e] = values[from + 4 * i + e];
  return frags;
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
  loop.prologue(k.i64(0), [&] { qRows.stage(divU(k, w.blockStart, k.i64(kTile))); });
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
  loop.prologue(firstTile, [&] {
    Value own = divU(k, w.blockStart, k.i64(kTile));
    kRows.stage(own);
    vRows.stage(own);
  });
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
  loop.prologue(k.i64(0), [&] {
    Value own = divU(k, w.blockStart, k.i64(kTile));
    qRows.stage(own);
    dyRows.stage(own);
  });
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
