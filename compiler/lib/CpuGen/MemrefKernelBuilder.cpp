//===- MemrefKernelBuilder.cpp - helpers for writing kernels on memrefs --===//
#include "MemrefKernelBuilder.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace stringc::codegen::detail {

MemrefKernelBuilder::MemrefKernelBuilder(func::FuncOp func)
    : func(func), builder(func.getContext()), location(func.getLoc()) {
  builder.setInsertionPointToStart(func.addEntryBlock());
}

Value MemrefKernelBuilder::index(int64_t v) {
  return builder.create<arith::ConstantIndexOp>(location, v);
}

Value MemrefKernelBuilder::f32(double v) {
  return builder.create<arith::ConstantOp>(location, builder.getF32FloatAttr(float(v)));
}

Value MemrefKernelBuilder::f64(double v) {
  return builder.create<arith::ConstantOp>(location, builder.getF64FloatAttr(v));
}

Value MemrefKernelBuilder::dim(Value m, int64_t d) {
  auto type = cast<MemRefType>(m.getType());
  if (!type.isDynamicDim(d))
    return index(type.getDimSize(d));
  return builder.create<memref::DimOp>(location, m, d);
}

Value MemrefKernelBuilder::load(Value m, ValueRange indices) {
  return builder.create<memref::LoadOp>(location, m, indices);
}

void MemrefKernelBuilder::store(Value v, Value m, ValueRange indices) {
  builder.create<memref::StoreOp>(location, v, m, indices);
}

Value MemrefKernelBuilder::add(Value a, Value c, bool reassoc) {
  auto flags = reassoc ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none;
  return builder.create<arith::AddFOp>(location, a, c, flags);
}

Value MemrefKernelBuilder::sub(Value a, Value c) {
  return builder.create<arith::SubFOp>(location, a, c);
}
Value MemrefKernelBuilder::mul(Value a, Value c) {
  return builder.create<arith::MulFOp>(location, a, c);
}
Value MemrefKernelBuilder::div(Value a, Value c) {
  return builder.create<arith::DivFOp>(location, a, c);
}

Value MemrefKernelBuilder::toF64(Value v) {
  return builder.create<arith::ExtFOp>(location, builder.getF64Type(), v);
}

Value MemrefKernelBuilder::toF32(Value v) {
  return builder.create<arith::TruncFOp>(location, builder.getF32Type(), v);
}

void MemrefKernelBuilder::loop(Value lb, Value ub, const std::function<void(Value)> &body) {
  auto forOp = builder.create<scf::ForOp>(location, lb, ub, index(1));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(forOp.getBody());
  body(forOp.getInductionVar());
}

Value MemrefKernelBuilder::reduce(Value lb, Value ub, Value init,
                            const std::function<Value(Value, Value)> &body) {
  auto forOp = builder.create<scf::ForOp>(location, lb, ub, index(1), ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(forOp.getBody());
    Value next = body(forOp.getInductionVar(), forOp.getRegionIterArgs()[0]);
    builder.create<scf::YieldOp>(location, next);
  }
  return forOp.getResult(0);
}

Value MemrefKernelBuilder::loadLanes(Value m, ValueRange indices, int64_t lanes) {
  if (lanes == 1)
    return load(m, indices);
  auto type = VectorType::get({lanes}, builder.getF32Type());
  return builder.create<vector::LoadOp>(location, type, m, indices);
}

Value MemrefKernelBuilder::splat(Value x, int64_t lanes) {
  if (lanes == 1)
    return x;
  auto type = VectorType::get({lanes}, builder.getF32Type());
  return builder.create<vector::BroadcastOp>(location, type, x);
}

Value MemrefKernelBuilder::sum(int64_t n, const std::function<Value(Value, int64_t)> &term) {
  constexpr int64_t kLanes = 8;
  const int64_t blocks = n / kLanes;
  Value total = f32(0);
  if (blocks > 0) {
    // Blocks 0, 2, 4, .. into one vector, blocks 1, 3, 5, .. into another.
    Value v = term(index(0), kLanes);
    if (blocks > 1) {
      auto pairs = builder.create<scf::ForOp>(location, index(2 * kLanes),
                                              index(blocks / 2 * 2 * kLanes), index(2 * kLanes),
                                              ValueRange{v, term(index(kLanes), kLanes)});
      {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPointToStart(pairs.getBody());
        Value d = pairs.getInductionVar();
        Value odd = builder.create<arith::AddIOp>(location, d, index(kLanes));
        builder.create<scf::YieldOp>(
            location, ValueRange{add(pairs.getRegionIterArgs()[0], term(d, kLanes)),
                                 add(pairs.getRegionIterArgs()[1], term(odd, kLanes))});
      }
      Value even = pairs.getResult(0);
      if (blocks % 2 == 1)
        even = add(even, term(index((blocks - 1) * kLanes), kLanes));
      v = add(even, pairs.getResult(1));
    }
    for (int64_t w = kLanes; w > 1; w /= 2) {
      SmallVector<int64_t> lo, hi;
      for (int64_t l = 0; l < w / 2; ++l) {
        lo.push_back(l);
        hi.push_back(l + w / 2);
      }
      v = add(builder.create<vector::ShuffleOp>(location, v, v, lo),
              builder.create<vector::ShuffleOp>(location, v, v, hi));
    }
    total = builder.create<vector::ExtractOp>(location, v, 0);
  }
  return reduce(index(blocks * kLanes), index(n), total,
                [&](Value d, Value acc) { return add(acc, term(d, 1)); });
}

void MemrefKernelBuilder::finish() { builder.create<func::ReturnOp>(location); }

namespace {
std::optional<Shape> staticButBatch(RankedTensorType tensor) {
  Shape shape(tensor.getShape().begin(), tensor.getShape().end());
  for (auto [i, d] : llvm::enumerate(shape))
    if (ShapedType::isDynamic(d) ? i != 0 : d < 1)
      return std::nullopt;
  return shape;
}
} // namespace

std::optional<Shape> kernelShape(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return std::nullopt;
  return staticButBatch(tensor);
}

std::optional<Shape> kernelShapeI32(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isSignlessInteger(32))
    return std::nullopt;
  return staticButBatch(tensor);
}

int64_t numel(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (!ShapedType::isDynamic(d))
      n *= d;
  return n;
}

std::string shapeKey(llvm::ArrayRef<int64_t> shape) {
  std::string key;
  for (int64_t d : shape)
    key += (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d)) + "x";
  return key;
}

} // namespace stringc::codegen::detail
