//===- TokenKernels.cpp - token plumbing, reductions, embeddings, loss ----===//
//
// Kernels and op lowerings of the ops that move tokens around or reduce
// them (docs/cuda.md, "Token and reduction kernels"):
// - copies with index arithmetic, one thread per output element in a
//   grid-stride loop: broadcast_to, expand_axis, mean_grad, class_token,
//   select_token(_grad), token_embed, class_token_grad's dx (8 elements an
//   iteration with 16-byte accesses when d % 8 == 0 and it is aligned);
// - reductions without atomics, in an order fixed by the shape: sum_to,
//   mean, the bias/class-token/embedding gradients (the column sums of
//   OpKernelUtil.h), and scalars: `pe_sum_all` (one warp), after
//   `pe_sum_partials` (kReductionBlocks warps) when the sum is long or grows
//   with the batch;
// - patch_embed as an im2col gather (`pe_patch_gather`) into a scratch
//   buffer, the bias broadcast into the result, and one cuBLAS GEMM with
//   beta = 1; patch_embed_grad as the same gather and a transposed GEMM;
// (cross_entropy is LossKernels.cpp's; its mean is appendScalarSum, here.)
// Token ids are i32. Where the reference kernels throw (an id out of range),
// these never read out of bounds: token_embed writes NaN rows and
// token_embed_grad ignores the id, so a bad batch shows as a NaN loss.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;

namespace stringc::cudagen {

// A lowering step shared with LossKernels.cpp (OpKernelUtil.h).
void appendScalarSum(OpSteps &steps, LaunchArg x, BatchAffine n, LaunchArg out,
                     BatchAffine divisor) {
  constexpr int64_t kOneWarpElements = 32 * 1024;
  if (n.perBatch == 0 && n.constant <= kOneWarpElements) {
    Launch all =
        Launch::kernelCall("pe_sum_all", {out, x, LaunchArg::i64(n), LaunchArg::i64(divisor)});
    all.grid = ExplicitGrid{};
    steps.launches.push_back(std::move(all));
    return;
  }
  int64_t scratch = int64_t(steps.scratchBytes.size());
  steps.scratchBytes.push_back(BatchAffine::fixed(kReductionBlocks * 4));
  Launch partials =
      Launch::kernelCall("pe_sum_partials", {LaunchArg::scratch(scratch), x, LaunchArg::i64(n),
                                             LaunchArg::i64(kReductionBlocks)});
  partials.grid = ExplicitGrid{BatchAffine::fixed(kReductionBlocks)};
  steps.launches.push_back(std::move(partials));
  Launch all = Launch::kernelCall("pe_sum_all", {out, LaunchArg::scratch(scratch),
                                                 LaunchArg::i64(kReductionBlocks),
                                                 LaunchArg::i64(divisor)});
  all.grid = ExplicitGrid{};
  steps.launches.push_back(std::move(all));
}

namespace {

using namespace param_kinds;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

void appendCopyKernels(std::vector<KernelDef> &defs) {
  // y[i] = x[i % n_x]: broadcast_to, and the bias rows of patch_embed.
  defs.push_back({makeSpec("pe_broadcast_to", pe::BroadcastToOp::getOperationName(),
                           {{"y", P}, {"x", P}, {"n", I}, {"n_x", I}}),
                  [](KernelBuilder &k) {
                    k.forGridStride(k.arg(2), [&](Value i) {
                      k.store(k.load(k.arg(1), remU(k, i, k.arg(3))), k.arg(0), i);
                    });
                  }});
  defs.back().storageParams = {0, 1}; // y, x

  // y[(o * size + s) * inner + r] = x[o * inner + r]
  defs.push_back({makeSpec("pe_expand_axis", pe::ExpandAxisOp::getOperationName(),
                           {{"y", P}, {"x", P}, {"n", I}, {"size", I}, {"inner", I}}),
                  [](KernelBuilder &k) {
                    Value size = k.arg(3), inner = k.arg(4);
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value o = divU(k, i, k.mul(size, inner));
                      Value at = k.add(k.mul(o, inner), remU(k, i, inner));
                      k.store(k.load(k.arg(1), at), k.arg(0), i);
                    });
                  }});

  // y[o * inner + r] = sum_s x[(o * count + s) * inner + r] / count
  defs.push_back({makeSpec("pe_mean_axis", pe::MeanOp::getOperationName(),
                           {{"y", P}, {"x", P}, {"n", I}, {"inner", I}, {"count", I}}),
                  [](KernelBuilder &k) {
                    Value inner = k.arg(3), count = k.arg(4);
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value o = divU(k, i, inner), r = remU(k, i, inner);
                      Value base = k.add(k.mul(k.mul(o, count), inner), r);
                      ValueRange sum = k.forLoop(
                          k.i64(0), count, k.i64(1), {k.f32(0.0)}, [&](Value s, ValueRange acc) {
                            return SmallVector<Value>{
                                k.add(acc[0], k.load(k.arg(1), k.add(base, k.mul(s, inner))))};
                          });
                      k.store(k.div(sum[0], k.toF32(count)), k.arg(0), i);
                    });
                  }});

  // dx[i] = dy[(i / (count * inner)) * inner + i % inner] / count
  defs.push_back({makeSpec("pe_mean_grad", pe::MeanGradOp::getOperationName(),
                           {{"dx", P}, {"dy", P}, {"n", I}, {"inner", I}, {"count", I}}),
                  [](KernelBuilder &k) {
                    Value inner = k.arg(3), count = k.arg(4);
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value o = divU(k, i, k.mul(count, inner));
                      Value at = k.add(k.mul(o, inner), remU(k, i, inner));
                      k.store(k.div(k.load(k.arg(1), at), k.toF32(count)), k.arg(0), i);
                    });
                  }});

  // One warp: out[0] = (sum_i x[i]) / divisor, lanes striding, then a
  // butterfly (a fixed order: deterministic).
  defs.push_back({makeSpec("pe_sum_all", pe::SumToOp::getOperationName(),
                           {{"out", P}, {"x", P}, {"n", I}, {"divisor", I}}, GridRule::Explicit,
                           kWarp),
                  [](KernelBuilder &k) {
                    Value lane = k.threadId(gpu::Dimension::x);
                    ValueRange partial = k.forLoop(
                        lane, k.arg(2), k.i64(kWarp), {k.f32(0.0)}, [&](Value i, ValueRange acc) {
                          return SmallVector<Value>{k.add(acc[0], k.load(k.arg(1), i))};
                        });
                    Value total = k.warpSum(partial[0]);
                    k.ifThen(cmpI(k, Pred::eq, lane, k.i64(0)), [&] {
                      k.store(k.div(total, k.toF32(k.arg(3))), k.arg(0), k.i64(0));
                    });
                  }});

  // The first stage of a long sum: block g (one warp) adds chunk g of
  // ceil(n / chunks) consecutive elements into partials[g], lanes striding,
  // then a butterfly; pe_sum_all adds the partials (a fixed order).
  defs.push_back({makeSpec("pe_sum_partials", pe::SumToOp::getOperationName(),
                           {{"partials", P}, {"x", P}, {"n", I}, {"chunks", I}},
                           GridRule::Explicit, kWarp),
                  [](KernelBuilder &k) {
                    Value n = k.arg(2), chunks = k.arg(3);
                    Value lane = k.threadId(gpu::Dimension::x);
                    Value g = k.blockId(gpu::Dimension::x);
                    Value len = divU(k, k.sub(k.add(n, chunks), k.i64(1)), chunks);
                    Value first = minI(k, k.mul(g, len), n);
                    Value last = minI(k, k.add(first, len), n);
                    ValueRange partial = k.forLoop(
                        k.add(first, lane), last, k.i64(kWarp), {k.f32(0.0)},
                        [&](Value i, ValueRange acc) {
                          return SmallVector<Value>{k.add(acc[0], k.load(k.arg(1), i))};
                        });
                    Value total = k.warpSum(partial[0]);
                    k.ifThen(cmpI(k, Pred::eq, lane, k.i64(0)),
                             [&] { k.store(total, k.arg(0), g); });
                  }});
}

void appendTokenOpKernels(std::vector<KernelDef> &defs) {
  // y[b, 0, :] = cls, y[b, t, :] = x[b, t - 1, :]   (tokens_out = N + 1)
  defs.push_back(
      {makeSpec("pe_class_token", pe::ClassTokenOp::getOperationName(),
                {{"y", P}, {"x", P}, {"cls", P}, {"n", I}, {"tokens_out", I}, {"d", I}}),
       [](KernelBuilder &k) {
         Value tokens = k.arg(4), d = k.arg(5);
         k.forGridStride(k.arg(3), [&](Value i) {
           Value col = remU(k, i, d), bt = divU(k, i, d);
           Value t = remU(k, bt, tokens), b = divU(k, bt, tokens);
           // Two stores, not a select: x is empty when N = 0.
           k.ifThen(cmpI(k, Pred::eq, t, k.i64(0)),
                    [&] { k.store(k.load(k.arg(2), col), k.arg(0), i); });
           k.ifThen(cmpI(k, Pred::ne, t, k.i64(0)), [&] {
             Value row = k.add(k.mul(b, k.sub(tokens, k.i64(1))), k.sub(t, k.i64(1)));
             k.store(k.load(k.arg(1), k.add(k.mul(row, d), col)), k.arg(0), i);
           });
         });
       }});
  // y, x: the residual stream starts here, in bf16 in a bf16 package (the
  // residual adds are GEMM epilogues whose addend is of the output's type).
  defs.back().storageParams = {0, 1};
  // dx[b, t, :] = dy[b, t + 1, :]   (tokens_in = N). When d % 8 == 0 and
  // dx and dy are 16-byte aligned (checked in the kernel), 8 elements an
  // iteration (one row's: d % 8 == 0) with 16-byte loads and stores, then
  // the n % 8 last ones; else one an iteration. The grid is sized by
  // `threads` (elementwiseThreads(n), as the vectorised elementwise
  // kernels'); a copy: the same bits either way.
  defs.push_back({makeSpec("pe_class_token_grad_x", pe::ClassTokenGradOp::getOperationName(),
                           {{"dx", P}, {"dy", P}, {"threads", I}, {"n", I}, {"tokens_in", I},
                            {"d", I}}),
                  [](KernelBuilder &k) {
                    Value dx = k.arg(0), dy = k.arg(1), n = k.arg(3), tokens = k.arg(4),
                          d = k.arg(5);
                    auto source = [&](Value i) { // dy's index of dx's element i
                      Value col = remU(k, i, d), bt = divU(k, i, d);
                      Value t = remU(k, bt, tokens), b = divU(k, bt, tokens);
                      Value row = k.add(k.mul(b, k.add(tokens, k.i64(1))), k.add(t, k.i64(1)));
                      return k.add(k.mul(row, d), col);
                    };
                    auto scalar = [&](Value i) { k.store(k.load(dy, source(i)), dx, i); };
                    const int64_t width = kElementwiseVector;
                    Value whole = cmpI(k, Pred::eq, remU(k, d, k.i64(width)), k.i64(0));
                    k.ifThenElse(
                        andI(k, k.aligned16({dx, dy}), whole),
                        [&] {
                          Value vectors = divU(k, n, k.i64(width));
                          k.forGridStride(vectors, [&](Value v) {
                            Value i = k.mul(v, k.i64(width));
                            k.storeVector(k.loadVector(dy, source(i), width), dx, i);
                          });
                          k.forGridStride(n, scalar, k.mul(vectors, k.i64(width))); // the tail
                        },
                        [&] { k.forGridStride(n, scalar); });
                  }});
  defs.back().storageParams = {0, 1}; // dx, dy
  defs.back().elementsPerLoad = kElementwiseVector;
  // y[b, :] = x[b, index, :]
  defs.push_back({makeSpec("pe_select_token", pe::SelectTokenOp::getOperationName(),
                           {{"y", P},
                            {"x", P},
                            {"n", I},
                            {"tokens", I},
                            {"d", I},
                            {"index", I}}),
                  [](KernelBuilder &k) {
                    Value tokens = k.arg(3), d = k.arg(4), index = k.arg(5);
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value b = divU(k, i, d), col = remU(k, i, d);
                      Value at = k.add(k.mul(k.add(k.mul(b, tokens), index), d), col);
                      k.store(k.load(k.arg(1), at), k.arg(0), i);
                    });
                  }});
  defs.back().readsResultSized = true; // x: one row of T per sample
  // dx[b, t, :] = t == index ? dy[b, :] : 0
  defs.push_back({makeSpec("pe_select_token_grad", pe::SelectTokenGradOp::getOperationName(),
                           {{"dx", P},
                            {"dy", P},
                            {"n", I},
                            {"tokens", I},
                            {"d", I},
                            {"index", I}}),
                  [](KernelBuilder &k) {
                    Value tokens = k.arg(3), d = k.arg(4), index = k.arg(5);
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value col = remU(k, i, d), bt = divU(k, i, d);
                      Value t = remU(k, bt, tokens), b = divU(k, bt, tokens);
                      Value hit = cmpI(k, Pred::eq, t, index);
                      Value v = k.load(k.arg(1), k.add(k.mul(b, d), col));
                      k.store(select(k, hit, v, k.f32(0.0)), k.arg(0), i);
                    });
                  }});
  // y[i, :] = table[ids[i], :]; NaN for an id outside [0, vocab).
  defs.push_back(
      {makeSpec("pe_token_embed", pe::TokenEmbedOp::getOperationName(),
                {{"y", P}, {"ids", P}, {"table", P}, {"n", I}, {"d", I}, {"vocab", I}}),
       [](KernelBuilder &k) {
         Value d = k.arg(4), vocab = k.arg(5);
         k.forGridStride(k.arg(3), [&](Value i) {
           Value id = loadI32AsI64(k, k.arg(1), divU(k, i, d));
           Value valid = andI(k, cmpI(k, Pred::sge, id, k.i64(0)), cmpI(k, Pred::slt, id, vocab));
           Value row = select(k, valid, id, k.i64(0));
           Value v = k.load(k.arg(2), k.add(k.mul(row, d), remU(k, i, d)));
           k.store(select(k, valid, v, nanF32(k)), k.arg(0), i);
         });
       }});
  // dtable[v, e] partials over rows r of ids: ids[r] == v ? dy[r, e] : 0
  // (column c = v * d + e; ids outside [0, vocab) match no column).
  defs.push_back(columnPartialsKernel(
      "pe_token_embed_grad_partials", pe::TokenEmbedGradOp::getOperationName(),
      {"ids", "dy"}, {{"d", I}},
      [](KernelBuilder &k, Value r, Value c) {
        Value d = k.arg(6);
        Value hit = cmpI(k, Pred::eq, loadI32AsI64(k, k.arg(1), r), divU(k, c, d));
        Value v = k.load(k.arg(2), k.add(k.mul(r, d), remU(k, c, d)));
        return select(k, hit, v, k.f32(0.0));
      }));
}

void appendPatchKernels(std::vector<KernelDef> &defs) {
  // cols[b * N + n, (c * p + py) * p + px] = image[b, c, row * p + py, col * p + px]
  // with N = (H / p)(W / p), row = n / (W / p), col = n % (W / p).
  defs.push_back({makeSpec("pe_patch_gather", pe::PatchEmbedOp::getOperationName(),
                           {{"cols", P},
                            {"image", P},
                            {"n", I},
                            {"channels", I},
                            {"height", I},
                            {"width", I},
                            {"patch", I}}),
                  [](KernelBuilder &k) {
                    Value C = k.arg(3), H = k.arg(4), W = k.arg(5), p = k.arg(6);
                    Value pp = k.mul(p, p), K = k.mul(C, pp);
                    Value gridCols = divU(k, W, p);
                    Value patches = k.mul(divU(k, H, p), gridCols);
                    k.forGridStride(k.arg(2), [&](Value i) {
                      Value bn = divU(k, i, K), kk = remU(k, i, K);
                      Value b = divU(k, bn, patches), n = remU(k, bn, patches);
                      Value row = divU(k, n, gridCols), col = remU(k, n, gridCols);
                      Value c = divU(k, kk, pp), py = remU(k, divU(k, kk, p), p);
                      Value px = remU(k, kk, p);
                      Value y = k.add(k.mul(row, p), py), x = k.add(k.mul(col, p), px);
                      Value at = k.add(k.mul(k.add(k.mul(k.add(k.mul(b, C), c), H), y), W), x);
                      k.store(k.load(k.arg(1), at), k.arg(0), i);
                    });
                  }});
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

/// The sum of all of x into `out` (a scalar), divided by `divisor`: the rows
/// of x's last dimension summed per column first when x has one (parallel),
/// then one warp over the columns.
void appendSumAll(OpSteps &steps, Value x, LaunchArg xArg, LaunchArg out, BatchAffine divisor) {
  std::vector<int64_t> shape = *batchShape(x.getType());
  int64_t cols = shape.empty() ? 1 : shape.back();
  if (shape.size() >= 2 && cols > 1) {
    BatchAffine rows = leadingCount(shape, shape.size() - 1);
    int64_t scratch = int64_t(steps.scratchBytes.size());
    steps.scratchBytes.push_back(BatchAffine::fixed(cols * 4));
    appendPlainColumnSum(steps, xArg, rows, cols, cols, A::scratch(scratch));
    appendScalarSum(steps, A::scratch(scratch), BatchAffine::fixed(cols), out, divisor);
    return;
  }
  appendScalarSum(steps, xArg, numel(x), out, divisor);
}

/// pe.sum_to, every shape (the one lowering of the op): a copy when nothing
/// is summed, one warp for a scalar, else a column sum over the leading rows
/// (one launch for few static rows, partials and their sum otherwise).
std::optional<OpSteps> lowerSumTo(Operation &op) {
  Value x = op.getOperand(0), y = op.getResult(0);
  if (x.getType() == y.getType())
    return singleLaunch("pe_broadcast_to",
                        {A::result(0), A::operand(0), A::i64(numel(y)), A::i64(numel(x))});
  auto shape = batchShape(y.getType());
  if (!shape)
    return std::nullopt;
  OpSteps steps;
  if (shape->empty()) {
    appendSumAll(steps, x, A::operand(0), A::result(0), BatchAffine::fixed(1));
    return steps;
  }
  std::optional<int64_t> cols = staticProduct(*shape, 0, shape->size());
  if (!cols)
    return std::nullopt; // a suffix holding the batch is all of x (handled above)
  BatchAffine rows = rowsOf(numel(x), *cols);
  appendColumnSumTo(steps, A::operand(0), rows, *cols, A::result(0));
  return steps;
}

/// Axis `axis` of x for pe.mean and pe.mean_grad: the product of the static
/// dims after it (inner) and its size (count: the batch when it is the
/// dynamic dim 0).
struct AxisExtent {
  int64_t inner;
  BatchAffine count;
};

std::optional<AxisExtent> axisExtent(Type x, size_t axis) {
  auto shape = batchShape(x);
  if (!shape || axis >= shape->size())
    return std::nullopt;
  std::optional<int64_t> inner = staticProduct(*shape, axis + 1, shape->size());
  if (!inner)
    return std::nullopt;
  BatchAffine count =
      (*shape)[axis] < 0 ? BatchAffine{1, 0} : BatchAffine::fixed((*shape)[axis]);
  return AxisExtent{*inner, count};
}

std::optional<OpSteps> lowerMean(Operation &op) {
  auto mean = cast<pe::MeanOp>(op);
  Value x = op.getOperand(0);
  OpSteps steps;
  if (!mean.getAxis()) {
    appendSumAll(steps, x, A::operand(0), A::result(0), numel(x));
    return steps;
  }
  size_t axis = size_t(*mean.getAxis());
  auto extent = axisExtent(x.getType(), axis);
  if (!extent)
    return std::nullopt;
  BatchAffine outer = leadingCount(*batchShape(x.getType()), axis);
  return singleLaunch("pe_mean_axis", {A::result(0), A::operand(0), A::i64(outer * extent->inner),
                                       A::i64(extent->inner), A::i64(extent->count)});
}

std::optional<OpSteps> lowerMeanGrad(Operation &op) {
  auto grad = cast<pe::MeanGradOp>(op);
  Value x = op.getOperand(0);
  BatchAffine n = numel(x);
  if (!grad.getAxis())
    return singleLaunch("pe_mean_grad",
                        {A::result(0), A::operand(1), A::i64(n), A::i64(1), A::i64(n)});
  auto extent = axisExtent(x.getType(), size_t(*grad.getAxis()));
  if (!extent)
    return std::nullopt;
  return singleLaunch("pe_mean_grad", {A::result(0), A::operand(1), A::i64(n),
                                       A::i64(extent->inner), A::i64(extent->count)});
}

std::optional<OpSteps> lowerExpandAxis(Operation &op) {
  auto expand = cast<pe::ExpandAxisOp>(op);
  auto shape = batchShape(op.getOperand(0).getType());
  size_t axis = size_t(expand.getAxis());
  std::optional<int64_t> inner = staticProduct(*shape, axis, shape->size());
  if (!inner || *inner == 0)
    return std::nullopt;
  return singleLaunch("pe_expand_axis",
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))),
                       A::i64(int64_t(expand.getSize())), A::i64(*inner)});
}

/// The last two dims of a batch shape of rank `rank`, both static: (T, D)
/// of [B, T, D] activations, (V, D) of an embedding table [V, D].
std::optional<std::pair<int64_t, int64_t>> staticLastTwoDims(Type type, size_t rank) {
  auto shape = batchShape(type);
  if (!shape || shape->size() != rank || (*shape)[rank - 2] < 0 || (*shape)[rank - 1] < 0)
    return std::nullopt;
  return std::make_pair((*shape)[rank - 2], (*shape)[rank - 1]);
}

/// [B, T, D] with static T and D.
std::optional<std::pair<int64_t, int64_t>> tokensAndWidth(Type type) {
  return staticLastTwoDims(type, 3);
}

std::optional<OpSteps> lowerClassToken(Operation &op) {
  auto td = tokensAndWidth(op.getResult(0).getType());
  if (!td)
    return std::nullopt;
  return singleLaunch("pe_class_token",
                      {A::result(0), A::operand(0), A::operand(1), A::i64(numel(op.getResult(0))),
                       A::i64(td->first), A::i64(td->second)});
}

std::optional<OpSteps> lowerClassTokenGrad(Operation &op) {
  auto td = tokensAndWidth(op.getOperand(0).getType());
  if (!td)
    return std::nullopt;
  auto [tokensOut, d] = *td;
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(
      "pe_class_token_grad_x",
      {A::result(0), A::operand(0), A::i64(elementwiseThreads(numel(op.getResult(0)))),
       A::i64(numel(op.getResult(0))), A::i64(tokensOut - 1), A::i64(d)}));
  BatchAffine batch = rowsOf(numel(op.getOperand(0)), tokensOut * d);
  appendPlainColumnSum(steps, A::operand(0), batch, d, tokensOut * d, A::result(1));
  return steps;
}

std::optional<OpSteps> lowerSelectToken(Operation &op) {
  auto td = tokensAndWidth(op.getOperand(0).getType());
  if (!td)
    return std::nullopt;
  int64_t index = int64_t(cast<pe::SelectTokenOp>(op).getIndex());
  return singleLaunch("pe_select_token",
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))),
                       A::i64(td->first), A::i64(td->second), A::i64(index)});
}

std::optional<OpSteps> lowerSelectTokenGrad(Operation &op) {
  auto td = tokensAndWidth(op.getResult(0).getType());
  if (!td)
    return std::nullopt;
  int64_t index = int64_t(cast<pe::SelectTokenGradOp>(op).getIndex());
  return singleLaunch("pe_select_token_grad",
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))),
                       A::i64(td->first), A::i64(td->second), A::i64(index)});
}

/// (V, D) of an embedding table [V, D] with static sizes.
std::optional<std::pair<int64_t, int64_t>> vocabAndWidth(Type table) {
  return staticLastTwoDims(table, 2);
}

std::optional<OpSteps> lowerTokenEmbed(Operation &op) {
  auto table = vocabAndWidth(op.getOperand(1).getType());
  if (!table)
    return std::nullopt;
  return singleLaunch("pe_token_embed",
                      {A::result(0), A::operand(0), A::operand(1), A::i64(numel(op.getResult(0))),
                       A::i64(table->second), A::i64(table->first)});
}

std::optional<OpSteps> lowerTokenEmbedGrad(Operation &op) {
  auto table = vocabAndWidth(op.getResult(0).getType());
  if (!table)
    return std::nullopt;
  auto [vocab, d] = *table;
  OpSteps steps;
  appendColumnSum(steps, "pe_token_embed_grad_partials", {A::operand(0), A::operand(1)},
                  numel(op.getOperand(0)), vocab * d, {A::i64(d)}, A::result(0));
  return steps;
}

struct PatchGeometry {
  int64_t channels, height, width, patch, k, patches;
};

std::optional<PatchGeometry> patchGeometry(Type imageType, int64_t patch) {
  auto shape = batchShape(imageType);
  if (!shape || shape->size() != 4 || patch <= 0)
    return std::nullopt;
  PatchGeometry g{(*shape)[1], (*shape)[2], (*shape)[3], patch, 0, 0};
  if (g.channels < 0 || g.height < 0 || g.width < 0 || g.height % patch || g.width % patch)
    return std::nullopt;
  g.k = g.channels * patch * patch;
  g.patches = (g.height / patch) * (g.width / patch);
  return g;
}

/// The im2col gather of `image` (operand 0) into scratch 0: [B * N, K].
BatchAffine appendPatchGather(OpSteps &steps, Operation &op, const PatchGeometry &g) {
  BatchAffine batch = rowsOf(numel(op.getOperand(0)), g.channels * g.height * g.width);
  BatchAffine rows = batch * g.patches;
  steps.scratchBytes.push_back(rows * (g.k * 4));
  steps.launches.push_back(Launch::kernelCall(
      "pe_patch_gather", {A::scratch(0), A::operand(0), A::i64(rows * g.k), A::i64(g.channels),
                          A::i64(g.height), A::i64(g.width), A::i64(g.patch)}));
  return rows;
}

std::optional<OpSteps> lowerPatchEmbed(Operation &op) {
  auto embed = cast<pe::PatchEmbedOp>(op);
  auto g = patchGeometry(op.getOperand(0).getType(), int64_t(embed.getPatch()));
  int64_t d = lastDimension(op.getResult(0).getType());
  if (!g || d <= 0)
    return std::nullopt;
  OpSteps steps;
  BatchAffine rows = appendPatchGather(steps, op, *g);
  steps.launches.push_back(Launch::kernelCall(
      "pe_broadcast_to", {A::result(0), A::operand(2), A::i64(rows * d), A::i64(d)}));
  GemmCall gemm; // y = cols w + y (the bias rows)
  gemm.a = A::scratch(0);
  gemm.b = A::operand(1);
  gemm.c = A::result(0);
  gemm.m = rows;
  gemm.n = BatchAffine::fixed(d);
  gemm.k = BatchAffine::fixed(g->k);
  gemm.beta = 1.0f;
  steps.launches.push_back(Launch::gemmCall(gemm));
  return steps;
}

std::optional<OpSteps> lowerPatchEmbedGrad(Operation &op) {
  auto grad = cast<pe::PatchEmbedGradOp>(op);
  auto g = patchGeometry(op.getOperand(0).getType(), int64_t(grad.getPatch()));
  int64_t d = lastDimension(op.getOperand(1).getType());
  if (!g || d <= 0)
    return std::nullopt;
  OpSteps steps;
  BatchAffine rows = appendPatchGather(steps, op, *g);
  GemmCall gemm; // dw = cols^T dy
  gemm.a = A::scratch(0);
  gemm.transA = true;
  gemm.b = A::operand(1);
  gemm.c = A::result(0);
  gemm.m = BatchAffine::fixed(g->k);
  gemm.n = BatchAffine::fixed(d);
  gemm.k = rows;
  steps.launches.push_back(Launch::gemmCall(gemm));
  appendPlainColumnSum(steps, A::operand(1), rows, d, d, A::result(1));
  return steps;
}

std::optional<OpSteps> lowerBroadcastTo(Operation &op) {
  return singleLaunch("pe_broadcast_to",
                      {A::result(0), A::operand(0), A::i64(numel(op.getResult(0))),
                       A::i64(numel(op.getOperand(0)))});
}

} // namespace

void appendTokenKernels(std::vector<KernelDef> &defs) {
  appendColumnSumKernels(defs);
  appendCopyKernels(defs);
  appendTokenOpKernels(defs);
  appendPatchKernels(defs);
}

void appendTokenLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::SumToOp>(lowerSumTo));
  lowerings.push_back(loweringOf<pe::BroadcastToOp>(lowerBroadcastTo));
  lowerings.push_back(loweringOf<pe::ExpandAxisOp>(lowerExpandAxis));
  lowerings.push_back(loweringOf<pe::MeanOp>(lowerMean));
  lowerings.push_back(loweringOf<pe::MeanGradOp>(lowerMeanGrad));
  lowerings.push_back(loweringOf<pe::ClassTokenOp>(lowerClassToken));
  lowerings.push_back(loweringOf<pe::ClassTokenGradOp>(lowerClassTokenGrad));
  lowerings.push_back(loweringOf<pe::SelectTokenOp>(lowerSelectToken));
  lowerings.push_back(loweringOf<pe::SelectTokenGradOp>(lowerSelectTokenGrad));
  lowerings.push_back(loweringOf<pe::TokenEmbedOp>(lowerTokenEmbed));
  lowerings.push_back(loweringOf<pe::TokenEmbedGradOp>(lowerTokenEmbedGrad));
  lowerings.push_back(loweringOf<pe::PatchEmbedOp>(lowerPatchEmbed));
  lowerings.push_back(loweringOf<pe::PatchEmbedGradOp>(lowerPatchEmbedGrad));
}

} // namespace stringc::cudagen
