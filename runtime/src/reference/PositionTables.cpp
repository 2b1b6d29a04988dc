// Reference kernels of the constant position tables: rope_freqs,
// sinusoidal, relative_positions (the others are in the op library,
// ops/position/).
#include "stringrt/reference/PositionKernels.h"

#include <cmath>
#include <string>

namespace stringrt::ref {

// Seq: freqs[j, 0] = base^(-2i/Dh); Axial: (base^(-4i/Dh), 0) for i < Dh/4,
// (0, base^(-4(i - Dh/4)/Dh)) otherwise; i = j % (Dh/2).
template <typename T>
void ropeFreqs(FreqsKind kind, int64_t dim, int64_t heads, double base, TensorRef<T> freqs) {
  const char *what = "rope_freqs";
  check(dim > 0, what, "'dim' must be > 0, got " + std::to_string(dim));
  check(heads > 0 && dim % heads == 0, what,
        "'heads' (" + std::to_string(heads) + ") must be > 0 and divide 'dim' (" +
            std::to_string(dim) + ")");
  check(base > 0, what, "'base' must be > 0");
  const int64_t dh = dim / heads;
  const int64_t pairsPerHead = dh / 2;
  if (kind == FreqsKind::Seq) {
    check(dh % 2 == 0, what, "the head width " + std::to_string(dh) + " must be even");
    checkShape("rope_freqs: result", freqs, {dim / 2, 1});
    for (int64_t j = 0; j < dim / 2; ++j) {
      const double i = static_cast<double>(j % pairsPerHead);
      freqs[j] = static_cast<T>(std::pow(base, -2.0 * i / static_cast<double>(dh)));
    }
    return;
  }
  check(dh % 4 == 0, what,
        "the head width " + std::to_string(dh) + " must be a multiple of 4 for axial frequencies");
  checkShape("rope_freqs: result", freqs, {dim / 2, 2});
  const int64_t quarter = dh / 4;
  for (int64_t j = 0; j < dim / 2; ++j) {
    const int64_t i = j % pairsPerHead;
    const int64_t axis = i < quarter ? 0 : 1;
    const double k = static_cast<double>(i < quarter ? i : i - quarter);
    const double f = std::pow(base, -4.0 * k / static_cast<double>(dh));
    freqs[2 * j + axis] = static_cast<T>(f);
    freqs[2 * j + (1 - axis)] = T(0);
  }
}

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
  template void ropeFreqs<T>(FreqsKind, int64_t, int64_t, double, TensorRef<T>);                   \
  template void sinusoidal<T>(int64_t, int64_t, double, TensorRef<T>);                             \
  template void relativePositions<T>(TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
