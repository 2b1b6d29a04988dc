// Executor adapters of the pe layer ops still outside the op library
// (attention), each forward op beside its backward ops (docs/autodiff.md):
// each reads the op's attributes and calls its reference kernel
// (LayerKernels.h); the ops stringc generates kernels for also have a check
// adapter, which runs the reference kernel's argument checks alone
// (KernelChecks.h). The layer ops of the op library (runtime/src/ops/layer)
// register their own adapters.
#include "execution/Executor.h"

#include "../reference/KernelChecks.h"
#include "stringrt/reference/LayerKernels.h"

namespace stringrt::detail {

// The `mask` attribute of pe.attention / pe.attention_grad.
ref::AttentionMask attentionMask(const OpContext &c) {
  const std::string &mask = c.op().getString("mask");
  if (mask == "none")
    return ref::AttentionMask::None;
  if (mask == "causal")
    return ref::AttentionMask::Causal;
  if (mask == "skip")
    return ref::AttentionMask::Skip;
  c.fail("unknown mask '" + mask + "' (none, causal or skip)");
}

// `skip_base`: required with mask skip, absent otherwise.
int64_t attentionSkipBase(const OpContext &c, ref::AttentionMask mask) {
  std::optional<int64_t> skipBase = c.op().getOptionalInt("skip_base");
  if ((mask == ref::AttentionMask::Skip) != skipBase.has_value())
    c.fail("skip_base goes with mask skip, and only with it");
  return skipBase.value_or(0);
}

ref::OptionalOutput<float> attentionLse(const OpContext &c) {
  ref::OptionalOutput<float> lse;
  if (c.numResults() == 2)
    lse = c.out(1);
  return lse;
}

void checkAttentionSaved(const OpContext &c, size_t yIndex) {
  const ref::TensorRef<const float> q = c.in(0), y = c.in(yIndex), lse = c.in(yIndex + 1);
  ref::checkShape("attention_grad: y", y, q.shape);
  if (q.rank() == 3)
    ref::checkShape("attention_grad: lse", lse, {q.dim(0), c.op().getInt("heads"), q.dim(1)});
}

namespace {

using namespace stringrt::ref;

void runAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  attention<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"),
                   c.op().getFloat("scale"), mask, attentionSkipBase(c, mask), c.out(0),
                   attentionLse(c));
}

// attention_grad's operands: q, k, v, y, lse, dy, rel?
constexpr size_t kGradY = 3, kGradDy = 5, kGradRel = 6;

// attention_grad's drel: result 3, exactly when rel (operand 6) is given.
OptionalOutput<float> attentionGradDrel(const OpContext &c) {
  bool hasRel = c.numOperands() == kGradRel + 1;
  if (c.numResults() != (hasRel ? 4u : 3u))
    c.fail(std::to_string(c.numResults()) + " results for " + std::to_string(c.numOperands()) +
           " operands (drel exactly when rel is given)");
  OptionalOutput<float> drel;
  if (hasRel)
    drel = c.out(3);
  return drel;
}

void runAttentionGrad(const OpContext &c) {
  OptionalOutput<float> drel = attentionGradDrel(c);
  AttentionMask mask = attentionMask(c);
  checkAttentionSaved(c, kGradY);
  attentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(kGradDy), c.optIn(kGradRel),
                       c.op().getInt("heads"), c.op().getFloat("scale"), mask,
                       attentionSkipBase(c, mask), c.out(0), c.out(1), c.out(2), drel);
}

// The argument checks of the reference kernels above.
void checkAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  checks::attention<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"), mask,
                           attentionSkipBase(c, mask), c.out(0));
  if (OptionalOutput<float> lse = attentionLse(c))
    checkShape("attention: lse", *lse, {c.in(0).dim(0), c.op().getInt("heads"), c.in(0).dim(1)});
}
void checkAttentionGrad(const OpContext &c) {
  OptionalOutput<float> drel = attentionGradDrel(c);
  AttentionMask mask = attentionMask(c);
  checkAttentionSaved(c, kGradY);
  checks::attentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(kGradDy), c.optIn(kGradRel),
                               c.op().getInt("heads"), mask, attentionSkipBase(c, mask), c.out(0),
                               c.out(1), c.out(2), drel);
}

} // namespace

void addLayerOps(OpTable &table) {
  table[OpCode::Attention] = {runAttention, checkAttention};
  table[OpCode::AttentionGrad] = {runAttentionGrad, checkAttentionGrad};
}

} // namespace stringrt::detail
