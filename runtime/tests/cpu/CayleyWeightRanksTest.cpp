// The fast Cayley kernels on the operands pe-fold-transform gives them: a
// rank-2 weight [I, O] and a rank-1 bias [O] (one vector, no token
// dimension), against the reference kernels. FastKernelsTest covers the
// activation shapes.
#include "stringrt/cpu/FastKernels.h"

#include "CpuTestUtil.h"

#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace stringrt;
using namespace stringrt::cpu::testing;

TEST(FastCayleyWeights, RankTwoWeightAndRankOneBiasMatchReference) {
  uint32_t seed = 4100;
  for (int64_t d : {8, 64}) {
    // A skew S with entries ~0.5 / sqrt(d).
    TF a = randomTensor({d, d}, seed++);
    TF s = TF::zeros({d, d});
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j)
        s.values[i * d + j] = 0.5f / std::sqrt(float(d)) * (a.values[i * d + j] - a.values[j * d + i]);
    for (std::vector<int64_t> shape : {std::vector<int64_t>{d}, std::vector<int64_t>{64, d}}) {
      const TF x = randomTensor(shape, seed++), dy = randomTensor(shape, seed++);
      const std::string name = ref::shapeToString(shape);
      expectFastMatchesReference("cayley " + name, [&](bool fast) {
        TF y = TF::zeros(shape);
        fast ? cpu::cayley(x.cref(), s.cref(), y.ref())
             : ref::cayley<float>(x.cref(), s.cref(), y.ref());
        return std::vector<TF>{y};
      });
      expectFastMatchesReference("cayley_grad " + name, [&](bool fast) {
        TF dx = TF::zeros(shape), ds = TF::zeros({d, d});
        fast ? cpu::cayleyGrad(x.cref(), s.cref(), dy.cref(), dx.ref(), ds.ref())
             : ref::cayleyGrad<float>(x.cref(), s.cref(), dy.cref(), dx.ref(), ds.ref());
        return std::vector<TF>{dx, ds};
      });
    }
  }
}

} // namespace
