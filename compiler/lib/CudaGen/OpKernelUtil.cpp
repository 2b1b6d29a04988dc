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
} // namespace

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
  GpuKernelSpec spec = makeSpec(std::move(name), std::move(peOp), std::move(params),
                             GridRule::Explicit, kColumnBlock, kRowLanes);
  return {spec, [inputs, value](KernelBuilder &k) {
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

  // out[c] = (sum_g partials[g * cols + c]) / divisor: one warp per
  // column, lane l adding chunks l, l + 32, ... in order, then the fixed
  // xor butterfly: the same sum every run.
  defs.push_back({finishSpec("pe_colsum_finish", {{"out", ParamKind::Ptr},
                                                  {"partials", ParamKind::Ptr},
                                                  {"cols", ParamKind::I64},
                                                  {"chunks", ParamKind::I64},
                                                  {"divisor", ParamKind::I64}}),
                  [](KernelBuilder &k) {
                    Value cols = k.arg(2);
                    forFinishColumn(k, k.arg(1), cols, k.arg(3), [&](Value c, Value total) {
                      k.store(k.div(total, k.toF32(k.arg(4))), k.arg(0), c);
                    });
                  }});
  // The same over 2 x half columns into two outputs: column c < half to
  // first[c], column half + c to second[c] (two sums per column of the
  // data, such as layer norm's dgamma and dbeta).
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

/// The partials launch of a column sum into a new scratch buffer; returns
/// the scratch index.
int64_t appendColumnPartials(OpSteps &steps, const std::string &partialsKernel,
                             std::vector<LaunchArg> inputs, BatchAffine rows, int64_t cols,
                             int64_t chunks, std::vector<LaunchArg> extra) {
  int64_t scratch = int64_t(steps.scratchBytes.size());
  steps.scratchBytes.push_back(BatchAffine::fixed(chunks * cols * 4));
  std::vector<LaunchArg> args = {LaunchArg::scratch(scratch)};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.push_back(LaunchArg::i64(rows));
  args.push_back(LaunchArg::i64(cols));
  args.push_back(LaunchArg::i64(chunks));
  args.insert(args.end(), extra.begin(), extra.end());
  Launch partials = Launch::kernelCall(partialsKernel, std::move(args));
  partials.grid = ExplicitGrid{BatchAffine::fixed(ceilDiv(cols, kColumnBlock)),
                               BatchAffine::fixed(chunks), BatchAffine::fixed(1)};
  steps.launches.push_back(std::move(partials));
  return scratch;
}

} // namespace

void appendColumnSum(OpSteps &steps, const std::string &partialsKernel,
                     std::vector<LaunchArg> inputs, BatchAffine rows, int64_t cols,
                     std::vector<LaunchArg> extra, LaunchArg out, BatchAffine divisor) {
  int64_t chunks = columnSumChunks(rows, cols);
  int64_t scratch =
      appendColumnPartials(steps, partialsKernel, std::move(inputs), rows, cols, chunks, extra);
  steps.launches.push_back(Launch::kernelCall(
      "pe_colsum_finish", {out, LaunchArg::scratch(scratch), LaunchArg::i64(cols),
                           LaunchArg::i64(chunks), LaunchArg::i64(divisor)}));
}

void appendColumnSumPair(OpSteps &steps, const std::string &partialsKernel,
                         std::vector<LaunchArg> inputs, BatchAffine rows, int64_t half,
                         std::vector<LaunchArg> extra, LaunchArg first, LaunchArg second) {
  int64_t cols = 2 * half;
  int64_t chunks = columnSumChunks(rows, cols);
  int64_t scratch =
      appendColumnPartials(steps, partialsKernel, std::move(inputs), rows, cols, chunks, extra);
  steps.launches.push_back(Launch::kernelCall(
      "pe_colsum_finish_pair", {first, second, LaunchArg::scratch(scratch), LaunchArg::i64(cols),
                                LaunchArg::i64(chunks), LaunchArg::i64(half)}));
}

void appendPlainColumnSum(OpSteps &steps, LaunchArg x, BatchAffine rows, int64_t cols,
                          int64_t stride, LaunchArg out, BatchAffine divisor) {
  appendColumnSum(steps, "pe_colsum_partials", {x}, rows, cols, {LaunchArg::i64(stride)}, out,
                  divisor);
}

void appendColumnSumTo(OpSteps &steps, LaunchArg x, BatchAffine rows, int64_t cols,
                       LaunchArg out) {
  if (rows.perBatch != 0 || rows.constant > kSingleLaunchRows) {
    appendPlainColumnSum(steps, x, rows, cols, cols, out);
    return;
  }
  Launch sums = Launch::kernelCall("pe_colsum_partials",
                                   {out, x, LaunchArg::i64(rows), LaunchArg::i64(cols),
                                    LaunchArg::i64(int64_t(1)), LaunchArg::i64(cols)});
  sums.grid = ExplicitGrid{BatchAffine::fixed(ceilDiv(cols, kColumnBlock)), BatchAffine::fixed(1),
                           BatchAffine::fixed(1)};
  steps.launches.push_back(std::move(sums));
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
