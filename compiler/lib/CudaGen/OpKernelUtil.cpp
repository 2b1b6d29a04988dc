//===- OpKernelUtil.cpp - helpers shared by the kernel families ----------===//
#include "OpKernelUtil.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace mlir;

namespace stringc::cudagen {

//===----------------------------------------------------------------------===//
// Kernel side
//===----------------------------------------------------------------------===//

void forBlockStride(KernelBuilder &k, Value n, const std::function<void(Value)> &body) {
  k.forLoop(k.threadId(gpu::Dimension::x), n, k.blockDim(gpu::Dimension::x), {},
            [&](Value i, ValueRange) {
              body(i);
              return SmallVector<Value>{};
            });
}

Value loadI32AsI64(KernelBuilder &k, Value ptr, Value index) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getI32Type(), ptr, ValueRange{index});
  Value value = b.create<LLVM::LoadOp>(loc, b.getI32Type(), address);
  return b.create<arith::ExtSIOp>(loc, b.getI64Type(), value);
}

Value f64(KernelBuilder &k, double value) {
  OpBuilder &b = k.builder();
  return b.create<arith::ConstantOp>(k.location(), b.getF64FloatAttr(value));
}
Value i64ToF64(KernelBuilder &k, Value integer) {
  return k.builder().create<arith::SIToFPOp>(k.location(), k.builder().getF64Type(), integer);
}
Value f32ToF64(KernelBuilder &k, Value value) {
  return k.builder().create<arith::ExtFOp>(k.location(), k.builder().getF64Type(), value);
}
Value f64ToF32(KernelBuilder &k, Value value) {
  return k.builder().create<arith::TruncFOp>(k.location(), k.builder().getF32Type(), value);
}

Value elementAddress(KernelBuilder &k, Type type, Value ptr, Value index) {
  auto ptrType = LLVM::LLVMPointerType::get(k.builder().getContext());
  return k.builder().create<LLVM::GEPOp>(k.location(), ptrType, type, ptr, ValueRange{index});
}
Value loadF64(KernelBuilder &k, Value ptr, Value index) {
  OpBuilder &b = k.builder();
  return b.create<LLVM::LoadOp>(k.location(), b.getF64Type(),
                                elementAddress(k, b.getF64Type(), ptr, index));
}
void storeF64(KernelBuilder &k, Value value, Value ptr, Value index) {
  k.builder().create<LLVM::StoreOp>(k.location(), value,
                                    elementAddress(k, k.builder().getF64Type(), ptr, index));
}
Value sqrtF64(KernelBuilder &k, Value x) { return k.builder().create<math::SqrtOp>(k.location(), x); }
Value cosF64(KernelBuilder &k, Value x) { return k.builder().create<math::CosOp>(k.location(), x); }
Value sinF64(KernelBuilder &k, Value x) { return k.builder().create<math::SinOp>(k.location(), x); }
Value powF64(KernelBuilder &k, Value x, Value y) {
  return k.builder().create<math::PowFOp>(k.location(), x, y);
}

Value cmpI(KernelBuilder &k, arith::CmpIPredicate predicate, Value a, Value b) {
  return k.builder().create<arith::CmpIOp>(k.location(), predicate, a, b);
}
Value select(KernelBuilder &k, Value cond, Value a, Value b) {
  return k.builder().create<arith::SelectOp>(k.location(), cond, a, b);
}
Value remU(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::RemUIOp>(k.location(), a, b);
}
Value divU(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::DivUIOp>(k.location(), a, b);
}
Value minI(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::MinSIOp>(k.location(), a, b);
}
Value andI(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::AndIOp>(k.location(), a, b);
}
Value inRange(KernelBuilder &k, Value v, Value limit) {
  return andI(k, cmpI(k, arith::CmpIPredicate::sge, v, k.i64(0)),
              cmpI(k, arith::CmpIPredicate::slt, v, limit));
}
Value shrU(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::ShRUIOp>(k.location(), a, b);
}
Value shl(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::ShLIOp>(k.location(), a, b);
}
Value orI(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::OrIOp>(k.location(), a, b);
}
Value nanF32(KernelBuilder &k) { return k.f32(std::nan("")); }

Value maxF(KernelBuilder &k, Value a, Value b) {
  return k.builder().create<arith::MaximumFOp>(k.location(), a, b);
}
Value expF(KernelBuilder &k, Value x) { return k.builder().create<math::ExpOp>(k.location(), x); }
Value logF(KernelBuilder &k, Value x) { return k.builder().create<math::LogOp>(k.location(), x); }
Value cmpF(KernelBuilder &k, arith::CmpFPredicate p, Value a, Value b) {
  return k.builder().create<arith::CmpFOp>(k.location(), p, a, b);
}

Value warpMax(KernelBuilder &k, Value value) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  Value width = k.i32(32);
  for (int offset = 16; offset >= 1; offset /= 2) {
    auto shuffle =
        b.create<gpu::ShuffleOp>(loc, value, k.i32(offset), width, gpu::ShuffleMode::XOR);
    value = b.create<arith::MaximumFOp>(loc, value, shuffle.getShuffleResult());
  }
  return value;
}

void barrier(KernelBuilder &k) { k.builder().create<gpu::BarrierOp>(k.location()); }

Value sharedArray(KernelBuilder &k, llvm::StringRef name, int64_t count) {
  return sharedArrayOf(k, name, k.builder().getF32Type(), count);
}

Value sharedArrayOf(KernelBuilder &k, llvm::StringRef name, Type elementType, int64_t count) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  constexpr unsigned kSharedAddressSpace = 3;
  Operation *kernel = b.getInsertionBlock()->getParentOp();
  auto module = kernel->getParentOfType<gpu::GPUModuleOp>();
  auto generic = LLVM::LLVMPointerType::get(b.getContext());
  if (k.dynamicSharedBytes() > 0) {
    // A slice of the kernel's one extern array (PTX: .extern .shared .b8
    // pe_dynamic_shared[]), sized by the launch.
    int64_t offset =
        k.dynamicSharedOffset(name, count * int64_t(elementType.getIntOrFloatBitWidth() / 8));
    constexpr llvm::StringLiteral kDynamic = "pe_dynamic_shared";
    auto dynamic = module.lookupSymbol<LLVM::GlobalOp>(kDynamic);
    if (!dynamic) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      dynamic = b.create<LLVM::GlobalOp>(loc, LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                                         /*isConstant=*/false, LLVM::Linkage::External, kDynamic,
                                         /*value=*/Attribute(), /*alignment=*/16,
                                         kSharedAddressSpace);
    }
    Value base = b.create<LLVM::AddrSpaceCastOp>(
        loc, generic, b.create<LLVM::AddressOfOp>(loc, dynamic).getResult());
    return b.create<LLVM::GEPOp>(loc, generic, b.getI8Type(), base,
                                 ArrayRef<LLVM::GEPArg>{int32_t(offset)});
  }
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto arrayType = LLVM::LLVMArrayType::get(elementType, unsigned(count));
    global = b.create<LLVM::GlobalOp>(loc, arrayType, /*isConstant=*/false,
                                      LLVM::Linkage::Internal, name, /*value=*/Attribute(),
                                      /*alignment=*/16, kSharedAddressSpace);
  }
  Value shared = b.create<LLVM::AddressOfOp>(loc, global);
  return b.create<LLVM::AddrSpaceCastOp>(loc, LLVM::LLVMPointerType::get(b.getContext()),
                                         shared);
}

Value globalThreadX(KernelBuilder &k) {
  return k.add(k.mul(k.blockId(gpu::Dimension::x), k.blockDim(gpu::Dimension::x)),
               k.threadId(gpu::Dimension::x));
}

//===----------------------------------------------------------------------===//
// Column sums
//===----------------------------------------------------------------------===//

namespace {
// A partials block is kColumnBlock columns (one warp, coalesced loads) by
// kRowLanes row lanes: lane y of a chunk adds rows first + y, first + y +
// kRowLanes, ... Many loads in flight per SM is what a column sum needs;
// one thread per column and chunk (the first version) left an H200 at a
// tenth of its bandwidth.
constexpr int64_t kColumnBlock = 32;
constexpr int64_t kRowLanes = 8;
constexpr int64_t kRowUnroll = 4;
// Threads that keep every SM of an H100/H200 busy: 132 SMs x 1024.
constexpr int64_t kFillThreads = 132 * 1024;
constexpr int64_t kWarpSize = 32;
constexpr int64_t kFinishColumnsPerBlock = 4; // one warp per column
// Rounds of chunks whose loads a finishing block has in flight together.
constexpr int64_t kFinishUnroll = 4;
} // namespace

namespace {

/// The finish of a column sum in the block that takes the last ticket of its
/// column group (blockDim (kColumnBlock, kRowLanes), columns c0 .. c0 + 31):
/// the same additions as pe_colsum_finish, so the same bits. Lane l of
/// column c adds partials[g * cols + c] for g = l, l + 32, ... in order from
/// 0 (thread (j, y) makes lanes y, y + 8, y + 16, y + 24 of column c0 + j:
/// coalesced loads, kFinishUnroll rounds of the four lanes' loads in flight
/// together, each lane's additions in turn), the lanes' sums meet in shared
/// memory, and warp y adds columns c0 + y, c0 + y + 8, ... with the xor
/// butterfly of k.warpSum. `store(c, total)` runs on lane 0 of a column
/// c < cols.
void finishColumnGroup(KernelBuilder &k, Value partials, Value cols, Value chunks,
                       const std::function<void(Value, Value)> &store) {
  Value x = k.threadId(gpu::Dimension::x), y = k.threadId(gpu::Dimension::y);
  Value c0 = k.mul(k.blockId(gpu::Dimension::x), k.i64(kColumnBlock));
  Value c = k.add(c0, x);
  Value inside = cmpI(k, arith::CmpIPredicate::slt, c, cols);
  // Padded rows (33 floats): warp y's reads of one column hit 32 banks.
  constexpr int64_t kPitch = kColumnBlock + 1;
  Value sums = sharedArray(k, "colsum_lane_sums", kWarpSize * kPitch);
  constexpr int64_t kLanesPerThread = kWarpSize / kRowLanes;
  // Round i adds chunk lane + 32 i of each of the thread's lanes; a chunk
  // past `chunks` (or a column past `cols`) reads partials[0] and adds
  // nothing.
  Value rounds = divU(k, k.add(chunks, k.i64(kWarpSize - 1)), k.i64(kWarpSize));
  SmallVector<Value> zeros(kLanesPerThread, k.f32(0.0));
  ValueRange laneSums = k.forLoop(
      k.i64(0), rounds, k.i64(kFinishUnroll), zeros, [&](Value i0, ValueRange acc) {
        SmallVector<Value> next(acc.begin(), acc.end());
        for (int64_t u = 0; u < kFinishUnroll; ++u)
          for (int64_t q = 0; q < kLanesPerThread; ++q) {
            Value g = k.add(k.add(y, k.i64(q * kRowLanes)),
                            k.mul(k.add(i0, k.i64(u)), k.i64(kWarpSize)));
            Value in = andI(k, inside, cmpI(k, arith::CmpIPredicate::slt, g, chunks));
            Value v = k.load(partials, select(k, in, k.add(k.mul(g, cols), c), k.i64(0)));
            next[q] = select(k, in, k.add(next[q], v), next[q]);
          }
        return next;
      });
  for (int64_t q = 0; q < kLanesPerThread; ++q)
    k.store(laneSums[q], sums, k.add(k.mul(k.add(y, k.i64(q * kRowLanes)), k.i64(kPitch)), x));
  barrier(k);
  for (int64_t q = 0; q < kColumnBlock / kRowLanes; ++q) {
    Value j = k.add(y, k.i64(q * kRowLanes));
    // Every lane of the warp takes part in the butterfly, in or past `cols`.
    Value total = k.warpSum(k.load(sums, k.add(k.mul(x, k.i64(kPitch)), j)));
    Value column = k.add(c0, j);
    Value writer = andI(k, cmpI(k, arith::CmpIPredicate::eq, x, k.i64(0)),
                        cmpI(k, arith::CmpIPredicate::slt, column, cols));
    k.ifThen(writer, [&] { store(column, total); });
  }
}

} // namespace

void threadFence(KernelBuilder &k) {
  // LLVM 19's NVPTX backend selects no `fence` instruction: the intrinsic.
  k.builder().create<LLVM::CallIntrinsicOp>(k.location(), TypeRange{}, "llvm.nvvm.membar.gl",
                                            ValueRange{});
}

Value atomicAddI32(KernelBuilder &k, Value ptr, Value index, Value value) {
  Value address = elementAddress(k, k.builder().getI32Type(), ptr, index);
  return k.builder().create<LLVM::AtomicRMWOp>(k.location(), LLVM::AtomicBinOp::add, address,
                                                value, LLVM::AtomicOrdering::monotonic);
}

KernelDef columnPartialsKernel(std::string name, llvm::StringRef peOp,
                               std::vector<std::string> ptrInputs,
                               std::vector<std::pair<std::string, ParamKind>> extra,
                               std::function<Value(KernelBuilder &, Value, Value)> value) {
  std::vector<std::pair<std::string, ParamKind>> params = {{"partials", ParamKind::Ptr}};
  for (std::string &in : ptrInputs)
    params.push_back({in, ParamKind::Ptr});
  unsigned inputs = unsigned(ptrInputs.size());
  params.push_back({"rows", ParamKind::I64});
  params.push_back({"cols", ParamKind::I64});
  params.push_back({"chunks", ParamKind::I64});
  for (auto &e : extra)
    params.push_back(e);
  // The finish's parameters (ColumnSumFinish), after the family's own.
  unsigned finish = unsigned(params.size());
  params.push_back({"tickets", ParamKind::Ptr});
  params.push_back({"first", ParamKind::Ptr});
  params.push_back({"second", ParamKind::Ptr});
  params.push_back({"half", ParamKind::I64});
  GpuKernelSpec spec = makeSpec(std::move(name), std::move(peOp), std::move(params),
                             GridRule::Explicit, kColumnBlock, kRowLanes);
  return {spec, [inputs, finish, value](KernelBuilder &k) {
            Value rows = k.arg(inputs + 1), cols = k.arg(inputs + 2), chunks = k.arg(inputs + 3);
            Value lane = k.threadId(gpu::Dimension::x), rowLane = k.threadId(gpu::Dimension::y);
            Value c = globalThreadX(k);
            Value g = k.blockId(gpu::Dimension::y);
            Value inside = cmpI(k, arith::CmpIPredicate::slt, c, cols);
            Value len = divU(k, k.sub(k.add(rows, chunks), k.i64(1)), chunks);
            Value first = minI(k, k.mul(g, len), rows);
            Value last = minI(k, k.add(first, len), rows);
            // A column past `cols` runs no iteration (and reads nothing).
            Value end = select(k, inside, last, first);
            // kRowUnroll of the lane's rows per iteration (r, r + 8, ...):
            // their loads are in flight together (one at a time left an
            // H200 at under half its bandwidth). A row past the chunk reads
            // row r instead and is not added; the sum's order is the lane's
            // rows in turn, as unrolled or not.
            ValueRange sum = k.forLoop(
                k.add(first, rowLane), end, k.i64(kRowLanes * kRowUnroll), {k.f32(0.0)},
                [&](Value r, ValueRange acc) {
                  Value total = acc[0];
                  for (int64_t u = 0; u < kRowUnroll; ++u) {
                    Value row = k.add(r, k.i64(u * kRowLanes));
                    Value inChunk = cmpI(k, arith::CmpIPredicate::slt, row, end);
                    Value v = value(k, select(k, inChunk, row, r), c);
                    total = select(k, inChunk, k.add(total, v), total);
                  }
                  return SmallVector<Value>{total};
                });
            // The row lanes' sums added in lane order: the same bits every run.
            Value lanes = sharedArray(k, "colsum_row_lanes", kRowLanes * kColumnBlock);
            k.store(sum[0], lanes, k.add(k.mul(rowLane, k.i64(kColumnBlock)), lane));
            barrier(k);
            Value writer = cmpI(k, arith::CmpIPredicate::eq, rowLane, k.i64(0));
            k.ifThen(andI(k, writer, inside), [&] {
              Value total = k.load(lanes, lane);
              for (int64_t y = 1; y < kRowLanes; ++y)
                total = k.add(total, k.load(lanes, k.add(k.i64(y * kColumnBlock), lane)));
              k.store(total, k.arg(0), k.add(k.mul(g, cols), c));
            });
            // The last block: every thread fences its partial sums (visible
            // to the whole GPU before the ticket), thread (0, 0) takes this
            // column group's ticket; the block that takes ticket chunks - 1
            // sees every chunk's partials, resets the ticket to 0 for the
            // next launch (or graph replay) and finishes the group.
            threadFence(k);
            barrier(k);
            Value tickets = k.arg(finish), group = k.blockId(gpu::Dimension::x);
            Value isLast = sharedArray(k, "colsum_is_last", 1);
            Value leader = andI(k, cmpI(k, arith::CmpIPredicate::eq, lane, k.i64(0)),
                                cmpI(k, arith::CmpIPredicate::eq, rowLane, k.i64(0)));
            k.ifThen(leader, [&] {
              OpBuilder &b = k.builder();
              Value taken = atomicAddI32(k, tickets, group, b.create<arith::ConstantOp>(
                                                                 k.location(), b.getI32IntegerAttr(1)));
              Value lastTicket = cmpI(k, arith::CmpIPredicate::eq,
                                      b.create<arith::ExtSIOp>(k.location(), b.getI64Type(), taken),
                                      k.sub(chunks, k.i64(1)));
              k.store(select(k, lastTicket, k.f32(1.0), k.f32(0.0)), isLast, k.i64(0));
              k.ifThen(lastTicket, [&] {
                b.create<LLVM::StoreOp>(
                    k.location(),
                    b.create<arith::ConstantOp>(k.location(), b.getI32IntegerAttr(0)).getResult(),
                    elementAddress(k, b.getI32Type(), tickets, group));
              });
            });
            barrier(k);
            // Uniform over the block: every thread reads the same flag.
            Value finishing = cmpF(k, arith::CmpFPredicate::OEQ, k.load(isLast, k.i64(0)),
                                   k.f32(1.0));
            k.ifThen(finishing, [&] {
              threadFence(k);
              Value out1 = k.arg(finish + 1), out2 = k.arg(finish + 2);
              Value half = k.arg(finish + 3);
              finishColumnGroup(k, k.arg(0), cols, chunks, [&](Value col, Value total) {
                k.ifThen(cmpI(k, arith::CmpIPredicate::slt, col, half),
                         [&] { k.store(total, out1, col); });
                k.ifThen(cmpI(k, arith::CmpIPredicate::sge, col, half),
                         [&] { k.store(total, out2, k.sub(col, half)); });
              });
            });
          }};
}

namespace {

/// A finish kernel: one warp per column (blockDim (32, 4), GridRule::Rows
/// over the columns: `cols` is its first i64 parameter).
GpuKernelSpec finishSpec(std::string name, std::vector<std::pair<std::string, ParamKind>> params) {
  return makeSpec(std::move(name), pe::SumToOp::getOperationName(), std::move(params),
                  GridRule::Rows, kWarpSize, kFinishColumnsPerBlock);
}

/// For the column c of this warp (if c < cols): total = sum over g < chunks
/// of partials[g * cols + c], lane l adding g = l, l + 32, ... in order,
/// then the xor butterfly; `body(c, total)` runs on lane 0.
void forFinishColumn(KernelBuilder &k, Value partials, Value cols, Value chunks,
                     const std::function<void(Value, Value)> &body) {
  Value lane = k.threadId(gpu::Dimension::x);
  Value c = k.add(k.mul(k.blockId(gpu::Dimension::x), k.blockDim(gpu::Dimension::y)),
                  k.threadId(gpu::Dimension::y));
  // The test depends on threadIdx.y only: a warp is wholly in or out, so
  // the butterfly sees 32 active lanes.
  k.ifThen(cmpI(k, arith::CmpIPredicate::slt, c, cols), [&] {
    ValueRange sum = k.forLoop(lane, chunks, k.i64(kWarpSize), {k.f32(0.0)},
                               [&](Value g, ValueRange acc) {
                                 return SmallVector<Value>{
                                     k.add(acc[0], k.load(partials, k.add(k.mul(g, cols), c)))};
                               });
    Value total = k.warpSum(sum[0]);
    k.ifThen(cmpI(k, arith::CmpIPredicate::eq, lane, k.i64(0)), [&] { body(c, total); });
  });
}

} // namespace

void appendColumnSumKernels(std::vector<KernelDef> &defs) {
  // x read at r * stride + c: sum_to (stride = cols), a strided token column
  // (class_token_grad's dcls).
  defs.push_back(columnPartialsKernel(
      "pe_colsum_partials", pe::SumToOp::getOperationName(), {"x"}, {{"stride", ParamKind::I64}},
      [](KernelBuilder &k, Value r, Value c) {
        return k.load(k.arg(1), k.add(k.mul(r, k.arg(5)), c));
      }));
  defs.back().storageParams = {1}; // x

  // out[c] = sum_g partials[g * cols + c], one warp per column, lane l
  // adding chunks l, l + 32, ... in order, then the fixed xor butterfly;
  // column c < half to first[c], column half + c to second[c] (layer norm's
  // dgamma and dbeta from pe_layer_norm_grad_fused's partials, whose every
  // block covers every column, so no block of that launch could finish a
  // column group: see finishColumnGroup, which adds the same way).
  defs.push_back({finishSpec("pe_colsum_finish_pair", {{"first", ParamKind::Ptr},
                                                       {"second", ParamKind::Ptr},
                                                       {"partials", ParamKind::Ptr},
                                                       {"cols", ParamKind::I64},
                                                       {"chunks", ParamKind::I64},
                                                       {"half", ParamKind::I64}}),
                  [](KernelBuilder &k) {
                    Value half = k.arg(5);
                    forFinishColumn(k, k.arg(2), k.arg(3), k.arg(4), [&](Value c, Value total) {
                      Value inFirst = cmpI(k, arith::CmpIPredicate::slt, c, half);
                      k.ifThen(inFirst, [&] { k.store(total, k.arg(0), c); });
                      k.ifThen(cmpI(k, arith::CmpIPredicate::sge, c, half),
                               [&] { k.store(total, k.arg(1), k.sub(c, half)); });
                    });
                  }});
}

int64_t columnSumChunks(BatchAffine rows, int64_t cols) {
  // At least kReductionBlocks blocks in all (column blocks times chunks)
  // and about kFillThreads threads; one chunk per row at most when the row
  // count is static; at most 1024 chunks.
  int64_t blocksX = ceilDiv(std::max<int64_t>(cols, 1), kColumnBlock);
  int64_t chunks = std::max(ceilDiv(kFillThreads, blocksX * kColumnBlock * kRowLanes),
                            ceilDiv(kReductionBlocks, blocksX));
  chunks = std::clamp<int64_t>(chunks, 1, 1024);
  if (rows.perBatch == 0)
    chunks = std::max<int64_t>(1, std::min(chunks, rows.constant));
  return chunks;
}

namespace {

/// The one launch of a column sum: `partialsKernel` over (column group,
/// chunk) into a new scratch buffer of chunks x cols partial sums, the last
/// block of each column group finishing it into first / second (columns
/// [0, half) and [half, cols)).
void appendColumnSumLaunch(OpSteps &steps, const std::string &partialsKernel,
                           std::vector<LaunchArg> inputs, BatchAffine rows, int64_t cols,
                           int64_t chunks, std::vector<LaunchArg> extra, LaunchArg first,
                           LaunchArg second, int64_t half) {
  int64_t scratch = int64_t(steps.scratchBytes.size());
  steps.scratchBytes.push_back(BatchAffine::fixed(chunks * cols * 4));
  std::vector<LaunchArg> args = {LaunchArg::scratch(scratch)};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.push_back(LaunchArg::i64(rows));
  args.push_back(LaunchArg::i64(cols));
  args.push_back(LaunchArg::i64(chunks));
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(LaunchArg::tickets());
  args.push_back(first);
  args.push_back(second);
  args.push_back(LaunchArg::i64(half));
  Launch launch = Launch::kernelCall(partialsKernel, std::move(args));
  launch.grid = ExplicitGrid{BatchAffine::fixed(ceilDiv(cols, kColumnBlock)),
                             BatchAffine::fixed(chunks), BatchAffine::fixed(1)};
  steps.launches.push_back(std::move(launch));
}

} // namespace

void appendColumnSum(OpSteps &steps, const std::string &partialsKernel,
                     std::vector<LaunchArg> inputs, BatchAffine rows, int64_t cols,
                     std::vector<LaunchArg> extra, LaunchArg out) {
  appendColumnSumLaunch(steps, partialsKernel, std::move(inputs), rows, cols,
                        columnSumChunks(rows, cols), std::move(extra), out, out, cols);
}

void appendColumnSumPair(OpSteps &steps, const std::string &partialsKernel,
                         std::vector<LaunchArg> inputs, BatchAffine rows, int64_t half,
                         std::vector<LaunchArg> extra, LaunchArg first, LaunchArg second) {
  int64_t cols = 2 * half;
  appendColumnSumLaunch(steps, partialsKernel, std::move(inputs), rows, cols,
                        columnSumChunks(rows, cols), std::move(extra), first, second, half);
}

void appendPlainColumnSum(OpSteps &steps, LaunchArg x, BatchAffine rows, int64_t cols,
                          int64_t stride, LaunchArg out) {
  appendColumnSum(steps, "pe_colsum_partials", {x}, rows, cols, {LaunchArg::i64(stride)}, out);
}

void appendColumnSumTo(OpSteps &steps, LaunchArg x, BatchAffine rows, int64_t cols,
                       LaunchArg out) {
  if (rows.perBatch != 0 || rows.constant > kSingleLaunchRows) {
    appendPlainColumnSum(steps, x, rows, cols, cols, out);
    return;
  }
  // One chunk: each column group's one block finishes its own sums (0 + s
  // and s + 0 are s: a chunk's sum starts from +0, so it is never -0).
  appendColumnSumLaunch(steps, "pe_colsum_partials", {x}, rows, cols, 1, {LaunchArg::i64(cols)},
                        out, out, cols);
}

//===----------------------------------------------------------------------===//
// Lowering side
//===----------------------------------------------------------------------===//

std::optional<std::vector<int64_t>> batchShape(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return std::nullopt;
  std::vector<int64_t> shape(ranked.getShape().begin(), ranked.getShape().end());
  for (size_t i = 0; i < shape.size(); ++i)
    if (ShapedType::isDynamic(shape[i])) {
      if (i != 0)
        return std::nullopt;
      shape[i] = -1;
    }
  return shape;
}

std::optional<std::vector<int64_t>> staticShape(Value v) {
  auto shape = batchShape(v.getType());
  if (!shape || llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return std::nullopt;
  return shape;
}

std::optional<std::pair<int64_t, int64_t>> positionShape(Value pos) {
  auto shape = batchShape(pos.getType());
  if (!shape || shape->size() != 2 || (*shape)[0] <= 0 || (*shape)[1] <= 0)
    return std::nullopt;
  return std::make_pair((*shape)[0], (*shape)[1]);
}

BatchAffine numel(Value v) { return elementCount(v.getType()); }

OpSteps singleLaunch(std::string kernel, std::vector<LaunchArg> args) {
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(std::move(kernel), std::move(args)));
  return steps;
}

std::optional<int64_t> staticProduct(const std::vector<int64_t> &shape, size_t from, size_t to) {
  int64_t product = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i) {
    if (shape[i] < 0)
      return std::nullopt;
    product *= shape[i];
  }
  return product;
}

BatchAffine leadingCount(const std::vector<int64_t> &shape, size_t to) {
  int64_t product = 1;
  bool batch = false;
  for (size_t i = 0; i < to && i < shape.size(); ++i) {
    if (shape[i] < 0)
      batch = true;
    else
      product *= shape[i];
  }
  return batch ? BatchAffine{product, 0} : BatchAffine::fixed(product);
}

BatchAffine operator*(BatchAffine a, int64_t c) { return {a.perBatch * c, a.constant * c}; }

BatchAffine rowsOf(BatchAffine elements, int64_t rowSize) {
  assert(rowSize > 0 && elements.perBatch % rowSize == 0 && elements.constant % rowSize == 0 &&
         "a row size divides the element count");
  return {elements.perBatch / rowSize, elements.constant / rowSize};
}

GpuKernelSpec makeSpec(std::string name, llvm::StringRef peOp,
                    std::vector<std::pair<std::string, ParamKind>> params, GridRule grid,
                    int64_t blockX, int64_t blockY) {
  GpuKernelSpec spec;
  spec.name = std::move(name);
  spec.peOp = peOp.str();
  spec.params = std::move(params);
  spec.grid = grid;
  spec.blockX = blockX;
  spec.blockY = blockY;
  return spec;
}

} // namespace stringc::cudagen
