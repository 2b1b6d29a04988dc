// Forward positional-encoding reference kernels: constant tables, the
// identities of each transform (norm preservation, shift invariance,
// Householder = rotation, orthogonal Cayley transforms, exponentials of
// commuting generators), the matrix exponential against independent values,
// shape errors, and float against double.
#include "FiniteDifference.h"
#include "PositionTestUtil.h"

#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace stringrt::ref {
namespace {

using namespace postest;
using fd::random;

// ------------------------------------------------------------- tables --

TEST(PositionTables, SeqPositions) {
  D p = seqPos(4, 2);
  EXPECT_EQ(p.shape, (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(p.values, (std::vector<double>{0, 0, 0, 1, 2, 3}));
}

TEST(PositionTables, GridPositionsLayout) {
  const int64_t rows = 3, cols = 4, special = 1;
  D p = gridPos(rows, cols, special);
  ASSERT_EQ(p.shape, (std::vector<int64_t>{1 + rows * cols, 2}));
  EXPECT_EQ(p.values[0], 0.0); // CLS at (0, 0): the identity rotation
  EXPECT_EQ(p.values[1], 0.0);
  for (int64_t t = 0; t < rows * cols; ++t) {
    EXPECT_EQ(p.values[2 * (special + t)], static_cast<double>(t % cols)) << t;
    EXPECT_EQ(p.values[2 * (special + t) + 1], static_cast<double>(t / cols)) << t;
  }
  D noSpecial = gridPos(2, 3, 0);
  EXPECT_EQ(noSpecial.values, (std::vector<double>{0, 0, 1, 0, 2, 0, 0, 1, 1, 1, 2, 1}));
}

TEST(PositionTables, RopeFreqsSeq) {
  // dim 12, 2 heads: Dh = 6, pair i of each head at 100^(-2i/6).
  D f = freqTable(FreqsKind::Seq, 12, 2, 100.0);
  ASSERT_EQ(f.shape, (std::vector<int64_t>{6, 1}));
  for (int64_t j = 0; j < 6; ++j)
    EXPECT_DOUBLE_EQ(f.values[j], std::pow(100.0, -2.0 * static_cast<double>(j % 3) / 6.0)) << j;
  Tensor<float> ff = freqTable<float>(FreqsKind::Seq, 12, 2, 100.0);
  for (int64_t j = 0; j < 6; ++j)
    EXPECT_EQ(ff.values[j], static_cast<float>(f.values[j])); // rounded once from double
}

TEST(PositionTables, RopeFreqsAxial) {
  // dim 16, 2 heads: Dh = 8, 4 pairs per head, the first 2 on x, the last 2 on y,
  // at 10^(-4i/8).
  D f = freqTable(FreqsKind::Axial, 16, 2, 10.0);
  ASSERT_EQ(f.shape, (std::vector<int64_t>{8, 2}));
  const double a0 = 1.0, a1 = std::pow(10.0, -0.5);
  const std::vector<double> head = {a0, 0, a1, 0, 0, a0, 0, a1};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_DOUBLE_EQ(f.values[h * 8 + i], head[i]) << h << " " << i;
}

TEST(PositionTables, SinusoidalMatchesSeedFormula) {
  const int64_t length = 7, dim = 8;
  D pe = D::zeros({length, dim});
  sinusoidal<double>(length, dim, 10000.0, pe.ref());
  auto at = [&](int64_t p, int64_t c) { return pe.values[p * dim + c]; };
  EXPECT_EQ(at(0, 0), 0.0);
  EXPECT_EQ(at(0, 1), 1.0);
  EXPECT_DOUBLE_EQ(at(3, 0), std::sin(3.0));
  EXPECT_DOUBLE_EQ(at(3, 1), std::cos(3.0));
  EXPECT_NEAR(at(5, 4), std::sin(0.05), 1e-15); // 5 / 10000^(4/8) = 0.05
  EXPECT_NEAR(at(5, 5), std::cos(0.05), 1e-15);
  EXPECT_NEAR(at(6, 2), std::sin(0.6), 1e-15); // 6 / 10000^(2/8) = 0.6
  EXPECT_NEAR(at(6, 7), std::cos(6.0 / std::pow(10000.0, 0.75)), 1e-15);
  Tensor<float> pf = Tensor<float>::zeros({length, dim});
  sinusoidal<float>(length, dim, 10000.0, pf.ref());
  for (size_t i = 0; i < pf.values.size(); ++i)
    EXPECT_EQ(pf.values[i], static_cast<float>(pe.values[i])) << i;
}

TEST(PositionTables, RelativePositions) {
  D pos = gridPos(2, 2, 1); // (0,0) (0,0) (1,0) (0,1) (1,1)
  D r = relPos(pos);
  ASSERT_EQ(r.shape, (std::vector<int64_t>{5, 5, 2}));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t a = 0; a < 2; ++a)
        EXPECT_EQ(r.values[(i * 5 + j) * 2 + a], pos.values[j * 2 + a] - pos.values[i * 2 + a]);
}

// -------------------------------------------------------------- rotary --

TEST(PositionRotary, RopePreservesPairNorms) {
  D x = random({2, 5, 8}, 1);
  D pos = random({5, 2}, 2, -3, 3);
  D f = random({4, 2}, 3);
  D y = ropeOf(x, pos, f);
  for (size_t p = 0; p < x.values.size(); p += 2) {
    const double nx = std::hypot(x.values[p], x.values[p + 1]);
    const double ny = std::hypot(y.values[p], y.values[p + 1]);
    EXPECT_NEAR(nx, ny, 1e-14) << p;
  }
}

TEST(PositionRotary, RopeKnownRotation) {
  // One pair, one token at position 2 with frequency pi/4: a quarter turn.
  D x({1, 1, 2}, {1.0, 2.0});
  D pos({1, 1}, {2.0});
  D f({1, 1}, {std::atan(1.0)}); // pi / 4
  D y = ropeOf(x, pos, f);
  EXPECT_NEAR(y.values[0], -2.0, 1e-15);
  EXPECT_NEAR(y.values[1], 1.0, 1e-15);
}

// <rope(q)_i, rope(k)_j> depends on pos[j] - pos[i] only: shifting every
// position by a constant leaves all scores unchanged (seq, axial and mixed).
void expectShiftInvariantScores(const D &pos, const D &f, const std::vector<double> &shift) {
  const int64_t T = pos.shape[0], A = pos.shape[1], width = 2 * f.shape[0];
  D q = random({1, T, width}, 11), k = random({1, T, width}, 12);
  D moved = pos;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t a = 0; a < A; ++a)
      moved.values[t * A + a] += shift[a];
  auto scores = [&](const D &p) {
    D rq = ropeOf(q, p, f), rk = ropeOf(k, p, f);
    std::vector<double> s(static_cast<size_t>(T * T), 0.0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        for (int64_t c = 0; c < width; ++c)
          s[i * T + j] += rq.values[i * width + c] * rk.values[j * width + c];
    return s;
  };
  const std::vector<double> before = scores(pos), after = scores(moved);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_NEAR(before[i], after[i], 1e-12) << i;
}

TEST(PositionRotary, RopeScoresShiftInvariantSeq) {
  expectShiftInvariantScores(seqPos(6, 0), freqTable(FreqsKind::Seq, 8, 1, 10.0), {3.0});
}

TEST(PositionRotary, RopeScoresShiftInvariantAxial) {
  expectShiftInvariantScores(gridPos(2, 3, 0), freqTable(FreqsKind::Axial, 8, 1, 10.0),
                             {2.0, -1.0});
}

TEST(PositionRotary, RopeScoresShiftInvariantMixed) {
  expectShiftInvariantScores(gridPos(2, 3, 0), random({4, 2}, 5), {0.5, 1.5});
}

TEST(PositionRotary, HouseholderEqualsRotationByTwiceTheDifference) {
  for (int64_t axes : {1, 2}) {
    D x = random({2, 4, 6}, 21);
    D pos = random({4, axes}, 22, -2, 2);
    D f1 = random({3, axes}, 23), f2 = random({3, axes}, 24);
    D y = householderOf(x, pos, f1, f2);
    D z = ropeOf(x, pos, lincomb(2.0, f2, -2.0, f1));
    EXPECT_LT(maxAbsDiff(y, z), 1e-14) << axes;
  }
}

// ---------------------------------------------------------- skew, cayley --

TEST(PositionCayley, SkewLayoutBatched) {
  D p = random({2, 6}, 31);
  D s = skewOf(p, 4);
  ASSERT_EQ(s.shape, (std::vector<int64_t>{2, 4, 4}));
  const int64_t pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  for (int64_t b = 0; b < 2; ++b) {
    const double *m = s.values.data() + b * 16;
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(m[i * 4 + i], 0.0);
    for (int64_t k = 0; k < 6; ++k) {
      EXPECT_EQ(m[pairs[k][0] * 4 + pairs[k][1]], p.values[b * 6 + k]);
      EXPECT_EQ(m[pairs[k][1] * 4 + pairs[k][0]], -p.values[b * 6 + k]);
    }
  }
}

TEST(PositionCayley, SparseSkewLayout) {
  // dim 4, support {0, 2, 5}: pairs (0,1), (0,3), (2,3).
  D p({3}, {1.5, -2.0, 0.25});
  D s = sparseSkewOf(p, 4, {0, 2, 5});
  D expected({4, 4}, {0, 1.5, 0, -2.0,     //
                      -1.5, 0, 0, 0,       //
                      0, 0, 0, 0.25,       //
                      2.0, 0, -0.25, 0});
  EXPECT_EQ(s.values, expected.values);
}

TEST(PositionCayley, CayleyIsOrthogonalForSkew) {
  const int64_t d = 5;
  D s = skewOf(random({d * (d - 1) / 2}, 41, -2, 2), d);
  // Token i is the basis vector e_i, so token i of the output is column i of U.
  D eye = D::zeros({d, d});
  for (int64_t i = 0; i < d; ++i)
    eye.values[i * d + i] = 1.0;
  D u = cayleyOf(eye, s); // u[i, :] = U e_i
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double dot = 0.0;
      for (int64_t m = 0; m < d; ++m)
        dot += u.values[i * d + m] * u.values[j * d + m];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-13) << i << " " << j;
    }
}

TEST(PositionCayley, CayleySolvesForAnyS) {
  // (I + S) y = (I - S) x, since (I - S) and (I + S)^-1 commute.
  const int64_t d = 4;
  D s = random({d, d}, 42, -0.6, 0.6);
  D x = random({3, 2, d}, 43);
  D y = cayleyOf(x, s);
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t i = 0; i < d; ++i) {
      double lhs = y.values[n * d + i], rhs = x.values[n * d + i];
      for (int64_t j = 0; j < d; ++j) {
        lhs += s.values[i * d + j] * y.values[n * d + j];
        rhs -= s.values[i * d + j] * x.values[n * d + j];
      }
      EXPECT_NEAR(lhs, rhs, 1e-13);
    }
}

TEST(PositionCayley, CayleySingularThrows) {
  D s = D::zeros({2, 2});
  s.values = {-1.0, 0.0, 0.0, -1.0}; // I + S = 0
  D x = random({1, 2}, 44);
  EXPECT_THROW(cayleyOf(x, s), Error);
}

// ---------------------------------------------------------- generators --

TEST(PositionGenerators, ExpOfRotationGenerator) {
  // exp(theta [[0, -1], [1, 0]]) = [[cos, -sin], [sin, cos]], also at angles
  // that need scaling and squaring.
  D gen({1, 2, 2}, {0.0, -1.0, 1.0, 0.0});
  for (double theta : {0.3, -2.5, 7.0, 40.0}) {
    D R = generatorExpOf(D({1}, {theta}), gen);
    const double c = std::cos(theta), s = std::sin(theta);
    EXPECT_NEAR(R.values[0], c, 1e-13) << theta;
    EXPECT_NEAR(R.values[1], -s, 1e-13) << theta;
    EXPECT_NEAR(R.values[2], s, 1e-13) << theta;
    EXPECT_NEAR(R.values[3], c, 1e-13) << theta;
  }
}

TEST(PositionGenerators, ExpMatchesTaylorSeriesAtSmallArgument) {
  const int64_t d = 5;
  D gen = random({1, d, d}, 51, -0.05, 0.05);
  D R = generatorExpOf(D({1}, {1.0}), gen);
  // sum_{n < 30} A^n / n!
  std::vector<double> term(static_cast<size_t>(d * d), 0.0), sum(term.size(), 0.0);
  for (int64_t i = 0; i < d; ++i)
    term[i * d + i] = 1.0;
  for (int n = 1; n <= 30; ++n) {
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += term[i];
    term = matmul(term.data(), gen.values.data(), d);
    for (double &v : term)
      v /= n;
  }
  for (size_t i = 0; i < sum.size(); ++i)
    EXPECT_NEAR(R.values[i], sum[i], 1e-15) << i;
}

TEST(PositionGenerators, ExpMatchesHighPrecisionValues) {
  // exp(A) and exp(3A) from mpmath.expm at 60 digits (||A||_1 = 6, so both
  // scale and square).
  D a({1, 4, 4}, {0.5, -1.25, 2.0, 0.75, 1.5, 0.25, -0.5, 3.0,   //
                  -2.25, 1.0, -0.75, 0.5, 0.25, -3.5, 1.75, -1.0});
  const double expA[16] = {
      -0.51575397370626805389, 0.11932775157717135212,  0.43771533847564532268,  -0.13101543898086254386,
      -0.79246467770495139956, -0.50269381372185200343, 0.73596019734862063967,  0.07757754578182785315,
      -0.64726686791586424505, 0.26529676954140122707,  -0.14120189680150372699, 0.41988008965633029162,
      -0.71289180699882845757, 0.46955879721611866282,  -0.88698529896453951386, -0.47498619323259503165};
  const double exp3A[16] = {
      -0.11352284590975931957, 0.16087265086454165716,  -0.33190850313013995938, -0.19119148435403633496,
      -0.1154144119362065094,  -0.24085212318996736812, 0.23414065200353404376,  -0.53942159731574596051,
      0.47831391465466970402,  -0.1733585353013792476,  0.12384067894956078476,  -0.10504590408529609093,
      -0.21412080930463897892, 0.64613200452713364425,  -0.24291603847117615931, 0.072164806204266314355};
  D R = generatorExpOf(D({2, 1}, {1.0, 3.0}), a);
  for (int i = 0; i < 16; ++i) {
    EXPECT_NEAR(R.values[i], expA[i], 1e-13) << i;
    EXPECT_NEAR(R.values[16 + i], exp3A[i], 1e-12) << i;
  }
}

TEST(PositionGenerators, ExpOfDiagonalAndInverse) {
  D diag({1, 3, 3}, {2.0, 0, 0, 0, -7.5, 0, 0, 0, 0.125});
  D R = generatorExpOf(D({1}, {1.0}), diag);
  EXPECT_NEAR(R.values[0] / std::exp(2.0), 1.0, 1e-14);
  EXPECT_NEAR(R.values[4] / std::exp(-7.5), 1.0, 1e-13);
  EXPECT_NEAR(R.values[8] / std::exp(0.125), 1.0, 1e-14);
  // exp(A) exp(-A) = I for a random A with ||A|| well above theta13.
  const int64_t d = 4;
  D gen = random({1, d, d}, 52, -3, 3);
  D both = generatorExpOf(D({2, 1}, {1.0, -1.0}), gen);
  std::vector<double> prod = matmul(both.values.data(), both.values.data() + d * d, d);
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      EXPECT_NEAR(prod[i * d + j], i == j ? 1.0 : 0.0, 1e-11) << i << " " << j;
}

TEST(PositionGenerators, CommutingGeneratorsGiveRelativeRotations) {
  // R(a)^T R(b) = R(b - a) for commuting skew generators, with b - a from
  // relative_positions.
  D gens = blockGenerators({{1.0, 0.3}, {0.2, -0.7}});
  D pos = random({4, 2}, 61, -3, 3);
  D R = generatorExpOf(pos, gens);       // [4, 4, 4]
  D Rrel = generatorExpOf(relPos(pos), gens); // [4, 4, 4, 4]
  const int64_t d = 4, T = 4;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      const double *ri = R.values.data() + i * d * d, *rj = R.values.data() + j * d * d;
      for (int64_t m = 0; m < d; ++m)
        for (int64_t n = 0; n < d; ++n) {
          double v = 0.0; // (R_i^T R_j)[m, n]
          for (int64_t l = 0; l < d; ++l)
            v += ri[l * d + m] * rj[l * d + n];
          EXPECT_NEAR(v, Rrel.values[((i * T + j) * d + m) * d + n], 1e-13);
        }
    }
}

TEST(PositionGenerators, ApplyRotationOfBlockRotationsIsRope) {
  // generator_exp of one block generator per pair frequency, applied per
  // head, equals rope with those frequencies repeated in every head.
  const int64_t heads = 2, T = 5;
  D gens = blockGenerators({{0.9, 0.25}});
  D pos = seqPos(T - 1, 1);
  D R = generatorExpOf(pos, gens); // [T, 4, 4]
  D x = random({2, T, heads * 4}, 62);
  D f({4, 1}, {0.9, 0.25, 0.9, 0.25});
  EXPECT_LT(maxAbsDiff(applyRotationOf(x, R, heads), ropeOf(x, pos, f)), 1e-14);
}

TEST(PositionGenerators, CommutatorNormValue) {
  // [E01, E10] = diag(1, -1): norm sqrt 2; the zero generator commutes with both.
  D gens({3, 2, 2}, {0, 1, 0, 0, /**/ 0, 0, 0, 0, /**/ 0, 0, 1, 0});
  EXPECT_NEAR(commutatorNormOf(gens).values[0], std::sqrt(2.0), 1e-15);
  D commuting = blockGenerators({{1.0, 2.0}, {-0.5, 3.0}});
  EXPECT_EQ(commutatorNormOf(commuting).values[0], 0.0);
}

TEST(PositionGenerators, SpdGateValues) {
  D x = random({2, 3, 4}, 71);
  D g1 = random({4}, 72), g2 = random({3, 4}, 73);
  D y1 = spdGateOf(x, g1), y2 = spdGateOf(x, g2);
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_DOUBLE_EQ(y1.values[i], x.values[i] * std::exp(g1.values[i % 4]));
    EXPECT_DOUBLE_EQ(y2.values[i], x.values[i] * std::exp(g2.values[i % 12]));
  }
}

// -------------------------------------------------------------- errors --

TEST(PositionErrors, ShapeAndAttributeViolationsThrow) {
  D x = random({1, 3, 5}, 81); // odd width
  EXPECT_THROW(ropeOf(x, seqPos(3, 0), D::zeros({2, 1})), Error);
  EXPECT_THROW(ropeOf(random({1, 3, 4}, 82), seqPos(4, 0), D::zeros({2, 1})), Error);
  EXPECT_THROW(sparseSkewOf(D::zeros({2}), 4, {3, 1}), Error);  // not increasing
  EXPECT_THROW(sparseSkewOf(D::zeros({1}), 4, {6}), Error);     // out of range
  EXPECT_THROW(commutatorNormOf(D::zeros({1, 2, 2})), Error);   // K < 2
  EXPECT_THROW(freqTable(FreqsKind::Axial, 12, 2, 10.0), Error); // Dh = 6, not a multiple of 4
  EXPECT_THROW(applyRotationOf(random({1, 2, 6}, 83), D::zeros({2, 3, 3}), 4), Error);
  EXPECT_THROW(spdGateOf(random({2, 3, 4}, 84), D::zeros({3})), Error);
  D pe = D::zeros({2, 3});
  EXPECT_THROW(sinusoidal<double>(2, 3, 10000.0, pe.ref()), Error); // odd dim
}

// ------------------------------------------------------ float vs double --

// Inputs representable in float, so both precisions see the same values and
// differ only by the final rounding (every kernel computes in double).
template <typename F>
void expectFloatMatchesDouble(const char *name, F &&run, std::vector<D> inputs) {
  std::vector<Tensor<float>> fin;
  for (D &in : inputs) {
    fin.push_back(fd::cast<float>(in));
    in = fd::cast<double>(fin.back());
  }
  const std::vector<D> outD = run(inputs);
  const std::vector<Tensor<float>> outF = run(fin);
  ASSERT_EQ(outD.size(), outF.size());
  for (size_t i = 0; i < outD.size(); ++i)
    EXPECT_LE(maxAbsDiff(outD[i], outF[i]), 1e-5 * std::max(1.0, maxAbs(outD[i])))
        << name << " output " << i;
}

TEST(PositionPrecision, FloatMatchesDouble) {
  auto ropeRun = [](const auto &in) {
    return std::vector{ropeOf(in[0], in[1], in[2]), ropeGradFreqsOf(in[0], in[1], in[2], in[3])};
  };
  expectFloatMatchesDouble("rope", ropeRun,
                           {random({2, 5, 8}, 1), random({5, 2}, 2, -4, 4), random({4, 2}, 3),
                            random({2, 5, 8}, 4)});
  auto hhRun = [](const auto &in) {
    auto [d1, d2] = householderGradFreqsOf(in[0], in[1], in[2], in[3], in[4]);
    return std::vector{householderOf(in[0], in[1], in[2], in[3]), d1, d2};
  };
  expectFloatMatchesDouble("householder", hhRun,
                           {random({2, 5, 8}, 5), random({5, 1}, 6, 0, 5), random({4, 1}, 7),
                            random({4, 1}, 8), random({2, 5, 8}, 9)});
  auto cayleyRun = [](const auto &in) {
    auto s = skewOf(in[1], 4);
    auto [dx, ds] = cayleyGradOf(in[0], s, in[2]);
    return std::vector{cayleyOf(in[0], s), dx, ds, skewGradOf(ds, 4)};
  };
  expectFloatMatchesDouble("cayley", cayleyRun,
                           {random({3, 4}, 10), random({6}, 11, -2, 2), random({3, 4}, 12)});
  auto genRun = [](const auto &in) {
    auto r = relPos(in[0]);
    auto R = generatorExpOf(r, in[1]);
    return std::vector{R, generatorExpGradOf(r, in[1], in[2]), commutatorNormOf(in[1]),
                       commutatorNormGradOf(in[1], 1.5)};
  };
  expectFloatMatchesDouble("generators", genRun,
                           {random({3, 2}, 13, -2, 2), random({2, 3, 3}, 14), random({3, 3, 3, 3}, 15)});
  auto rotRun = [](const auto &in) {
    auto [dx, dr] = applyRotationGradOf(in[0], in[1], in[2], 2);
    auto [gx, gg] = spdGateGradOf(in[0], in[3], in[2]);
    return std::vector{applyRotationOf(in[0], in[1], 2), dx, dr, spdGateOf(in[0], in[3]), gx, gg};
  };
  expectFloatMatchesDouble("rotation", rotRun,
                           {random({2, 3, 6}, 16), random({3, 3, 3}, 17), random({2, 3, 6}, 18),
                            random({3, 6}, 19)});
}

} // namespace
} // namespace stringrt::ref
