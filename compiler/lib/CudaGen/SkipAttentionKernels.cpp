//===- SkipAttentionKernels.cpp - attention with a skip mask --------------===//
//
// pe.attention and pe.attention_grad with a `skip` mask on the GPU: head h
// of query i sees exactly one key, i - lag(h) with lag(h) = skip_base + h
// (none when that is before the first token), so the softmax is one-hot and
// the op is a gather (docs/cuda.md, "Attention kernels"):
// - pe_attention_skip: y[b, i, col] = v[b, i - lag(h), col], 0 without a key;
// - pe_attention_skip_lse: the forward's lse in @gradients, the one visible
//   score scale q_i . k_{i - lag(h)} (-inf without a key);
// - pe_attention_skip_grad: dq = dk = 0 exactly, dv the gather back.
// One thread per element (per row for lse), grid-stride loops. A skip mask
// with `rel` has no kernels. AttentionKernels.cpp's lowerings call these for
// a skip mask.
//
//===----------------------------------------------------------------------===//
#include "AttentionF32.h"

#include "stringc/Dialect/PE/PEOps.h"

#include <cmath>

using namespace mlir;

namespace stringc::cudagen::attention {
namespace {

using Pred = arith::CmpIPredicate;
using A = LaunchArg;

/// Token t and column col of element e of a [B, T, D] tensor; row = b * T.
struct SkipElement {
  Value col, token, rowBase, lag;
};

SkipElement skipElement(KernelBuilder &k, Value e, Value tokens, Value width, Value dh,
                        Value skipBase) {
  Value col = remU(k, e, width), bt = divU(k, e, width);
  Value token = remU(k, bt, tokens);
  // head h sees the key lag(h) = skip_base + h before it.
  Value lag = k.add(skipBase, divU(k, col, dh));
  return {col, token, k.sub(bt, token), lag};
}

} // namespace

void appendSkipKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;
  // y[b, i, col] = v[b, i - lag(h), col], 0 when i < lag(h).
  defs.push_back({makeSpec("pe_attention_skip", pe::AttentionOp::getOperationName(),
                           {{"y", P}, {"v", P}, {"n", I}, {"tokens", I}, {"width", I},
                            {"head_dim", I}, {"skip_base", I}}),
                  [](KernelBuilder &k) {
                    Value y = k.arg(0), v = k.arg(1), tokens = k.arg(3), width = k.arg(4);
                    k.forGridStride(k.arg(2), [&](Value e) {
                      SkipElement s = skipElement(k, e, tokens, width, k.arg(5), k.arg(6));
                      Value key = k.sub(s.token, s.lag);
                      Value valid = cmpI(k, Pred::sge, key, k.i64(0));
                      Value safe = select(k, valid, key, k.i64(0));
                      Value x = k.load(v, k.add(k.mul(k.add(s.rowBase, safe), width), s.col));
                      k.store(select(k, valid, x, k.f32(0.0)), y, e);
                    });
                  }});
  // lse[bh * T + i] = scale q_i . k_{i - lag(h)}, the one visible score, or
  // -inf without a key (the log of an empty sum): one thread per (b, h, i).
  defs.push_back({makeSpec("pe_attention_skip_lse", pe::AttentionOp::getOperationName(),
                           {{"lse", P}, {"q", P}, {"k", P}, {"n", I}, {"tokens", I}, {"width", I},
                            {"heads", I}, {"skip_base", I}, {"scale", ParamKind::F32}}),
                  [](KernelBuilder &k) {
                    Value lse = k.arg(0), q = k.arg(1), keys = k.arg(2), tokens = k.arg(4);
                    Value width = k.arg(5), heads = k.arg(6);
                    Value dh = divU(k, width, heads);
                    k.forGridStride(k.arg(3), [&](Value r) {
                      Value bh = divU(k, r, tokens), i = remU(k, r, tokens);
                      Value b = divU(k, bh, heads), h = remU(k, bh, heads);
                      Value key = k.sub(i, k.add(k.arg(7), h));
                      Value valid = cmpI(k, Pred::sge, key, k.i64(0));
                      Value safe = select(k, valid, key, k.i64(0));
                      Value col = k.mul(h, dh), rowBase = k.mul(b, tokens);
                      Value qAt = k.add(k.mul(k.add(rowBase, i), width), col);
                      Value kAt = k.add(k.mul(k.add(rowBase, safe), width), col);
                      ValueRange dot = k.forLoop(
                          k.i64(0), dh, k.i64(1), {k.f32(0.0)}, [&](Value d, ValueRange acc) {
                            return SmallVector<Value>{fma(k, k.load(q, k.add(qAt, d)),
                                                          k.load(keys, k.add(kAt, d)), acc[0])};
                          });
                      k.store(select(k, valid, k.mul(k.arg(8), dot[0]), k.f32(-INFINITY)), lse, r);
                    });
                  }});
  // dq = dk = 0 exactly (P is one-hot: dS = P (dP - P dP) = 0);
  // dv[b, j, col] = dy[b, j + lag(h), col], 0 when j + lag(h) >= T.
  defs.push_back({makeSpec("pe_attention_skip_grad", pe::AttentionGradOp::getOperationName(),
                           {{"dq", P}, {"dk", P}, {"dv", P}, {"dy", P}, {"n", I}, {"tokens", I},
                            {"width", I}, {"head_dim", I}, {"skip_base", I}}),
                  [](KernelBuilder &k) {
                    Value dq = k.arg(0), dk = k.arg(1), dv = k.arg(2), dy = k.arg(3);
                    Value tokens = k.arg(5), width = k.arg(6);
                    k.forGridStride(k.arg(4), [&](Value e) {
                      SkipElement s = skipElement(k, e, tokens, width, k.arg(7), k.arg(8));
                      Value query = k.add(s.token, s.lag);
                      Value valid = cmpI(k, Pred::slt, query, tokens);
                      Value safe = select(k, valid, query, s.token);
                      Value g = k.load(dy, k.add(k.mul(k.add(s.rowBase, safe), width), s.col));
                      k.store(k.f32(0.0), dq, e);
                      k.store(k.f32(0.0), dk, e);
                      k.store(select(k, valid, g, k.f32(0.0)), dv, e);
                    });
                  }});
}

std::optional<OpSteps> lowerSkipAttention(pe::AttentionOp attention, const AttentionShape &s) {
  auto base = attention.getSkipBase();
  if (!base)
    return std::nullopt;
  Operation &op = *attention.getOperation();
  const double scale = attention.getScale().convertToDouble();
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(
      "pe_attention_skip",
      {A::result(0), A::operand(2), A::i64(elementCount(op.getResult(0).getType())),
       A::i64(s.tokens), A::i64(s.width), A::i64(s.dh), A::i64(int64_t(*base))}));
  if (op.getNumResults() == 2) // the one score of each query (-inf without a key)
    steps.launches.push_back(Launch::kernelCall(
        "pe_attention_skip_lse",
        {A::result(1), A::operand(0), A::operand(1), A::i64(numel(attention.getLse())),
         A::i64(s.tokens), A::i64(s.width), A::i64(s.heads), A::i64(int64_t(*base)),
         A::f32(float(scale))}));
  return steps;
}

std::optional<OpSteps> lowerSkipAttentionGrad(pe::AttentionGradOp grad, const AttentionShape &s) {
  auto base = grad.getSkipBase();
  if (!base)
    return std::nullopt;
  OpSteps steps;
  steps.launches.push_back(Launch::kernelCall(
      "pe_attention_skip_grad",
      {A::result(0), A::result(1), A::result(2), A::operand(5),
       A::i64(elementCount(grad->getResult(0).getType())), A::i64(s.tokens), A::i64(s.width),
       A::i64(s.dh), A::i64(int64_t(*base))}));
  return steps;
}

} // namespace stringc::cudagen::attention
