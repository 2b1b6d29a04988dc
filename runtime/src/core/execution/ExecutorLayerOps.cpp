// Executor adapters of the pe layer ops (dense layers, normalisation,
// activations, elementwise arithmetic, embeddings, attention, loss): each
// reads the op's attributes and calls its reference kernel (LayerKernels.h);
// the ops stringc generates kernels for also have a check adapter, which
// runs the reference kernel's argument checks alone (KernelChecks.h).
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

namespace {

using namespace stringrt::ref;

void runLinear(const OpContext &c) { linear<float>(c.in(0), c.in(1), c.optIn(2), c.out(0)); }

void runLayerNorm(const OpContext &c) {
  layerNorm<float>(c.in(0), c.in(1), c.in(2), c.floatOr("epsilon", 1e-5), c.out(0));
}

void runGelu(const OpContext &c) { gelu<float>(c.in(0), c.boolOr("approximate", false), c.out(0)); }

void runRelu(const OpContext &c) { relu<float>(c.in(0), c.out(0)); }

void runAdd(const OpContext &c) { add<float>(c.in(0), c.in(1), c.out(0)); }
void runSub(const OpContext &c) { sub<float>(c.in(0), c.in(1), c.out(0)); }
void runMul(const OpContext &c) { mul<float>(c.in(0), c.in(1), c.out(0)); }

void runScale(const OpContext &c) {
  scale<float>(c.in(0), c.op().getFloat("factor"), c.floatOr("bias", 0.0), c.out(0));
}

void runMean(const OpContext &c) { mean<float>(c.in(0), c.op().getOptionalInt("axis"), c.out(0)); }

void runPatchEmbed(const OpContext &c) {
  patchEmbed<float>(c.in(0), c.in(1), c.in(2), c.op().getInt("patch"), c.out(0));
}

void runTokenEmbed(const OpContext &c) { tokenEmbed<float>(c.inI32(0), c.in(1), c.out(0)); }

void runClassToken(const OpContext &c) { classToken<float>(c.in(0), c.in(1), c.out(0)); }

void runSelectToken(const OpContext &c) {
  selectToken<float>(c.in(0), c.op().getInt("index"), c.out(0));
}

void runAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  attention<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"),
                   c.op().getFloat("scale"), mask, attentionSkipBase(c, mask), c.out(0));
}

void runCrossEntropy(const OpContext &c) {
  crossEntropy<float>(c.in(0), c.inI32(1), c.out(0), c.floatOr("smoothing", 0.0));
}

// The argument checks of the reference kernels above.
void checkLayerNorm(const OpContext &c) {
  checks::layerNorm<float>(c.in(0), c.in(1), c.in(2), c.floatOr("epsilon", 1e-5), c.out(0));
}
void checkGelu(const OpContext &c) { checks::unary<float>("gelu", c.in(0), c.out(0)); }
void checkRelu(const OpContext &c) { checks::unary<float>("relu", c.in(0), c.out(0)); }
void checkAdd(const OpContext &c) { checks::binary<float>("add", c.in(0), c.in(1), c.out(0)); }
void checkSub(const OpContext &c) { checks::binary<float>("sub", c.in(0), c.in(1), c.out(0)); }
void checkMul(const OpContext &c) { checks::binary<float>("mul", c.in(0), c.in(1), c.out(0)); }
void checkScale(const OpContext &c) { checks::unary<float>("scale", c.in(0), c.out(0)); }
void checkTokenEmbed(const OpContext &c) {
  checks::tokenEmbed<float>(c.inI32(0), c.in(1), c.out(0));
}
void checkClassToken(const OpContext &c) { checks::classToken<float>(c.in(0), c.in(1), c.out(0)); }
void checkSelectToken(const OpContext &c) {
  checks::selectToken<float>(c.in(0), c.op().getInt("index"), c.out(0));
}
void checkAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  checks::attention<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"), mask,
                           attentionSkipBase(c, mask), c.out(0));
}

} // namespace

void addLayerOps(OpTable &table) {
  table[OpCode::Linear] = {runLinear};
  table[OpCode::LayerNorm] = {runLayerNorm, checkLayerNorm};
  table[OpCode::Gelu] = {runGelu, checkGelu};
  table[OpCode::Relu] = {runRelu, checkRelu};
  table[OpCode::Add] = {runAdd, checkAdd};
  table[OpCode::Sub] = {runSub, checkSub};
  table[OpCode::Mul] = {runMul, checkMul};
  table[OpCode::Scale] = {runScale, checkScale};
  table[OpCode::Mean] = {runMean};
  table[OpCode::PatchEmbed] = {runPatchEmbed};
  table[OpCode::TokenEmbed] = {runTokenEmbed, checkTokenEmbed};
  table[OpCode::ClassToken] = {runClassToken, checkClassToken};
  table[OpCode::SelectToken] = {runSelectToken, checkSelectToken};
  table[OpCode::Attention] = {runAttention, checkAttention};
  table[OpCode::CrossEntropy] = {runCrossEntropy};
}

} // namespace stringrt::detail
