// The range checks of the i32 operands that compiled kernels use as
// addresses (Executor.h, checkCompiledIndices). A generated kernel has no
// way to report an error, so the executor checks the ids and labels before
// it calls one, with the reference kernels' messages.
#include "Executor.h"

#include <string>

namespace stringrt::detail {

namespace {

// Every element of i32 operand `k` in [0, bound).
void checkRange(const OpContext &c, size_t k, int64_t bound, const char *what) {
  const ref::TensorRef<const int32_t> ids = c.inI32(k);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    if (ids.data[i] < 0 || ids.data[i] >= bound)
      c.fail(std::string(what) + " " + std::to_string(ids.data[i]) + " at flat index " +
             std::to_string(i) + " is out of range [0, " + std::to_string(bound) + ")");
}

} // namespace

void checkCompiledIndices(const OpContext &c) {
  const std::string &op = c.op().op;
  if (op == "pe.token_embed") // ids, table [V, D]
    checkRange(c, 0, c.in(1).dim(0), "id");
  else if (op == "pe.token_embed_grad") // ids, dy -> dtable [V, D]
    checkRange(c, 0, c.out(0).dim(0), "id");
  else if (op == "pe.cross_entropy" || op == "pe.cross_entropy_grad") // logits [..., C], labels
    checkRange(c, 1, c.in(0).dim(-1), "label");
  else
    for (size_t k = 0; k < c.numOperands(); ++k)
      if (c.operandType(k) == DType::I32)
        c.fail("operand #" + std::to_string(k) +
               " is i32, and the executor knows no range for it (a compiled kernel would "
               "use it unchecked)");
}

} // namespace stringrt::detail
