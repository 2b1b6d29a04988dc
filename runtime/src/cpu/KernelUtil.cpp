// Out-of-line helpers of KernelUtil.h.
#include "KernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"

#include <vector>

namespace stringrt::cpu::util {

void columnSums(const float *x, int64_t N, int64_t D, float *out) {
  // 16 columns per chunk at least: a 64-byte piece of every row.
  parallelFor(0, D, 16, [&](int64_t d0, int64_t d1) {
    std::vector<double> acc(static_cast<size_t>(d1 - d0), 0.0);
    for (int64_t n = 0; n < N; ++n) {
      const float *row = x + n * D + d0;
      for (int64_t d = 0; d < d1 - d0; ++d)
        acc[d] += row[d];
    }
    for (int64_t d = d0; d < d1; ++d)
      out[d] = static_cast<float>(acc[d - d0]);
  });
}

} // namespace stringrt::cpu::util
