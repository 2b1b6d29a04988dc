//===- AttentionMmaTiles.cpp - the tensor-core attention kernels' pieces --===//
//
// The definitions of AttentionMma.h (the kernels that use them:
// AttentionMmaKernels.cpp; docs/cuda.md, "Tensor-core attention").
//
//===----------------------------------------------------------------------===//
#include "AttentionMma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;

namespace stringc::cudagen::mma {

using namespace attention;

namespace {
Value i32Const(KernelBuilder &k, int32_t v) { return k.i32(v); }
} // namespace

Value bf16Bits(KernelBuilder &k, Value x) {
  OpBuilder &b = k.builder();
  Value bits = b.create<arith::BitcastOp>(k.location(), b.getI32Type(), x);
  Value sixteen = i32Const(k, 16);
  Value lsb = andI(k, shrU(k, bits, sixteen), i32Const(k, 1));
  Value rounded = shrU(k, k.add(k.add(bits, i32Const(k, 0x7fff)), lsb), sixteen);
  Value isNan = cmpF(k, arith::CmpFPredicate::UNO, x, x);
  return select(k, isNan, i32Const(k, 0x7fc0), rounded);
}

Value roundedToBf16(KernelBuilder &k, Value x) {
  Value bits = shl(k, bf16Bits(k, x), i32Const(k, 16));
  return k.builder().create<arith::BitcastOp>(k.location(), k.builder().getF32Type(), bits);
}

Value packPair(KernelBuilder &k, Value low, Value high) {
  return orI(k, low, shl(k, high, i32Const(k, 16)));
}
Value packF32Pair(KernelBuilder &k, Value low, Value high) {
  return packPair(k, bf16Bits(k, low), bf16Bits(k, high));
}

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

Frag toAFragment(KernelBuilder &k, const Frag &left, const Frag &right) {
  return {packF32Pair(k, left[0], left[1]), packF32Pair(k, left[2], left[3]),
          packF32Pair(k, right[0], right[1]), packF32Pair(k, right[2], right[3])};
}

Value quadReduce(KernelBuilder &k, Value value, bool max) {
  for (int offset : {1, 2}) {
    auto shuffle = k.builder().create<gpu::ShuffleOp>(k.location(), value, k.i32(offset),
                                                      k.i32(32), gpu::ShuffleMode::XOR);
    value = max ? maxF(k, value, shuffle.getShuffleResult())
                : k.add(value, shuffle.getShuffleResult());
  }
  return value;
}

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

void commitGroup(KernelBuilder &k) { k.builder().create<NVVM::CpAsyncCommitGroupOp>(k.location()); }
void waitGroups(KernelBuilder &k, uint32_t pending) {
  k.builder().create<NVVM::CpAsyncWaitGroupOp>(k.location(), pending);
}

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

Value blockKeyEnd(Warps &w) {
  KernelBuilder &k = w.k;
  Value lastRow = k.sub(minI(k, k.add(w.blockStart, k.i64(kRows)), w.tokens), k.i64(1));
  return minI(k, w.tokens, k.add(k.add(lastRow, w.lookahead), k.i64(1)));
}
Value tilesUpTo(KernelBuilder &k, Value end) {
  return divU(k, k.add(end, k.i64(kTile - 1)), k.i64(kTile));
}

Frag rowsTimesTile(Warps &w, const std::vector<Frag> &rows, Value tile, int64_t n0) {
  Frag c = zeroFrag(w.k);
  for (size_t kc = 0; kc < rows.size(); ++kc)
    c = mma(w.k, rows[kc], w.loadBTransposed(tile, int64_t(16 * kc), n0), c);
  return c;
}

void accumulateTimesTile(Warps &w, std::vector<Frag> &acc, const Frag &p, Value tile,
                         int64_t k0) {
  for (size_t nb = 0; nb < acc.size(); nb += 2) {
    std::array<BFrag, 2> b = w.loadBPair(tile, k0, int64_t(8 * nb));
    for (size_t i = 0; i < 2; ++i)
      acc[nb + i] = mma(w.k, p, b[i], acc[nb + i]);
  }
}

std::vector<Frag> warpRowFragments(Warps &w, Value tile) {
  std::vector<Frag> frags;
  for (int64_t kc = 0; kc < w.dh / 16; ++kc)
    frags.push_back(w.loadA(tile, w.warpRow, 16 * kc));
  return frags;
}

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

} // namespace stringc::cudagen::mma
