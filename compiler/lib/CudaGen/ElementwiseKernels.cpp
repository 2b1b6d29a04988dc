//===- ElementwiseKernels.cpp - add/sub/mul, scale, gelu, relu kernels ----===//
//
// Grid-stride loops over the elements. Binary ops broadcast a trailing
// suffix (docs/dialect.md): in row-major order that is a modulo, so the
// broadcast operand is read at `i % n_operand`. Three variants per op avoid
// the modulo where no operand is broadcast: `pe_add` (same shapes), and
// `pe_add_bl` (lhs broadcast) and `pe_add_br` (rhs broadcast), with the
// parameters (out, lhs, rhs, n, n_lhs, n_rhs), one thread per element.
//
// The same-shape binaries and the maps (scale, gelu, gelu_grad, relu,
// relu_grad) are vectorised: parameters (out, inputs..., threads, n[,
// scalars]), each thread handling kElementwiseVector = 8 elements per
// iteration with 16-byte loads and stores (one vector of 8 bf16 or two of 4
// f32 per pointer, KernelBuilder::loadVector), the n % 8 last elements one
// per thread. `threads` (elementwiseThreads: about n / 8) is the first i64,
// so the Elements grid rule launches that many threads. Whether every
// pointer is 16-byte aligned is checked in the kernel: when one is not (a
// slice at an odd offset), the whole launch takes the scalar loop, one
// element per iteration. Both loops compute each element with the same f32
// code, so their results are the same bits.
//
// Math matches the reference kernels (runtime/src/ops/layer/: Add.cpp,
// Sub.cpp, Mul.cpp, Scale.cpp, Gelu.cpp and Relu.cpp) evaluated in f32.
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

/// A vectorised kernel's spec: (out, inputs..., threads, n).
GpuKernelSpec vectorSpec(std::string name, llvm::StringRef peOp, std::vector<std::string> ins) {
  GpuKernelSpec spec;
  spec.name = std::move(name);
  spec.peOp = peOp.str();
  spec.params.push_back({"out", ParamKind::Ptr});
  for (std::string &in : ins)
    spec.params.push_back({in, ParamKind::Ptr});
  spec.params.push_back({"threads", ParamKind::I64});
  spec.params.push_back({"n", ParamKind::I64});
  return spec;
}

using ElementFn = std::function<Value(KernelBuilder &, ArrayRef<Value>)>;

/// out[i] = f(ins[0][i], ...) for i < n: kElementwiseVector elements per
/// iteration with 16-byte accesses when every pointer is 16-byte aligned,
/// then the tail; else one element per iteration.
void vectorisedLoop(KernelBuilder &k, Value out, ArrayRef<Value> ins, Value n, const ElementFn &f) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  auto scalar = [&](Value i) {
    SmallVector<Value> xs;
    for (Value in : ins)
      xs.push_back(k.load(in, i));
    k.store(f(k, xs), out, i);
  };
  SmallVector<Value> pointers{out};
  llvm::append_range(pointers, ins);
  k.ifThenElse(
      k.aligned16(pointers),
      [&] {
        Value width = k.i64(kElementwiseVector);
        Value vectors = b.create<arith::DivUIOp>(loc, n, width);
        k.forGridStride(vectors, [&](Value v) {
          Value first = k.mul(v, width);
          SmallVector<SmallVector<Value>> lanes;
          for (Value in : ins)
            lanes.push_back(k.loadVector(in, first, kElementwiseVector));
          SmallVector<Value> ys;
          for (int64_t j = 0; j < kElementwiseVector; ++j) {
            SmallVector<Value> xs;
            for (const SmallVector<Value> &in : lanes)
              xs.push_back(in[size_t(j)]);
            ys.push_back(f(k, xs));
          }
          k.storeVector(ys, out, first);
        });
        k.forGridStride(n, scalar, k.mul(vectors, width)); // the tail
      },
      [&] { k.forGridStride(n, scalar); });
}

/// A vectorised kernel out[i] = f(in_0[i], ..., in_k[i]) over the params of
/// vectorSpec and `scalars` more (f reads them as kernel arguments).
void appendVectorised(std::vector<KernelDef> &defs, GpuKernelSpec spec, ElementFn f,
                      unsigned scalars = 0) {
  unsigned inputs = unsigned(spec.params.size()) - 3 - scalars;
  defs.push_back({spec, [inputs, f](KernelBuilder &k) {
                    SmallVector<Value> ins;
                    for (unsigned j = 0; j < inputs; ++j)
                      ins.push_back(k.arg(1 + j));
                    vectorisedLoop(k, k.arg(0), ins, k.arg(inputs + 2), f);
                  }});
  for (unsigned p = 0; p <= inputs; ++p)
    defs.back().storageParams.push_back(p);
  defs.back().elementsPerLoad = kElementwiseVector;
}

enum class Broadcast { Lhs, Rhs };

void appendBinary(std::vector<KernelDef> &defs, const char *op, llvm::StringRef peOp,
                  const std::function<Value(KernelBuilder &, Value, Value)> &apply) {
  appendVectorised(defs, vectorSpec(std::string("pe_") + op, peOp, {"lhs", "rhs"}),
                   [apply](KernelBuilder &k, ArrayRef<Value> xs) { return apply(k, xs[0], xs[1]); });
  const std::pair<Broadcast, const char *> variants[] = {{Broadcast::Lhs, "_bl"},
                                                         {Broadcast::Rhs, "_br"}};
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
  GpuKernelSpec scale = vectorSpec("pe_scale", pe::ScaleOp::getOperationName(), {"x"});
  scale.params.push_back({"factor", ParamKind::F32});
  scale.params.push_back({"bias", ParamKind::F32});
  appendVectorised(
      defs, scale,
      [](KernelBuilder &k, ArrayRef<Value> xs) { return k.add(k.mul(k.arg(4), xs[0]), k.arg(5)); },
      /*scalars=*/2);

  for (bool approximate : {false, true}) {
    std::string suffix = approximate ? "_tanh" : "";
    appendVectorised(defs, vectorSpec("pe_gelu" + suffix, pe::GeluOp::getOperationName(), {"x"}),
              [approximate](KernelBuilder &k, ArrayRef<Value> xs) {
                return geluValue(k, xs[0], approximate);
              });
    appendVectorised(defs,
                     vectorSpec("pe_gelu_grad" + suffix, pe::GeluGradOp::getOperationName(), {"x", "dy"}),
              [approximate](KernelBuilder &k, ArrayRef<Value> xs) {
                return k.mul(xs[1], geluDerivative(k, xs[0], approximate));
              });
  }

  // relu keeps NaN (as the reference: v > 0 || isnan(v) ? v : 0): `ugt`.
  appendVectorised(defs, vectorSpec("pe_relu", pe::ReluOp::getOperationName(), {"x"}),
            [](KernelBuilder &k, ArrayRef<Value> xs) -> Value {
              OpBuilder &b = k.builder();
              Value keep = b.create<arith::CmpFOp>(k.location(), arith::CmpFPredicate::UGT,
                                                   xs[0], k.f32(0.0));
              return b.create<arith::SelectOp>(k.location(), keep, xs[0], k.f32(0.0));
            });
  appendVectorised(defs, vectorSpec("pe_relu_grad", pe::ReluGradOp::getOperationName(), {"x", "dy"}),
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

/// A vectorised kernel's sizes over `n` elements: threads, n.
std::vector<LaunchArg> vectorSizes(BatchAffine n) {
  return {A::i64(elementwiseThreads(n)), A::i64(n)};
}

/// pe.add/sub/mul: the vectorised kernel (out, lhs, rhs, threads, n) on
/// operands of the result's shape, else the variant by which operand is
/// broadcast (a trailing suffix of the result): (out, lhs, rhs, n, n_lhs,
/// n_rhs).
template <typename OpT> OpLowering binaryLowering(const char *op) {
  std::string base = std::string("pe_") + op;
  return loweringOf<OpT>([base](Operation &o) -> std::optional<OpSteps> {
            Type result = o.getResult(0).getType();
            BatchAffine n = elementCount(result);
            std::vector<LaunchArg> args = {A::result(0), A::operand(0), A::operand(1)};
            std::string kernel = base;
            if (o.getOperand(0).getType() != result)
              kernel += "_bl";
            else if (o.getOperand(1).getType() != result)
              kernel += "_br";
            if (kernel == base) {
              llvm::append_range(args, vectorSizes(n));
            } else {
              args.push_back(A::i64(n));
              args.push_back(A::i64(elementCount(o.getOperand(0).getType())));
              args.push_back(A::i64(elementCount(o.getOperand(1).getType())));
            }
            return single(o, kernel, std::move(args));
          });
}

/// A map's launch: out = result 0, its operands, threads, n, then `scalars`.
std::vector<LaunchArg> mapArgs(Operation &o, std::vector<LaunchArg> scalars = {}) {
  std::vector<LaunchArg> args = {A::result(0)};
  for (unsigned i = 0; i < o.getNumOperands(); ++i)
    args.push_back(A::operand(i));
  llvm::append_range(args, vectorSizes(elementCount(o.getResult(0).getType())));
  llvm::append_range(args, scalars);
  return args;
}

} // namespace

BatchAffine elementwiseThreads(BatchAffine n) {
  auto up = [](int64_t v) { // ceil(v / kElementwiseVector), v of either sign
    return v >= 0 ? (v + kElementwiseVector - 1) / kElementwiseVector : -(-v / kElementwiseVector);
  };
  return {up(n.perBatch), up(n.constant)};
}

void appendElementwiseLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(binaryLowering<pe::AddOp>("add"));
  lowerings.push_back(binaryLowering<pe::SubOp>("sub"));
  lowerings.push_back(binaryLowering<pe::MulOp>("mul"));
  lowerings.push_back(loweringOf<pe::ScaleOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto scale = cast<pe::ScaleOp>(o);
                         return single(o, "pe_scale",
                                       mapArgs(o, {A::f32(float(scale.getFactor().convertToDouble())),
                                                   A::f32(float(scale.getBias().convertToDouble()))}));
                       }));
  lowerings.push_back(loweringOf<pe::GeluOp>([](Operation &o) -> std::optional<OpSteps> {
                         bool tanh = cast<pe::GeluOp>(o).getApproximate();
                         return single(o, tanh ? "pe_gelu_tanh" : "pe_gelu", mapArgs(o));
                       }));
  lowerings.push_back(loweringOf<pe::GeluGradOp>([](Operation &o) -> std::optional<OpSteps> {
                         bool tanh = cast<pe::GeluGradOp>(o).getApproximate();
                         return single(o, tanh ? "pe_gelu_grad_tanh" : "pe_gelu_grad", mapArgs(o));
                       }));
  lowerings.push_back(loweringOf<pe::ReluOp>([](Operation &o) -> std::optional<OpSteps> {
                         return single(o, "pe_relu", mapArgs(o));
                       }));
  lowerings.push_back(loweringOf<pe::ReluGradOp>([](Operation &o) -> std::optional<OpSteps> {
                         return single(o, "pe_relu_grad", mapArgs(o));
                       }));
}

} // namespace stringc::cudagen
