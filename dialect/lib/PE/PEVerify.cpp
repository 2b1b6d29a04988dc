//===- PEVerify.cpp - shape-checking helpers for pe verifiers -------------===//

#include "PEVerify.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::pe::verify {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << '[';
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << '?';
    else
      os << d;
  });
  os << ']';
  return s;
}

std::string numStr(double value) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", value);
  return s;
}

static LogicalResult checkRank(Operation *op, Value v, StringRef name,
                               int64_t rank, int64_t minRank) {
  int64_t actual = shapeOf(v).size();
  if (rank != kAnyRank && actual != rank)
    return op->emitOpError() << "operand '" << name << "' must have rank "
                             << rank << ", got " << v.getType();
  if (rank == kAnyRank && actual < minRank)
    return op->emitOpError() << "operand '" << name
                             << "' must have rank at least " << minRank
                             << ", got " << v.getType();
  return success();
}

LogicalResult checkActivation(Operation *op, Value v, StringRef name,
                              int64_t rank, int64_t minRank) {
  if (failed(checkRank(op, v, name, rank, minRank)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(v);
  for (size_t i = 1; i < shape.size(); ++i)
    if (ShapedType::isDynamic(shape[i]))
      return op->emitOpError()
             << "operand '" << name
             << "' may be dynamic only in dimension 0 (the batch), got "
             << v.getType();
  return success();
}

LogicalResult checkStatic(Operation *op, Value v, StringRef name, int64_t rank,
                          int64_t minRank) {
  if (failed(checkRank(op, v, name, rank, minRank)))
    return failure();
  if (!cast<RankedTensorType>(v.getType()).hasStaticShape())
    return op->emitOpError() << "operand '" << name
                             << "' must be fully static, got " << v.getType();
  return success();
}

LogicalResult checkShape(Operation *op, Value v, StringRef name,
                         ArrayRef<int64_t> shape, StringRef what) {
  if (shapeOf(v) == shape)
    return success();
  return op->emitOpError() << "operand '" << name << "' must have shape "
                           << shapeStr(shape) << " (" << what << "), got "
                           << v.getType();
}

LogicalResult checkResultShape(Operation *op, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (type.getShape() == shape)
    return success();
  return op->emitOpError() << "result type must be "
                           << type.clone(shape) << ", got " << type;
}

SmallVector<int64_t> dropDim(ArrayRef<int64_t> shape, size_t dim) {
  SmallVector<int64_t> out(shape.begin(), shape.end());
  out.erase(out.begin() + dim);
  return out;
}

SmallVector<int64_t> replaceLast(ArrayRef<int64_t> shape,
                                 ArrayRef<int64_t> tail) {
  SmallVector<int64_t> out(shape.drop_back());
  out.append(tail.begin(), tail.end());
  return out;
}

} // namespace mlir::pe::verify
