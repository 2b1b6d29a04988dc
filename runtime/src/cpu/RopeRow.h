// One row of interleaved rotary pairs turned by a cos / sin table row
// (private to src/cpu): the inner loop of the fused RoPE kernels.
#pragma once

#include <cstdint>

namespace stringrt::cpu::util {

// out pair j = [[c, -s], [s, c]] in pair j, (c, s) = (cs[2j], sign * cs[2j+1]);
// sign -1 applies the transpose. `in` and `out` must not overlap.
inline void rotateRow(const float *in, const float *cs, int64_t pairs, float sign, float *out) {
  for (int64_t j = 0; j < pairs; ++j) {
    const float c = cs[2 * j], s = sign * cs[2 * j + 1];
    const float x0 = in[2 * j], x1 = in[2 * j + 1];
    out[2 * j] = x0 * c - x1 * s;
    out[2 * j + 1] = x0 * s + x1 * c;
  }
}

} // namespace stringrt::cpu::util
