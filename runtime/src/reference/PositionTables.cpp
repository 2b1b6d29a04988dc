// Reference kernel of the constant position table relative_positions (the
// others are in the op library, ops/position/).
#include "stringrt/reference/PositionKernels.h"

#include <cmath>
#include <string>

namespace stringrt::ref {

// r[i, j, a] = pos[j, a] - pos[i, a].
template <typename T> void relativePositions(TensorRef<const T> pos, TensorRef<T> r) {
  checkRank("relative_positions: 'pos'", pos, 2);
  const int64_t n = pos.dim(0), axes = pos.dim(1);
  checkShape("relative_positions: result", r, {n, n, axes});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t a = 0; a < axes; ++a)
        r[(i * n + j) * axes + a] = static_cast<T>(static_cast<double>(pos[j * axes + a]) -
                                                   static_cast<double>(pos[i * axes + a]));
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void relativePositions<T>(TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
