//===- ElementwiseKernels.cpp - add/sub/mul, scale, gelu, relu kernels ----===//
//
// One thread per element in a grid-stride loop. Binary ops broadcast a
// trailing suffix (docs/dialect.md): in row-major order that is a modulo, so
// the broadcast operand is read at `i % n_operand`. Three variants per op
// avoid the modulo where no operand is broadcast: `pe_add` (same shapes),
// `pe_add_bl` (lhs broadcast) and `pe_add_br` (rhs broadcast), all with the
// parameters (out, lhs, rhs, n, n_lhs, n_rhs). Math matches the reference
// kernels (runtime/src/ops/layer/: Add.cpp, Sub.cpp, Mul.cpp, Scale.cpp, Gelu.cpp
// and Relu.cpp) evaluated in f32.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluC = 0.044715;

GpuKernelSpec unarySpec(std::string name, llvm::StringRef peOp, std::vector<std::string> ins) {
  GpuKernelSpec spec;
  spec.name = std::move(name);
  spec.peOp = peOp.str();
  spec.params.push_back({"out", ParamKind::Ptr});
  for (std::string &in : ins)
    spec.params.push_back({in, ParamKind::Ptr});
  spec.params.push_back({"n", ParamKind::I64});
  return spec;
}

enum class Broadcast { None, Lhs, Rhs };

void appendBinary(std::vector<KernelDef> &defs, const char *op, llvm::StringRef peOp,
                  const std::function<Value(KernelBuilder &, Value, Value)> &apply) {
  const std::pair<Broadcast, const char *> variants[] = {
      {Broadcast::None, ""}, {Broadcast::Lhs, "_bl"}, {Broadcast::Rhs, "_br"}};
  for (auto [broadcast, suffix] : variants) {
    GpuKernelSpec spec;
    spec.name = std::string("pe_") + op + suffix;
    spec.peOp = peOp.str();
    spec.params = {{"out", ParamKind::Ptr},  {"lhs", ParamKind::Ptr},
                   {"rhs", ParamKind::Ptr},  {"n", ParamKind::I64},
                   {"n_lhs", ParamKind::I64}, {"n_rhs", ParamKind::I64}};
    Broadcast mode = broadcast;
    defs.push_back({spec, [mode, apply](KernelBuilder &k) {
                      OpBuilder &b = k.builder();
                      Location loc = k.location();
                      k.forGridStride(k.arg(3), [&](Value i) {
                        Value il = mode == Broadcast::Lhs
                                       ? Value(b.create<arith::RemUIOp>(loc, i, k.arg(4)))
                                       : i;
                        Value ir = mode == Broadcast::Rhs
                                       ? Value(b.create<arith::RemUIOp>(loc, i, k.arg(5)))
                                       : i;
                        Value y = apply(k, k.load(k.arg(1), il), k.load(k.arg(2), ir));
                        k.store(y, k.arg(0), i);
                      });
                    }});
    defs.back().storageParams = {0, 1, 2};
  }
}

/// A kernel out[i] = f(in_0[i], ..., in_k[i]) over the params of unarySpec.
void appendMap(std::vector<KernelDef> &defs, GpuKernelSpec spec,
               std::function<Value(KernelBuilder &, ArrayRef<Value>)> f) {
  unsigned inputs = unsigned(spec.params.size()) - 2;
  defs.push_back({spec, [inputs, f](KernelBuilder &k) {
                    k.forGridStride(k.arg(inputs + 1), [&](Value i) {
                      SmallVector<Value> xs;
                      for (unsigned j = 0; j < inputs; ++j)
                        xs.push_back(k.load(k.arg(1 + j), i));
                      k.store(f(k, xs), k.arg(0), i);
                    });
                  }});
  for (unsigned p = 0; p <= inputs; ++p)
    defs.back().storageParams.push_back(p);
}

Value geluValue(KernelBuilder &k, Value x, bool approximate) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  Value half = k.f32(0.5), one = k.f32(1.0);
  Value inner;
  if (approximate) {
    Value x3 = k.mul(k.mul(x, x), x);
    Value arg = k.mul(k.f32(kSqrt2OverPi), k.add(x, k.mul(k.f32(kGeluC), x3)));
    inner = b.create<math::TanhOp>(loc, arg);
  } else {
    inner = b.create<math::ErfOp>(loc, k.mul(x, k.f32(kInvSqrt2)));
  }
  return k.mul(k.mul(half, x), k.add(one, inner));
}

Value geluDerivative(KernelBuilder &k, Value x, bool approximate) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  Value half = k.f32(0.5), one = k.f32(1.0);
  if (approximate) {
    Value x2 = k.mul(x, x);
    Value arg = k.mul(k.f32(kSqrt2OverPi), k.add(x, k.mul(k.f32(kGeluC), k.mul(x2, x))));
    Value t = b.create<math::TanhOp>(loc, arg);
    Value left = k.mul(half, k.add(one, t));
    Value sech2 = k.sub(one, k.mul(t, t));
    Value dArg = k.mul(k.f32(kSqrt2OverPi), k.add(one, k.mul(k.f32(3.0 * kGeluC), x2)));
    return k.add(left, k.mul(k.mul(k.mul(half, x), sech2), dArg));
  }
  // Phi(x) + x phi(x)
  Value cdf = k.mul(half, k.add(one, b.create<math::ErfOp>(loc, k.mul(x, k.f32(kInvSqrt2)))));
  Value pdf = k.mul(k.f32(kInvSqrt2Pi),
                    b.create<math::ExpOp>(loc, k.mul(k.f32(-0.5), k.mul(x, x))));
  return k.add(cdf, k.mul(x, pdf));
}

} // namespace

void appendElementwiseKernels(std::vector<KernelDef> &defs) {
  appendBinary(defs, "add", pe::AddOp::getOperationName(),
               [](KernelBuilder &k, Value a, Value c) { return k.add(a, c); });
  appendBinary(defs, "sub", pe::SubOp::getOperationName(),
               [](KernelBuilder &k, Value a, Value c) { return k.sub(a, c); });
  appendBinary(defs, "mul", pe::MulOp::getOperationName(),
               [](KernelBuilder &k, Value a, Value c) { return k.mul(a, c); });

  // out = factor * x + bias
  GpuKernelSpec scale = unarySpec("pe_scale", pe::ScaleOp::getOperationName(), {"x"});
  scale.params.push_back({"factor", ParamKind::F32});
  scale.params.push_back({"bias", ParamKind::F32});
  defs.push_back({scale, [](KernelBuilder &k) {
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value y = k.add(k.mul(k.arg(3), k.load(k.arg(1), i)), k.arg(4));
                      k.store(y, k.arg(0), i);
                    });
                  }});
  defs.back().storageParams = {0, 1};

  for (bool approximate : {false, true}) {
    std::string suffix = approximate ? "_tanh" : "";
    appendMap(defs, unarySpec("pe_gelu" + suffix, pe::GeluOp::getOperationName(), {"x"}),
              [approximate](KernelBuilder &k, ArrayRef<Value> xs) {
                return geluValue(k, xs[0], approximate);
              });
    appendMap(defs,
              unarySpec("pe_gelu_grad" + suffix, pe::GeluGradOp::getOperationName(), {"x", "dy"}),
              [approximate](KernelBuilder &k, ArrayRef<Value> xs) {
                return k.mul(xs[1], geluDerivative(k, xs[0], approximate));
              });
  }

  // relu keeps NaN (as the reference: v > 0 || isnan(v) ? v : 0): `ugt`.
  appendMap(defs, unarySpec("pe_relu", pe::ReluOp::getOperationName(), {"x"}),
            [](KernelBuilder &k, ArrayRef<Value> xs) -> Value {
              OpBuilder &b = k.builder();
              Value keep = b.create<arith::CmpFOp>(k.location(), arith::CmpFPredicate::UGT,
                                                   xs[0], k.f32(0.0));
              return b.create<arith::SelectOp>(k.location(), keep, xs[0], k.f32(0.0));
            });
  appendMap(defs, unarySpec("pe_relu_grad", pe::ReluGradOp::getOperationName(), {"x", "dy"}),
            [](KernelBuilder &k, ArrayRef<Value> xs) -> Value {
              OpBuilder &b = k.builder();
              Value pass = b.create<arith::CmpFOp>(k.location(), arith::CmpFPredicate::OGT,
                                                   xs[0], k.f32(0.0));
              return b.create<arith::SelectOp>(k.location(), pass, xs[1], k.f32(0.0));
            });
}

} // namespace stringc::cudagen

namespace stringc::cudagen {
namespace {

using A = LaunchArg;

OpSteps single(Operation &, std::string kernel, std::vector<LaunchArg> args) {
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(std::move(kernel), std::move(args)));
  return steps;
}

/// pe.add/sub/mul: (out, lhs, rhs, n, n_lhs, n_rhs); the variant by which
/// operand is broadcast (a trailing suffix of the result).
template <typename OpT> OpLowering binaryLowering(const char *op) {
  std::string base = std::string("pe_") + op;
  return loweringOf<OpT>([base](Operation &o) -> std::optional<OpSteps> {
            Type result = o.getResult(0).getType();
            std::string kernel = base;
            if (o.getOperand(0).getType() != result)
              kernel += "_bl";
            else if (o.getOperand(1).getType() != result)
              kernel += "_br";
            return single(o, kernel,
                          {A::result(0), A::operand(0), A::operand(1), A::i64(elementCount(result)),
                           A::i64(elementCount(o.getOperand(0).getType())),
                           A::i64(elementCount(o.getOperand(1).getType()))});
          });
}

} // namespace

void appendElementwiseLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(binaryLowering<pe::AddOp>("add"));
  lowerings.push_back(binaryLowering<pe::SubOp>("sub"));
  lowerings.push_back(binaryLowering<pe::MulOp>("mul"));
  lowerings.push_back(loweringOf<pe::ScaleOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto scale = cast<pe::ScaleOp>(o);
                         return single(o, "pe_scale",
                                       {A::result(0), A::operand(0),
                                        A::i64(elementCount(o.getResult(0).getType())),
                                        A::f32(float(scale.getFactor().convertToDouble())),
                                        A::f32(float(scale.getBias().convertToDouble()))});
                       }));
  lowerings.push_back(loweringOf<pe::GeluOp>([](Operation &o) -> std::optional<OpSteps> {
                         bool tanh = cast<pe::GeluOp>(o).getApproximate();
                         return single(o, tanh ? "pe_gelu_tanh" : "pe_gelu",
                                       {A::result(0), A::operand(0),
                                        A::i64(elementCount(o.getResult(0).getType()))});
                       }));
  lowerings.push_back(loweringOf<pe::GeluGradOp>([](Operation &o) -> std::optional<OpSteps> {
                         bool tanh = cast<pe::GeluGradOp>(o).getApproximate();
                         return single(o, tanh ? "pe_gelu_grad_tanh" : "pe_gelu_grad",
                                       {A::result(0), A::operand(0), A::operand(1),
                                        A::i64(elementCount(o.getResult(0).getType()))});
                       }));
  lowerings.push_back(loweringOf<pe::ReluOp>([](Operation &o) -> std::optional<OpSteps> {
                         return single(o, "pe_relu",
                                       {A::result(0), A::operand(0),
                                        A::i64(elementCount(o.getResult(0).getType()))});
                       }));
  lowerings.push_back(loweringOf<pe::ReluGradOp>([](Operation &o) -> std::optional<OpSteps> {
                         return single(o, "pe_relu_grad",
                                       {A::result(0), A::operand(0), A::operand(1),
                                        A::i64(elementCount(o.getResult(0).getType()))});
                       }));
}

} // namespace stringc::cudagen
