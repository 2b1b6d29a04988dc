// Reference kernels of the constant position tables: sinusoidal,
// relative_positions (the others are in the op library, ops/position/).
#include "stringrt/reference/PositionKernels.h"

#include <cmath>
#include <string>

namespace stringrt::ref {

// PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim)).
template <typename T> void sinusoidal(int64_t length, int64_t dim, double base, TensorRef<T> pe) {
  const char *what = "sinusoidal";
  check(length > 0, what, "'length' must be > 0, got " + std::to_string(length));
  check(dim > 0 && dim % 2 == 0, what, "'dim' must be > 0 and even, got " + std::to_string(dim));
  check(base > 0, what, "'base' must be > 0");
  checkShape("sinusoidal: result", pe, {length, dim});
  for (int64_t p = 0; p < length; ++p)
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double angle = static_cast<double>(p) /
                           std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(dim));
      pe[p * dim + 2 * i] = static_cast<T>(std::sin(angle));
      pe[p * dim + 2 * i + 1] = static_cast<T>(std::cos(angle));
    }
}

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
  template void sinusoidal<T>(int64_t, int64_t, double, TensorRef<T>);                             \
  template void relativePositions<T>(TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
