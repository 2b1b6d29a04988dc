// The fast matrix functions (the op library's ops/fused/CayleyWeight.cpp
// and ops/position/GeneratorExp.cpp) against the f64 reference kernels and
// central finite differences: cayley_weight and
// its gradient at the examples' width and beyond (16-128, skew and general
// S), generator_exp and its Frechet gradient on vit_generators' 169 offsets
// (K = 2, d = 16) and other shapes, with norms that need 0 to 5 squarings;
// each run with 1 and 4 threads (the same bits).
#include "stringrt/cpu/FastKernels.h"

#include "CpuTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace stringrt;
using namespace stringrt::cpu::testing;
using TD = ref::Tensor<double>;
using Outputs = std::vector<TF>;

TD toDouble(const TF &t) {
  TD d = TD::zeros(t.shape);
  for (size_t i = 0; i < t.values.size(); ++i)
    d.values[i] = t.values[i];
  return d;
}

// max |fast - exact| / max |exact| (exact in double).
double relativeError(const TF &fast, const TD &exact) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < exact.values.size(); ++i) {
    err = std::max(err, std::fabs(fast.values[i] - exact.values[i]));
    scale = std::max(scale, std::fabs(exact.values[i]));
  }
  return err / std::max(scale, 1e-300);
}

// S = c (A - A^T) (skew) or c A (general), A uniform in [-1, 1).
TF randomS(int64_t d, bool skewS, float c, uint32_t seed) {
  TF a = randomTensor({d, d}, seed), s = TF::zeros({d, d});
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      s.values[i * d + j] =
          skewS ? c * (a.values[i * d + j] - a.values[j * d + i]) : c * a.values[i * d + j];
  return s;
}

// K generators [K, d, d]: skew with normal(std) pair entries (as
// vit_generators' skew(gen)), or general.
TF randomGenerators(int64_t count, int64_t d, bool skewL, double std, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, std);
  TF g = TF::zeros({count, d, d});
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = skewL ? i + 1 : 0; j < d; ++j) {
        const float v = static_cast<float>(dist(gen));
        g.values[(k * d + i) * d + j] = v;
        if (skewL)
          g.values[(k * d + j) * d + i] = -v;
      }
  return g;
}

// The distinct offsets of a rows x cols grid ((2 rows - 1)(2 cols - 1) of
// them, as pe-distinct-offsets lists for vit_generators' 7 x 7), [U, 2].
TF gridOffsets(int64_t rows, int64_t cols) {
  std::vector<float> v;
  for (int64_t dy = -(rows - 1); dy < rows; ++dy)
    for (int64_t dx = -(cols - 1); dx < cols; ++dx) {
      v.push_back(static_cast<float>(dy));
      v.push_back(static_cast<float>(dx));
    }
  TF t = TF::zeros({static_cast<int64_t>(v.size() / 2), 2});
  t.values = v;
  return t;
}

TEST(FastCayleyWeight, MatchesTheF64ReferenceAtTheExamplesSizes) {
  uint32_t seed = 4300;
  for (int64_t d : {2, 16, 33, 64, 128})
    for (bool skewS : {true, false})
      for (float c : {0.01f, 1.0f}) { // a model's S (std 0.01) and far from I
        const TF s = randomS(d, skewS, c / std::sqrt(float(d)), seed++);
        const TF dw = randomTensor({d, d}, seed++);
        const std::string name = "d=" + std::to_string(d) + (skewS ? " skew" : " general") +
                                 " c=" + std::to_string(c);
        expectFastMatchesReference("cayley_weight " + name, [&](bool fast) {
          TF w = TF::zeros({d, d}), ds = TF::zeros({d, d});
          if (fast) {
            cpu::cayleyWeight(s.cref(), w.ref());
            cpu::cayleyWeightGrad(s.cref(), dw.cref(), ds.ref());
          } else {
            ref::cayleyWeight<float>(s.cref(), w.ref());
            ref::cayleyWeightGrad<float>(s.cref(), dw.cref(), ds.ref());
          }
          return Outputs{w, ds};
        });
        // Against the reference in double: within a few float roundings.
        TF w = TF::zeros({d, d}), ds = TF::zeros({d, d});
        cpu::cayleyWeight(s.cref(), w.ref());
        cpu::cayleyWeightGrad(s.cref(), dw.cref(), ds.ref());
        TD wd = TD::zeros({d, d}), dsd = TD::zeros({d, d});
        const TD sd = toDouble(s), dwd = toDouble(dw);
        ref::cayleyWeight<double>(sd.cref(), wd.ref());
        ref::cayleyWeightGrad<double>(sd.cref(), dwd.cref(), dsd.ref());
        EXPECT_LT(relativeError(w, wd), 4e-7) << name;
        EXPECT_LT(relativeError(ds, dsd), 4e-7) << name;
      }
}

TEST(FastCayleyWeight, SingularAndMisshapenSThrowLikeTheReference) {
  const int64_t d = 4;
  TF minusI = TF::zeros({d, d});
  for (int64_t i = 0; i < d; ++i)
    minusI.values[i * d + i] = -1.0f;
  TF w = TF::zeros({d, d});
  try {
    cpu::cayleyWeight(minusI.cref(), w.ref());
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "cayley_weight: I + S (4x4) is singular");
  }
  try {
    cpu::cayleyWeightGrad(minusI.cref(), w.cref(), w.ref());
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "cayley_weight_grad: I + S (4x4) is singular");
  }
  EXPECT_THROW(cpu::cayleyWeight(randomTensor({4, 5}, 1).cref(), w.ref()), Error);
  EXPECT_THROW(cpu::cayleyWeight(randomTensor({5, 5}, 1).cref(), w.ref()), Error);
}

struct GeneratorCase {
  TF r;           // [..., K]
  int64_t count;  // K
  int64_t d;
  bool skewL;
  double std;     // generator entries
};

std::vector<GeneratorCase> generatorCases() {
  std::vector<GeneratorCase> cases;
  // vit_generators: 169 grid offsets, two 16 x 16 skew generators at the
  // initialisation's scale (norms up to ~4: 0 or 1 squaring) and 20x it
  // (up to 5 squarings).
  for (double std : {0.05, 1.0})
    cases.push_back({gridOffsets(7, 7), 2, 16, true, std});
  cases.push_back({gridOffsets(3, 4), 2, 32, true, 0.1});
  // General (non-skew) generators, K = 1 and 3, leading dims [2, 5].
  cases.push_back({randomTensor({5, 1}, 77, -3.0f, 3.0f), 1, 7, false, 0.3});
  TF r3 = randomTensor({2, 5, 3}, 78, -2.0f, 2.0f);
  cases.push_back({r3, 3, 5, false, 0.4});
  return cases;
}

std::vector<int64_t> rotationShape(const TF &r, int64_t d) {
  std::vector<int64_t> shape = r.shape;
  shape.back() = d;
  shape.push_back(d);
  return shape;
}

TEST(FastGeneratorExp, MatchesTheF64ReferenceAndEveryThreadCountGivesTheSameBits) {
  uint32_t seed = 4400;
  for (const GeneratorCase &c : generatorCases()) {
    const TF g = randomGenerators(c.count, c.d, c.skewL, c.std, seed++);
    const auto shape = rotationShape(c.r, c.d);
    const TF dy = randomTensor(shape, seed++);
    const std::string name = "d=" + std::to_string(c.d) + " K=" + std::to_string(c.count) +
                             " P=" + std::to_string(c.r.values.size() / c.count) +
                             " std=" + std::to_string(c.std);
    expectFastMatchesReference("generator_exp " + name, [&](bool fast) {
      TF rot = TF::zeros(shape), dg = TF::zeros(g.shape);
      if (fast) {
        cpu::generatorExp(c.r.cref(), g.cref(), rot.ref());
        cpu::generatorExpGrad(c.r.cref(), g.cref(), dy.cref(), dg.ref());
      } else {
        ref::generatorExp<float>(c.r.cref(), g.cref(), rot.ref());
        ref::generatorExpGrad<float>(c.r.cref(), g.cref(), dy.cref(), dg.ref());
      }
      return Outputs{rot, dg};
    });
    // The documented accuracy: within a few float roundings of f64.
    TF rot = TF::zeros(shape), dg = TF::zeros(g.shape);
    cpu::generatorExp(c.r.cref(), g.cref(), rot.ref());
    cpu::generatorExpGrad(c.r.cref(), g.cref(), dy.cref(), dg.ref());
    const TD rd = toDouble(c.r), gd = toDouble(g), dyd = toDouble(dy);
    TD rotd = TD::zeros(shape), dgd = TD::zeros(g.shape);
    ref::generatorExp<double>(rd.cref(), gd.cref(), rotd.ref());
    ref::generatorExpGrad<double>(rd.cref(), gd.cref(), dyd.cref(), dgd.ref());
    EXPECT_LT(relativeError(rot, rotd), 4e-7) << name;
    EXPECT_LT(relativeError(dg, dgd), 4e-7) << name;
  }
}

// d/dL_k of sum(dy * generator_exp(r, L)) by central differences in double
// against the fast gradient.
TEST(FastGeneratorExp, GradientMatchesFiniteDifferences) {
  uint32_t seed = 4500;
  for (const GeneratorCase &c : generatorCases()) {
    if (c.d > 16)
      continue; // the 32 x 32 case is covered against the reference above
    const TF g = randomGenerators(c.count, c.d, c.skewL, c.std, seed++);
    const auto shape = rotationShape(c.r, c.d);
    const TF dy = randomTensor(shape, seed++);
    TF dg = TF::zeros(g.shape);
    cpu::generatorExpGrad(c.r.cref(), g.cref(), dy.cref(), dg.ref());
    const TD rd = toDouble(c.r), dyd = toDouble(dy);
    auto loss = [&](const TD &gd) {
      TD rot = TD::zeros(shape);
      ref::generatorExp<double>(rd.cref(), gd.cref(), rot.ref());
      double sum = 0.0;
      for (size_t i = 0; i < rot.values.size(); ++i)
        sum += dyd.values[i] * rot.values[i];
      return sum;
    };
    double scale = 0.0;
    for (float v : dg.values)
      scale = std::max(scale, std::fabs(double(v)));
    const double h = 1e-6;
    // A spread of entries (every 13th) to keep the test short.
    for (size_t e = 0; e < g.values.size(); e += 13) {
      TD plus = toDouble(g), minus = toDouble(g);
      plus.values[e] += h;
      minus.values[e] -= h;
      const double fd = (loss(plus) - loss(minus)) / (2 * h);
      EXPECT_NEAR(dg.values[e], fd, 1e-5 * scale + 1e-6)
          << "d=" << c.d << " K=" << c.count << " std=" << c.std << " entry " << e;
    }
  }
}

TEST(FastGeneratorExp, MisshapenOperandsThrowLikeTheReference) {
  const TF g = randomGenerators(2, 4, true, 0.1, 1);
  const TF r = randomTensor({3, 2}, 2);
  TF rot = TF::zeros({3, 4, 4});
  EXPECT_THROW(cpu::generatorExp(randomTensor({3, 3}, 3).cref(), g.cref(), rot.ref()), Error);
  EXPECT_THROW(cpu::generatorExp(r.cref(), randomTensor({2, 4, 5}, 4).cref(), rot.ref()), Error);
  EXPECT_THROW(cpu::generatorExp(r.cref(), g.cref(), TF::zeros({3, 4, 3}).ref()), Error);
  TF dg = TF::zeros({2, 4, 4});
  EXPECT_THROW(cpu::generatorExpGrad(r.cref(), g.cref(), TF::zeros({3, 4, 3}).cref(), dg.ref()),
               Error);
  EXPECT_THROW(cpu::generatorExpGrad(r.cref(), g.cref(), rot.cref(), TF::zeros({2, 4}).ref()),
               Error);
}

} // namespace
