//===- KernelBuilder.cpp - helpers for writing gpu.func kernels -----------===//
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <map>
#include <memory>
#include <mutex>

using namespace mlir;

namespace stringc::cudagen {

Value KernelBuilder::f32(double value) {
  return b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(float(value)));
}
Value KernelBuilder::i64(int64_t value) {
  return b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(value));
}
Value KernelBuilder::i32(int32_t value) {
  return b.create<arith::ConstantOp>(loc, b.getI32IntegerAttr(value));
}

bool KernelBuilder::isBf16(Value ptr) const {
  auto arg = dyn_cast<BlockArgument>(ptr);
  gpu::GPUFuncOp kernel = func; // an op handle: its accessors are not const
  return arg && arg.getOwner() == &kernel.getBody().front() &&
         arg.getArgNumber() < bf16Args.size() && bf16Args[arg.getArgNumber()];
}

int64_t KernelBuilder::dynamicSharedOffset(llvm::StringRef name, int64_t bytes) {
  auto [it, inserted] = dynamicOffsets.try_emplace(name, dynamicEnd);
  if (inserted)
    dynamicEnd = (dynamicEnd + bytes + 15) / 16 * 16;
  if (dynamicEnd > dynamicShared)
    llvm::report_fatal_error(llvm::Twine("kernel ") + func.getName() + ": its shared arrays take " +
                             llvm::Twine(dynamicEnd) + " bytes, more than its " +
                             llvm::Twine(dynamicShared) + " of dynamic shared memory");
  return it->second;
}

Value KernelBuilder::bf16Bits(Value x) {
  Type i32Type = b.getI32Type();
  Value bits = b.create<arith::BitcastOp>(loc, i32Type, x);
  Value sixteen = i32(16);
  Value lsb = b.create<arith::AndIOp>(loc, b.create<arith::ShRUIOp>(loc, bits, sixteen), i32(1));
  Value rounded = b.create<arith::ShRUIOp>(
      loc, b.create<arith::AddIOp>(loc, b.create<arith::AddIOp>(loc, bits, i32(0x7fff)), lsb),
      sixteen);
  Value isNan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, x, x);
  return b.create<arith::SelectOp>(loc, isNan, i32(0x7fc0), rounded);
}

Value KernelBuilder::load(Value ptr, Value index) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  if (isBf16(ptr)) {
    Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getI16Type(), ptr, ValueRange{index});
    Value half = b.create<LLVM::LoadOp>(loc, b.getI16Type(), address);
    Value wide = b.create<arith::ShLIOp>(loc, b.create<arith::ExtUIOp>(loc, b.getI32Type(), half),
                                         i32(16));
    return b.create<arith::BitcastOp>(loc, b.getF32Type(), wide);
  }
  Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getF32Type(), ptr, ValueRange{index});
  return b.create<LLVM::LoadOp>(loc, b.getF32Type(), address);
}

std::array<Value, 4> KernelBuilder::load4(Value ptr, Value index) {
  assert(!isBf16(ptr) && "load4 reads f32");
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getF32Type(), ptr, ValueRange{index});
  auto vectorType = VectorType::get({4}, b.getF32Type());
  Value vector = b.create<LLVM::LoadOp>(loc, vectorType, address, /*alignment=*/16);
  std::array<Value, 4> lanes;
  for (int64_t i = 0; i < 4; ++i)
    lanes[size_t(i)] = b.create<LLVM::ExtractElementOp>(loc, vector, i32(int32_t(i)));
  return lanes;
}

SmallVector<Value> KernelBuilder::loadVector(Value ptr, Value index, int64_t width) {
  assert(width % 8 == 0 && "whole 16-byte vectors of f32 and of bf16");
  SmallVector<Value> lanes;
  if (!isBf16(ptr)) {
    for (int64_t j = 0; j < width; j += 4)
      llvm::append_range(lanes, load4(ptr, add(index, i64(j))));
    return lanes;
  }
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  auto vectorType = VectorType::get({8}, b.getI16Type());
  for (int64_t j = 0; j < width; j += 8) {
    Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getI16Type(), ptr,
                                          ValueRange{add(index, i64(j))});
    Value vector = b.create<LLVM::LoadOp>(loc, vectorType, address, /*alignment=*/16);
    for (int32_t l = 0; l < 8; ++l) {
      Value half = b.create<LLVM::ExtractElementOp>(loc, vector, i32(l));
      Value wide = b.create<arith::ShLIOp>(
          loc, b.create<arith::ExtUIOp>(loc, b.getI32Type(), half), i32(16));
      lanes.push_back(b.create<arith::BitcastOp>(loc, b.getF32Type(), wide));
    }
  }
  return lanes;
}

void KernelBuilder::storeVector(ArrayRef<Value> values, Value ptr, Value index) {
  assert(values.size() % 8 == 0 && "whole 16-byte vectors of f32 and of bf16");
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  bool bf16 = isBf16(ptr);
  int64_t lanes = bf16 ? 8 : 4;
  Type element = bf16 ? Type(b.getI16Type()) : Type(b.getF32Type());
  auto vectorType = VectorType::get({lanes}, element);
  for (int64_t j = 0; j < int64_t(values.size()); j += lanes) {
    Value vector = b.create<LLVM::UndefOp>(loc, vectorType);
    for (int64_t l = 0; l < lanes; ++l) {
      Value value = values[size_t(j + l)];
      if (bf16)
        value = b.create<arith::TruncIOp>(loc, b.getI16Type(), bf16Bits(value));
      vector = b.create<LLVM::InsertElementOp>(loc, vector, value, i32(int32_t(l)));
    }
    Value address =
        b.create<LLVM::GEPOp>(loc, ptrType, element, ptr, ValueRange{add(index, i64(j))});
    b.create<LLVM::StoreOp>(loc, vector, address, /*alignment=*/16);
  }
}

Value KernelBuilder::aligned16(ArrayRef<Value> ptrs) {
  Value bits = i64(0);
  for (Value ptr : ptrs)
    bits = b.create<arith::OrIOp>(loc, bits, b.create<LLVM::PtrToIntOp>(loc, b.getI64Type(), ptr));
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                 b.create<arith::AndIOp>(loc, bits, i64(15)), i64(0));
}

void KernelBuilder::store(Value value, Value ptr, Value index) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  if (isBf16(ptr)) {
    Value half = b.create<arith::TruncIOp>(loc, b.getI16Type(), bf16Bits(value));
    Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getI16Type(), ptr, ValueRange{index});
    b.create<LLVM::StoreOp>(loc, half, address);
    return;
  }
  Value address = b.create<LLVM::GEPOp>(loc, ptrType, b.getF32Type(), ptr, ValueRange{index});
  b.create<LLVM::StoreOp>(loc, value, address);
}

namespace {
Value asI64(OpBuilder &b, Location loc, Value index) {
  return b.create<arith::IndexCastOp>(loc, b.getI64Type(), index);
}
} // namespace

Value KernelBuilder::threadId(gpu::Dimension dim) {
  return asI64(b, loc, b.create<gpu::ThreadIdOp>(loc, dim));
}
Value KernelBuilder::blockId(gpu::Dimension dim) {
  return asI64(b, loc, b.create<gpu::BlockIdOp>(loc, dim));
}
Value KernelBuilder::blockDim(gpu::Dimension dim) {
  return asI64(b, loc, b.create<gpu::BlockDimOp>(loc, dim));
}
Value KernelBuilder::gridDim(gpu::Dimension dim) {
  return asI64(b, loc, b.create<gpu::GridDimOp>(loc, dim));
}

void KernelBuilder::forGridStride(Value n, const std::function<void(Value)> &body, Value from) {
  Value bdim = blockDim(gpu::Dimension::x);
  Value first = add(mul(blockId(gpu::Dimension::x), bdim), threadId(gpu::Dimension::x));
  if (from)
    first = add(from, first);
  Value step = mul(gridDim(gpu::Dimension::x), bdim);
  forLoop(first, n, step, {}, [&](Value i, ValueRange) {
    body(i);
    return SmallVector<Value>{};
  });
}

ValueRange KernelBuilder::forLoop(
    Value begin, Value end, Value step, ValueRange init,
    const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
  auto loop = b.create<scf::ForOp>(
      loc, begin, end, step, init,
      [&](OpBuilder &nested, Location nestedLoc, Value iv, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        SmallVector<Value> next = body(iv, carried);
        b.create<scf::YieldOp>(nestedLoc, next);
      });
  return loop.getResults();
}

void KernelBuilder::ifThen(Value cond, const std::function<void()> &body) {
  auto branch = b.create<scf::IfOp>(loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  body();
}

void KernelBuilder::ifThenElse(Value cond, const std::function<void()> &then,
                               const std::function<void()> &otherwise) {
  auto branch = b.create<scf::IfOp>(loc, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  then();
  b.setInsertionPoint(branch.elseBlock()->getTerminator());
  otherwise();
}

ValueRange KernelBuilder::ifThenOr(Value cond, ValueRange otherwise,
                                   const std::function<SmallVector<Value>()> &then) {
  auto branch = b.create<scf::IfOp>(loc, otherwise.getTypes(), cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(branch.thenBlock());
  b.create<scf::YieldOp>(loc, then());
  b.setInsertionPointToStart(branch.elseBlock());
  b.create<scf::YieldOp>(loc, otherwise);
  return branch.getResults();
}

Value KernelBuilder::warpSum(Value value) {
  Value width = i32(32);
  for (int offset = 16; offset >= 1; offset /= 2) {
    auto shuffle = b.create<gpu::ShuffleOp>(loc, value, i32(offset), width, gpu::ShuffleMode::XOR);
    value = add(value, shuffle.getShuffleResult());
  }
  return value;
}

Value KernelBuilder::add(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return b.create<arith::AddFOp>(loc, a, c);
  return b.create<arith::AddIOp>(loc, a, c);
}
Value KernelBuilder::sub(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return b.create<arith::SubFOp>(loc, a, c);
  return b.create<arith::SubIOp>(loc, a, c);
}
Value KernelBuilder::mul(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return b.create<arith::MulFOp>(loc, a, c);
  return b.create<arith::MulIOp>(loc, a, c);
}
Value KernelBuilder::div(Value a, Value c) {
  if (isa<FloatType>(a.getType()))
    return b.create<arith::DivFOp>(loc, a, c);
  return b.create<arith::DivSIOp>(loc, a, c);
}
Value KernelBuilder::toF32(Value integer) {
  return b.create<arith::SIToFPOp>(loc, b.getF32Type(), integer);
}

Value KernelBuilder::sqrtRn(Value value) {
  constexpr llvm::StringLiteral name = "__nv_fsqrt_rn";
  auto module = func->getParentOfType<gpu::GPUModuleOp>();
  auto callee = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    callee = b.create<LLVM::LLVMFuncOp>(
        loc, name, LLVM::LLVMFunctionType::get(b.getF32Type(), {b.getF32Type()}));
  }
  return b.create<LLVM::CallOp>(loc, callee, ValueRange{value}).getResult();
}

const std::vector<KernelDef> &allKernelDefs() {
  static const std::vector<KernelDef> defs = [] {
    std::vector<KernelDef> all;
    appendElementwiseKernels(all);
    appendDropoutKernels(all);
    appendNormKernels(all);
    appendOptimizerKernels(all);
    appendLinearKernels(all);
    appendPositionTableKernels(all);
    appendRotaryKernels(all);
    appendRotationKernels(all);
    appendGatherKernels(all);
    appendTokenKernels(all);
    appendLossKernels(all);
    appendCayleyKernels(all);
    appendAttentionKernels(all);
    appendAttentionMmaKernels(all);
    appendGeneratorKernels(all);
    appendAugmentKernels(all);
    return all;
  }();
  return defs;
}

const std::vector<OpLowering> &allOpLowerings() {
  static const std::vector<OpLowering> lowerings = [] {
    std::vector<OpLowering> all;
    appendElementwiseLowerings(all);
    appendDropoutLowerings(all);
    appendNormLowerings(all);
    appendLinearLowerings(all);
    appendPositionTableLowerings(all);
    appendRotaryLowerings(all);
    appendRotationLowerings(all);
    appendGatherLowerings(all);
    appendTokenLowerings(all);
    appendLossLowerings(all);
    appendCayleyLowerings(all);
    appendAttentionLowerings(all);
    appendAttentionMmaLowerings(all); // bf16 only, with a higher benefit
    appendGeneratorLowerings(all);
    return all;
  }();
  return lowerings;
}

std::string kernelVariantName(const KernelDef &base, const std::vector<bool> &bf16) {
  assert(bf16.size() == base.storageParams.size() && "one type per storage parameter");
  if (llvm::none_of(bf16, [](bool b) { return b; }))
    return base.spec.name;
  std::string name = base.spec.name + "__";
  for (bool b : bf16)
    name += b ? 'b' : 'f';
  return name;
}

const KernelDef *findKernelDef(llvm::StringRef name) {
  for (const KernelDef &def : allKernelDefs())
    if (def.spec.name == name)
      return &def;
  // A bf16 variant: NAME__ + a letter per storage parameter, made once.
  size_t split = name.rfind("__");
  if (split == llvm::StringRef::npos)
    return nullptr;
  static std::map<std::string, std::unique_ptr<KernelDef>> variants;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = variants.find(name.str()); it != variants.end())
    return it->second.get();
  llvm::StringRef baseName = name.take_front(split), letters = name.drop_front(split + 2);
  const KernelDef *base = nullptr;
  for (const KernelDef &def : allKernelDefs())
    if (def.spec.name == baseName)
      base = &def;
  if (!base || base->storageParams.empty() || letters.size() != base->storageParams.size() ||
      !llvm::all_of(letters, [](char c) { return c == 'b' || c == 'f'; }) ||
      !letters.contains('b'))
    return nullptr;
  auto variant = std::make_unique<KernelDef>(*base);
  variant->spec.name = name.str();
  variant->bf16Args.assign(base->spec.params.size(), false);
  for (size_t i = 0; i < letters.size(); ++i)
    variant->bf16Args[base->storageParams[i]] = letters[i] == 'b';
  return variants.emplace(name.str(), std::move(variant)).first->second.get();
}

} // namespace stringc::cudagen
