//===- LinearKernels.cpp - dense layers as cuBLAS GEMMs + small kernels ---===//
//
// pe.linear and its gradients are GEMMs over the flattened rows (every
// dimension but the last, batch included), row-major (StepProgram.h,
// GemmCall); `w` is stored input-major [I, O] (docs/dialect.md), so
//
//   linear              y  = X W          (rows x I) (I x O)
//   linear_grad_input   dx = dY W^T       (rows x O) (I x O)^T
//   linear_grad_weight  dW = X^T dY       (rows x I)^T (rows x O)
//
// The bias is the GEMM's epilogue (GemmEpilogue::Bias: one cuBLASLt
// matmul with CUBLASLT_EPILOGUE_BIAS, or the GEMM then `pe_add_bias` where
// cuBLASLt cannot run it, decided by the runtime). The fused ops of
// pe-fuse-epilogue reuse the same pieces: linear_gelu is the GEMM with its
// bias into `pre`, then the gelu kernel into `result` (cuBLASLt's GELU
// epilogues compute the tanh approximation only, and the separate kernel
// serves both forms). The fused ops of pe-fuse-residual (a default pass of
// both targets) are one GEMM each whose addend (CudaGemm) is the residual
// or the prior sum: linear_residual = residual + X W (+ b),
// linear_grad_input_acc = prior + dY W^T, with beta 1, so the residual add
// and the sum of input gradients cost no launch and no pass over the
// activation of their own.
//
// pe.sum_to (the bias gradient among others) is lowered with the other
// reductions in TokenKernels.cpp; where it sums the dY of the
// linear_grad_weight just before it, planKernels makes it that GEMM's
// bias-gradient epilogue (BiasGradients.h), its own steps the fallback.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

using A = LaunchArg;

/// rows x I times I x O into `c` (beta 0 or 1).
GemmCall rowsTimesWeight(LaunchArg x, LaunchArg w, LaunchArg c, BatchAffine rows, int64_t in,
                         int64_t out, float beta) {
  GemmCall g;
  g.a = x;
  g.b = w;
  g.c = c;
  g.m = rows;
  g.n = BatchAffine::fixed(out);
  g.k = BatchAffine::fixed(in);
  g.beta = beta;
  return g;
}

/// (I, O) of a weight-shaped type: static [I, O] with I, O > 0 (a size of 0
/// leaves no GEMM to call), or none.
std::optional<std::pair<int64_t, int64_t>> weightDims(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  if (tensor.getRank() != 2 || !tensor.hasStaticShape())
    return std::nullopt;
  int64_t in = tensor.getDimSize(0), out = tensor.getDimSize(1);
  if (in <= 0 || out <= 0)
    return std::nullopt;
  return std::make_pair(in, out);
}

/// x [..., I] and w [I, O] of a linear-like op: (rows, I, O), or none when
/// a size is 0 (no GEMM to call) or the shapes do not fit.
std::optional<std::tuple<BatchAffine, int64_t, int64_t>> linearSizes(Value x, Value w) {
  auto dims = weightDims(w.getType());
  if (!dims)
    return std::nullopt;
  auto [in, out] = *dims;
  if (lastDimension(x.getType()) != in)
    return std::nullopt;
  std::optional<BatchAffine> rows = divideExactly(elementCount(x.getType()), in);
  if (!rows)
    return std::nullopt;
  return std::make_tuple(*rows, in, out);
}

/// The steps of one GEMM.
OpSteps gemmSteps(const GemmCall &gemm) {
  OpSteps steps;
  steps.launches.push_back(Launch::gemmCall(gemm));
  return steps;
}

/// X W into `c`, plus the bias (operand 2) when the op has one, as the
/// GEMM's epilogue.
GemmCall rowsTimesWeightPlusBias(bool hasBias, LaunchArg c, BatchAffine rows, int64_t in,
                                 int64_t out) {
  GemmCall g = rowsTimesWeight(A::operand(0), A::operand(1), c, rows, in, out, 0.0f);
  if (hasBias) {
    g.epilogue = GemmEpilogue::Bias;
    g.bias = A::operand(2);
  }
  return g;
}

/// dx = dY W^T (+ the prior sum as the addend, beta 1): dy [..., O] and w
/// [I, O] the op's operands `first` and `first + 1`, rows x O times (I x O)^T.
std::optional<OpSteps> gradInputSteps(Value dy, Value w, unsigned first,
                                      std::optional<LaunchArg> prior) {
  auto dims = weightDims(w.getType());
  if (!dims)
    return std::nullopt;
  auto [in, out] = *dims;
  std::optional<BatchAffine> rows = divideExactly(elementCount(dy.getType()), out);
  if (!rows)
    return std::nullopt;
  GemmCall g = rowsTimesWeight(A::operand(first), A::operand(first + 1), A::result(0), *rows,
                               out, in, prior ? 1.0f : 0.0f);
  g.transB = true;
  g.addend = prior;
  return gemmSteps(g);
}

} // namespace

void appendLinearKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;

  // y[i] += b[i % d]
  GpuKernelSpec bias;
  bias.name = "pe_add_bias";
  bias.peOp = pe::LinearOp::getOperationName();
  bias.params = {{"y", P}, {"b", P}, {"n", I}, {"d", I}};
  defs.push_back({bias, [](KernelBuilder &k) {
                    OpBuilder &b = k.builder();
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value column = b.create<arith::RemUIOp>(k.location(), i, k.arg(3));
                      k.store(k.add(k.load(k.arg(0), i), k.load(k.arg(1), column)), k.arg(0), i);
                    });
                  }});
  defs.back().storageParams = {0, 1}; // y, b: of C's type (pe_add_bias__bb for a bf16 C)
}

void appendLinearLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::LinearOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto linear = cast<pe::LinearOp>(o);
                         auto sizes = linearSizes(linear.getX(), linear.getW());
                         if (!sizes)
                           return std::nullopt;
                         auto [rows, in, out] = *sizes;
                         return gemmSteps(rowsTimesWeightPlusBias(bool(linear.getB()),
                                                                  A::result(0), rows, in, out));
                       }));

  lowerings.push_back(loweringOf<pe::LinearGeluOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto fused = cast<pe::LinearGeluOp>(o);
                         auto sizes = linearSizes(fused.getX(), fused.getW());
                         if (!sizes)
                           return std::nullopt;
                         auto [rows, in, out] = *sizes;
                         BatchAffine n = elementCount(o.getResult(0).getType());
                         OpSteps steps;
                         steps.launches.push_back(Launch::gemmCall(rowsTimesWeightPlusBias(
                             bool(fused.getB()), A::result(1), rows, in, out)));
                         steps.launches.push_back(Launch::kernelCall(
                             fused.getApproximate() ? "pe_gelu_tanh" : "pe_gelu",
                             {A::result(0), A::result(1), A::i64(elementwiseThreads(n)),
                              A::i64(n)}));
                         return steps;
                       }));

  lowerings.push_back(loweringOf<pe::LinearResidualOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto fused = cast<pe::LinearResidualOp>(o);
                         auto sizes = linearSizes(fused.getX(), fused.getW());
                         if (!sizes)
                           return std::nullopt;
                         auto [rows, in, out] = *sizes;
                         // residual, x, w, b: X W + residual (+ b).
                         GemmCall g = rowsTimesWeight(A::operand(1), A::operand(2), A::result(0),
                                                      rows, in, out, 1.0f);
                         g.addend = A::operand(0);
                         if (fused.getB()) {
                           g.epilogue = GemmEpilogue::Bias;
                           g.bias = A::operand(3);
                         }
                         return gemmSteps(g);
                       }));

  lowerings.push_back(loweringOf<pe::LinearGradInputOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto grad = cast<pe::LinearGradInputOp>(o);
                         return gradInputSteps(grad.getDy(), grad.getW(), 0, std::nullopt);
                       }));

  lowerings.push_back(loweringOf<pe::LinearGradInputAccOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto grad = cast<pe::LinearGradInputAccOp>(o);
                         return gradInputSteps(grad.getDy(), grad.getW(), 1, A::operand(0));
                       }));

  lowerings.push_back(loweringOf<pe::LinearGradWeightOp>([](Operation &o) -> std::optional<OpSteps> {
                         auto grad = cast<pe::LinearGradWeightOp>(o);
                         // x [..., I], dy [..., O]: (rows x I)^T times rows x O.
                         auto dims = weightDims(o.getResult(0).getType());
                         if (!dims)
                           return std::nullopt;
                         auto [in, out] = *dims;
                         std::optional<BatchAffine> rows =
                             divideExactly(elementCount(grad.getX().getType()), in);
                         if (!rows)
                           return std::nullopt;
                         GemmCall g;
                         g.a = A::operand(0);
                         g.b = A::operand(1);
                         g.c = A::result(0);
                         g.m = BatchAffine::fixed(in);
                         g.n = BatchAffine::fixed(out);
                         g.k = *rows;
                         g.transA = true;
                         return gemmSteps(g);
                       }));
}

} // namespace stringc::cudagen
