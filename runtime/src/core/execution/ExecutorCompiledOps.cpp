// Running an op on its compiler-generated kernels (KernelSet::Compiled,
// KernelLibrary.h): every operand's and result's data pointer in one array,
// then each kernel over its parallel range on the thread pool. The kernels
// write every element of the results (the executor does not zero them), and
// each iteration of a kernel's range writes its own part of them, so the
// split does not change a result.
#include "execution/Executor.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#include <vector>

namespace stringrt::detail {

void runCompiledKernels(const OpContext &c, OpAdapter check, const std::vector<CompiledCall> &calls,
                        std::optional<int64_t> batch) {
  // The reference kernel's checks: the kernels address memory with the
  // shapes they were built for and use ids and labels unchecked.
  check(c);
  // A kernel's buffers are f32 or i32 (token ids, labels): the element type
  // of each is the value table's, as the compiler built the kernel from it.
  std::vector<void *> buffers;
  buffers.reserve(c.numOperands() + c.numResults());
  for (size_t k = 0; k < c.numOperands(); ++k) // kernels only read operands
    buffers.push_back(c.operandType(k) == DType::I32
                          ? static_cast<void *>(const_cast<int32_t *>(c.inI32(k).data))
                          : static_cast<void *>(const_cast<float *>(c.in(k).data)));
  for (size_t k = 0; k < c.numResults(); ++k)
    buffers.push_back(c.resultType(k) == DType::I32 ? static_cast<void *>(c.outI32(k).data)
                                                    : static_cast<void *>(c.out(k).data));
  const int64_t batchSize = batch.value_or(0);
  for (const CompiledCall &call : calls) {
    int64_t range = call.range;
    if (range == kBatchDim) {
      if (!batch)
        c.fail("its compiled kernel runs over the batch, but no input gives the batch size");
      range = batchSize;
    }
    KernelFunction function = call.function;
    void *const *args = buffers.data();
    cpu::parallelFor(0, range, call.grain, [&](int64_t begin, int64_t end) {
      function(args, batchSize, begin, end);
    });
  }
}

} // namespace stringrt::detail
