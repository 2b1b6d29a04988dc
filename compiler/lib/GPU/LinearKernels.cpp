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
// The bias is added after the GEMM by `pe_add_bias` (in place: y[i] +=
// b[i % O], one pointer, so nothing aliases a noalias argument). The fused
// ops of pe-fuse-epilogue reuse the same pieces: linear_gelu is GEMM into
// `pre`, bias, then the gelu kernel into `result`; linear_residual writes
// `residual (+ b)` into the result with the broadcast add (or a copy through
// pe_scale) and accumulates the GEMM onto it (beta = 1).
//
// `pe_column_sum` sums the rows of a [rows, d] matrix per column without
// atomics, deterministically: launch 1 has blockIdx.y = one of `chunks`
// row ranges and writes partial sums to a [chunks, d] scratch; launch 2 sums
// those `chunks` rows (chunks = 1: one range). It serves pe.sum_to (the
// bias gradient of linear, and of broadcast binary ops).
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

constexpr int64_t kColumnBlock = 128;
/// Row ranges of the first column-sum launch (grid.y); a sum over at most
/// kSingleStageRows fixed rows is one launch.
constexpr int64_t kColumnChunks = 64;
constexpr int64_t kSingleStageRows = 256;
/// pe.sum_to is lowered here for results of at least a warp of columns.
constexpr int64_t kMinColumns = 32;

using A = LaunchArg;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The launches of sum over `rows` of a [rows, d] matrix `x` into `out`
/// (scratch 0 of `steps` when two stages are needed).
void appendColumnSum(OpSteps &steps, LaunchArg out, LaunchArg x, BatchAffine rows, int64_t d) {
  ExplicitGrid single;
  single.x = BatchAffine::fixed(ceilDiv(d, kColumnBlock));
  if (rows.perBatch == 0 && rows.constant <= kSingleStageRows) {
    Launch launch = Launch::kernelCall("pe_column_sum",
                                       {out, x, A::i64(rows), A::i64(d), A::i64(int64_t(1))});
    launch.grid = single;
    steps.launches.push_back(std::move(launch));
    return;
  }
  int64_t scratch = int64_t(steps.scratchBytes.size());
  steps.scratchBytes.push_back(BatchAffine::fixed(kColumnChunks * d * 4));
  Launch partial = Launch::kernelCall(
      "pe_column_sum", {A::scratch(scratch), x, A::i64(rows), A::i64(d), A::i64(kColumnChunks)});
  partial.grid = single;
  partial.grid->y = BatchAffine::fixed(kColumnChunks);
  steps.launches.push_back(std::move(partial));
  Launch total = Launch::kernelCall("pe_column_sum", {out, A::scratch(scratch),
                                                      A::i64(kColumnChunks), A::i64(d),
                                                      A::i64(int64_t(1))});
  total.grid = single;
  steps.launches.push_back(std::move(total));
}

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

/// x [..., I] and w [I, O] of a linear-like op: (rows, I, O), or none when
/// a size is 0 (no GEMM to call) or the shapes do not fit.
std::optional<std::tuple<BatchAffine, int64_t, int64_t>> linearSizes(Value x, Value w) {
  auto wType = cast<RankedTensorType>(w.getType());
  if (wType.getRank() != 2 || !wType.hasStaticShape())
    return std::nullopt;
  int64_t in = wType.getDimSize(0), out = wType.getDimSize(1);
  if (in <= 0 || out <= 0 || lastDimension(x.getType()) != in)
    return std::nullopt;
  std::optional<BatchAffine> rows = divideExactly(elementCount(x.getType()), in);
  if (!rows)
    return std::nullopt;
  return std::make_tuple(*rows, in, out);
}

void appendBias(OpSteps &steps, LaunchArg y, LaunchArg bias, BatchAffine elements, int64_t out) {
  steps.launches.push_back(
      Launch::kernelCall("pe_add_bias", {y, bias, A::i64(elements), A::i64(out)}));
}

} // namespace

void appendLinearKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;

  // y[i] += b[i % d]
  KernelSpec bias;
  bias.name = "pe_add_bias";
  bias.peOp = "pe.linear";
  bias.params = {{"y", P}, {"b", P}, {"n", I}, {"d", I}};
  defs.push_back({bias, [](KernelBuilder &k) {
                    OpBuilder &b = k.builder();
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value column = b.create<arith::RemUIOp>(k.location(), i, k.arg(3));
                      k.store(k.add(k.load(k.arg(0), i), k.load(k.arg(1), column)), k.arg(0), i);
                    });
                  }});

  // out[chunk, c] = sum over the chunk's rows r of x[r, c]; grid (ceil(d /
  // 128), chunks), rows split in chunks of ceil(rows / chunks).
  KernelSpec sum;
  sum.name = "pe_column_sum";
  sum.peOp = "pe.sum_to";
  sum.params = {{"out", P}, {"x", P}, {"rows", I}, {"d", I}, {"chunks", I}};
  sum.grid = GridRule::Explicit;
  sum.blockX = kColumnBlock;
  defs.push_back({sum, [](KernelBuilder &k) {
                    OpBuilder &b = k.builder();
                    Location loc = k.location();
                    Value out = k.arg(0), x = k.arg(1), rows = k.arg(2), d = k.arg(3),
                          chunks = k.arg(4);
                    Value c = k.add(k.mul(k.blockId(gpu::Dimension::x), k.blockDim(gpu::Dimension::x)),
                                    k.threadId(gpu::Dimension::x));
                    Value chunk = k.blockId(gpu::Dimension::y);
                    Value per = k.div(k.sub(k.add(rows, chunks), k.i64(1)), chunks);
                    Value begin = k.mul(chunk, per);
                    Value end = b.create<arith::MinSIOp>(loc, rows, k.add(begin, per));
                    Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, c, d);
                    k.ifThen(inRange, [&] {
                      ValueRange total = k.forLoop(begin, end, k.i64(1), {k.f32(0.0)},
                                                   [&](Value r, ValueRange acc) {
                                                     Value v = k.load(x, k.add(k.mul(r, d), c));
                                                     return SmallVector<Value>{k.add(acc[0], v)};
                                                   });
                      k.store(total[0], out, k.add(k.mul(chunk, d), c));
                    });
                  }});
}

void appendLinearLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back({"pe.linear", [](Operation &o) -> std::optional<OpSteps> {
                         auto linear = cast<pe::LinearOp>(o);
                         auto sizes = linearSizes(linear.getX(), linear.getW());
                         if (!sizes)
                           return std::nullopt;
                         auto [rows, in, out] = *sizes;
                         OpSteps steps;
                         steps.launches.push_back(Launch::gemmCall(rowsTimesWeight(
                             A::operand(0), A::operand(1), A::result(0), rows, in, out, 0.0f)));
                         if (linear.getB())
                           appendBias(steps, A::result(0), A::operand(2),
                                      elementCount(o.getResult(0).getType()), out);
                         return steps;
                       }});

  lowerings.push_back({"pe.linear_gelu", [](Operation &o) -> std::optional<OpSteps> {
                         auto fused = cast<pe::LinearGeluOp>(o);
                         auto sizes = linearSizes(fused.getX(), fused.getW());
                         if (!sizes)
                           return std::nullopt;
                         auto [rows, in, out] = *sizes;
                         BatchAffine n = elementCount(o.getResult(0).getType());
                         OpSteps steps;
                         steps.launches.push_back(Launch::gemmCall(rowsTimesWeight(
                             A::operand(0), A::operand(1), A::result(1), rows, in, out, 0.0f)));
                         if (fused.getB())
                           appendBias(steps, A::result(1), A::operand(2), n, out);
                         steps.launches.push_back(Launch::kernelCall(
                             fused.getApproximate() ? "pe_gelu_tanh" : "pe_gelu",
                             {A::result(0), A::result(1), A::i64(n)}));
                         return steps;
                       }});

  lowerings.push_back({"pe.linear_residual", [](Operation &o) -> std::optional<OpSteps> {
                         auto fused = cast<pe::LinearResidualOp>(o);
                         auto sizes = linearSizes(fused.getX(), fused.getW());
                         if (!sizes)
                           return std::nullopt;
                         auto [rows, in, out] = *sizes;
                         BatchAffine n = elementCount(o.getResult(0).getType());
                         OpSteps steps;
                         if (fused.getB())
                           steps.launches.push_back(Launch::kernelCall(
                               "pe_add_br", {A::result(0), A::operand(0), A::operand(3), A::i64(n),
                                             A::i64(n), A::i64(out)}));
                         else // a copy
                           steps.launches.push_back(Launch::kernelCall(
                               "pe_scale",
                               {A::result(0), A::operand(0), A::i64(n), A::f32(1.0f), A::f32(0.0f)}));
                         steps.launches.push_back(Launch::gemmCall(rowsTimesWeight(
                             A::operand(1), A::operand(2), A::result(0), rows, in, out, 1.0f)));
                         return steps;
                       }});

  lowerings.push_back({"pe.linear_grad_input", [](Operation &o) -> std::optional<OpSteps> {
                         auto grad = cast<pe::LinearGradInputOp>(o);
                         // dy [..., O], w [I, O]: rows x O times (I x O)^T.
                         auto wType = cast<RankedTensorType>(grad.getW().getType());
                         if (wType.getRank() != 2 || !wType.hasStaticShape())
                           return std::nullopt;
                         int64_t in = wType.getDimSize(0), out = wType.getDimSize(1);
                         if (in <= 0 || out <= 0)
                           return std::nullopt;
                         std::optional<BatchAffine> rows =
                             divideExactly(elementCount(grad.getDy().getType()), out);
                         if (!rows)
                           return std::nullopt;
                         GemmCall g = rowsTimesWeight(A::operand(0), A::operand(1), A::result(0),
                                                      *rows, out, in, 0.0f);
                         g.transB = true;
                         OpSteps steps;
                         steps.launches.push_back(Launch::gemmCall(g));
                         return steps;
                       }});

  lowerings.push_back({"pe.linear_grad_weight", [](Operation &o) -> std::optional<OpSteps> {
                         auto grad = cast<pe::LinearGradWeightOp>(o);
                         // x [..., I], dy [..., O]: (rows x I)^T times rows x O.
                         auto dwType = cast<RankedTensorType>(o.getResult(0).getType());
                         if (dwType.getRank() != 2 || !dwType.hasStaticShape())
                           return std::nullopt;
                         int64_t in = dwType.getDimSize(0), out = dwType.getDimSize(1);
                         if (in <= 0 || out <= 0)
                           return std::nullopt;
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
                         OpSteps steps;
                         steps.launches.push_back(Launch::gemmCall(g));
                         return steps;
                       }});

  lowerings.push_back({"pe.sum_to", [](Operation &o) -> std::optional<OpSteps> {
                         Type x = o.getOperand(0).getType(), result = o.getResult(0).getType();
                         OpSteps steps;
                         BatchAffine n = elementCount(result);
                         if (x == result) { // no leading dimensions: a copy
                           steps.launches.push_back(Launch::kernelCall(
                               "pe_scale", {A::result(0), A::operand(0), A::i64(n), A::f32(1.0f),
                                            A::f32(0.0f)}));
                           return steps;
                         }
                         // Columns of at least kMinColumns (bias gradients); smaller
                         // sums (a scalar) are left to a later family's lowering.
                         if (n.perBatch != 0 || n.constant < kMinColumns)
                           return std::nullopt;
                         std::optional<BatchAffine> rows = divideExactly(elementCount(x), n.constant);
                         if (!rows)
                           return std::nullopt;
                         appendColumnSum(steps, A::result(0), A::operand(0), *rows, n.constant);
                         return steps;
                       }});
}

} // namespace stringc::cudagen
