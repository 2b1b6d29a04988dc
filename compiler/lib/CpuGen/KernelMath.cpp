//===- KernelMath.cpp - exp and erf for the generated kernels -------------===//
//
// MemrefKernelBuilder::expOfNonPositive and MemrefKernelBuilder::erf: cheaper than MLIR's
// polynomial approximations of math.exp and math.erf (which handle any
// argument), for the arguments the kernels have. They took a third of the
// attention forward's time and two thirds of gelu's (vit_rope on a Zen 3
// core, perf). Both work on an f32 or on a vector of f32.
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

/// Constants and lane-wise helpers of the type of a value: f32, or a vector
/// of f32 (then the constants are splats).
class Lanes {
public:
  Lanes(OpBuilder &b, Location loc, Type type) : b(b), loc(loc), vector(dyn_cast<VectorType>(type)) {}

  /// `element`, or a vector of it of the value's shape.
  Type like(Type element) const {
    return vector ? Type(VectorType::get(vector.getShape(), element)) : element;
  }
  Value f32(float v) { return constant(b.getF32Type(), b.getF32FloatAttr(v)); }
  Value i32(int32_t v) { return constant(b.getI32Type(), b.getI32IntegerAttr(v)); }
  Value fma(Value a, Value m, Value acc) { return b.create<math::FmaOp>(loc, a, m, acc); }
  /// x clamped to [lo, hi] by compare-and-select (unordered: a NaN passes):
  /// one vmaxps / vminps each on x86, where arith.maximumf adds a NaN test
  /// and a blend.
  Value clamp(Value x, float lo, float hi) {
    x = select(arith::CmpFPredicate::UGE, x, f32(lo));
    return select(arith::CmpFPredicate::ULE, x, f32(hi));
  }
  /// c[0] x^n + c[1] x^(n-1) + .. + c[n] by Horner's rule with FMAs.
  Value horner(llvm::ArrayRef<float> c, Value x) {
    Value acc = f32(c[0]);
    for (float k : c.drop_front())
      acc = fma(acc, x, f32(k));
    return acc;
  }

private:
  Value constant(Type element, TypedAttr value) {
    Type type = like(element);
    auto attr = vector ? TypedAttr(DenseElementsAttr::get(cast<ShapedType>(type), Attribute(value))) : value;
    return b.create<arith::ConstantOp>(loc, attr);
  }
  Value select(arith::CmpFPredicate keep, Value v, Value bound) {
    Value cmp = b.create<arith::CmpFOp>(loc, keep, v, bound);
    return b.create<arith::SelectOp>(loc, cmp, v, bound);
  }

  OpBuilder &b;
  Location loc;
  VectorType vector;
};

} // namespace

Value MemrefKernelBuilder::expOfNonPositive(Value x) {
  Lanes lanes(builder, location, x.getType());
  auto c = [&](float v) { return lanes.f32(v); };
  auto fma = [&](Value a, Value m, Value acc) { return lanes.fma(a, m, acc); };
  x = lanes.clamp(x, -87.0f, 0.0f);
  // t = x log2(e) + 1.5 * 2^23 + 127, rounded to an integer by the add (its
  // ulp is 1): n = t - 1.5 * 2^23 - 127 exactly, and t's low mantissa bits
  // hold n + 127, which shifted into the exponent field make 2^n (n >= -126).
  const float magic = 12582912.0f + 127.0f;
  Value t = fma(x, c(1.44269504088896341f), c(magic));
  Value n = sub(t, c(magic));
  // r = x - n ln 2 in two steps (ln 2 = 0.693359375 - 2.12194440e-4, the
  // first exact in few bits), then e^r = 1 + r + r^2 p(r).
  Value r = fma(n, c(-0.693359375f), x);
  r = fma(n, c(2.12194440e-4f), r);
  Value z = lanes.horner({1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f, 4.1665795894E-2f,
                          1.6666665459E-1f, 5.0000001201E-1f},
                         r);
  z = fma(z, mul(r, r), r);
  z = add(c(1.0f), z);
  Value bits = builder.create<arith::BitcastOp>(location, lanes.like(builder.getI32Type()), t);
  bits = builder.create<arith::ShLIOp>(location, bits, lanes.i32(23));
  return mul(z, builder.create<arith::BitcastOp>(location, x.getType(), bits));
}

Value MemrefKernelBuilder::erf(Value x) {
  // erf(x) ~ x P(x^2) / Q(x^2) on [-4, 4], P of degree 6 and Q of degree 4
  // (the rational approximation of Eigen's and XLA's float erf); beyond,
  // erf(+-4) = +-(1 - 1.5e-8) rounds to +-1. Within 3.4e-7 of erf (float
  // evaluation with FMAs on a grid of 2e6 points over [-6, 6]; MLIR's three
  // intervals: 2.5e-7), with one division and no selects between
  // coefficient sets.
  Lanes lanes(builder, location, x.getType());
  x = lanes.clamp(x, -4.0f, 4.0f);
  Value x2 = mul(x, x);
  Value p = lanes.horner({-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                          -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                          -1.60960333262415e-02f},
                         x2);
  Value q = lanes.horner({-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                          -7.37332916720468e-03f, -1.42647390514189e-02f},
                         x2);
  return div(mul(x, p), q);
}

} // namespace stringc::codegen::detail
