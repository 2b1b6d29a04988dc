//===- StepProgram.cpp - sizes of the step program ------------------------===//
//
// Shape helpers for the op lowerings (StepProgram.h, KernelBuilder.h): a
// tensor's element count as a function of the batch, exact division of such
// counts (rows = elements / last dimension), the last dimension.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mlir;

namespace stringc::cudagen {

BatchAffine elementCount(Type tensorType) {
  // planKernels lowers only ops whose values are ranked tensors dynamic in
  // dimension 0 at most (hasBatchShapes), so these are internal errors.
  auto ranked = dyn_cast<RankedTensorType>(tensorType);
  if (!ranked)
    llvm::report_fatal_error("elementCount: not a ranked tensor type");
  int64_t product = 1;
  bool dynamic = false;
  for (int64_t size : ranked.getShape()) {
    if (ShapedType::isDynamic(size)) {
      if (dynamic)
        llvm::report_fatal_error("elementCount: more than one dynamic dimension");
      dynamic = true;
      continue;
    }
    product *= size;
  }
  return dynamic ? BatchAffine{product, 0} : BatchAffine::fixed(product);
}

std::optional<BatchAffine> divideExactly(BatchAffine value, int64_t divisor) {
  if (divisor <= 0 || value.perBatch % divisor || value.constant % divisor)
    return std::nullopt;
  return BatchAffine{value.perBatch / divisor, value.constant / divisor};
}

bool hasBatchShapes(Operation &op) {
  auto ok = [](Type type) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked)
      return false;
    for (int64_t d = 1; d < ranked.getRank(); ++d)
      if (ranked.isDynamicDim(d))
        return false;
    return true;
  };
  return llvm::all_of(op.getOperandTypes(), ok) && llvm::all_of(op.getResultTypes(), ok);
}

const char *gpuPrecisionName(GpuPrecision precision) {
  return precision == GpuPrecision::BF16 ? "bf16" : "fp32";
}

int64_t lastDimension(Type tensorType) {
  auto ranked = cast<RankedTensorType>(tensorType);
  if (ranked.getRank() == 0)
    return 0;
  int64_t last = ranked.getShape().back();
  return ShapedType::isDynamic(last) ? -1 : last;
}

} // namespace stringc::cudagen
