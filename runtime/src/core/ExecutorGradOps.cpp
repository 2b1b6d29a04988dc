// Executor adapters of the pe backward ops (PEGradOps.td, docs/autodiff.md):
// broadcasting adjoints, mean_grad, and one adapter per backward kernel of
// LayerKernels.h / PositionKernels.h.
#include "Executor.h"

#include "../reference/KernelChecks.h"
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/reference/PositionKernels.h"

namespace stringrt::detail {
namespace {

using namespace stringrt::ref;

// The target shape is the result's (batch substituted).
void runSumTo(const OpContext &c) { sumTo<float>(c.in(0), c.out(0)); }

// The target is the result; the optional `like` operand only carries the
// batch size, so it must have the result's shape.
void runBroadcastTo(const OpContext &c) {
  TensorRef<float> y = c.out(0);
  if (c.numOperands() > 1 && c.in(1).shape != y.shape)
    c.fail("'like' has shape " + shapeToString(c.in(1).shape) + ", the result " +
           shapeToString(y.shape));
  broadcastTo<float>(c.in(0), y);
}

void runExpandAxis(const OpContext &c) {
  expandAxis<float>(c.in(0), c.op().getInt("axis"), c.op().getInt("size"), c.out(0));
}

// dx = dy repeated along `axis` (over every element without it) / N, with N
// the size of that axis of x at run time (numel(x) without axis).
void runMeanGrad(const OpContext &c) {
  TensorRef<const float> x = c.in(0);
  TensorRef<const float> dy = c.in(1);
  TensorRef<float> dx = c.out(0);
  checkShape("mean_grad dx", dx, x.shape);
  std::optional<int64_t> axis = c.op().getOptionalInt("axis");
  double count = 0;
  if (axis) {
    if (*axis < 0 || *axis >= x.rank())
      c.fail("axis " + std::to_string(*axis) + " out of range for x of shape " +
             shapeToString(x.shape));
    count = static_cast<double>(x.dim(static_cast<int>(*axis)));
    expandAxis<float>(dy, *axis, x.dim(static_cast<int>(*axis)), dx);
    for (int64_t i = 0; i < dx.numel(); ++i)
      dx[i] = static_cast<float>(static_cast<double>(dx[i]) / count);
  } else {
    checkShape("mean_grad dy", dy, {});
    count = static_cast<double>(x.numel());
    float value = static_cast<float>(static_cast<double>(dy[0]) / count);
    for (int64_t i = 0; i < dx.numel(); ++i)
      dx[i] = value;
  }
}

void runLinearGradInput(const OpContext &c) {
  linearGradInput<float>(c.in(0), c.in(1), c.out(0));
}

void runLinearGradWeight(const OpContext &c) {
  linearGradWeight<float>(c.in(0), c.in(1), c.out(0));
}

void runLayerNormGrad(const OpContext &c) {
  layerNormGrad<float>(c.in(0), c.in(1), c.in(2), c.floatOr("epsilon", 1e-5), c.out(0),
                       c.out(1), c.out(2));
}

void runGeluGrad(const OpContext &c) {
  geluGrad<float>(c.in(0), c.in(1), c.boolOr("approximate", false), c.out(0));
}

void runReluGrad(const OpContext &c) { reluGrad<float>(c.in(0), c.in(1), c.out(0)); }

void runPatchEmbedGrad(const OpContext &c) {
  patchEmbedGrad<float>(c.in(0), c.in(1), c.op().getInt("patch"), c.out(0), c.out(1));
}

void runTokenEmbedGrad(const OpContext &c) {
  tokenEmbedGrad<float>(c.inI32(0), c.in(1), c.out(0));
}

void runClassTokenGrad(const OpContext &c) { classTokenGrad<float>(c.in(0), c.out(0), c.out(1)); }

void runSelectTokenGrad(const OpContext &c) {
  selectTokenGrad<float>(c.in(0), c.op().getInt("index"), c.out(0));
}

// attention_grad's drel: result 3, exactly when rel (operand 4) is given.
OptionalOutput<float> attentionGradDrel(const OpContext &c) {
  bool hasRel = c.numOperands() == 5;
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
  attentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.optIn(4), c.op().getInt("heads"),
                       c.op().getFloat("scale"), mask, attentionSkipBase(c, mask), c.out(0),
                       c.out(1), c.out(2), drel);
}

void runCrossEntropyGrad(const OpContext &c) {
  crossEntropyGrad<float>(c.in(0), c.inI32(1), c.in(2), c.out(0));
}

// The argument checks of the reference kernels of the ops stringc
// generates kernels for.
void checkSumTo(const OpContext &c) { checks::sumTo<float>(c.in(0), c.out(0)); }
void checkLayerNormGrad(const OpContext &c) {
  checks::layerNormGrad<float>(c.in(0), c.in(1), c.in(2), c.floatOr("epsilon", 1e-5), c.out(0),
                               c.out(1), c.out(2));
}
void checkGeluGrad(const OpContext &c) {
  checks::unaryGrad<float>("gelu_grad", c.in(0), c.in(1), c.out(0));
}
void checkReluGrad(const OpContext &c) {
  checks::unaryGrad<float>("relu_grad", c.in(0), c.in(1), c.out(0));
}
void checkTokenEmbedGrad(const OpContext &c) {
  checks::tokenEmbedGrad<float>(c.inI32(0), c.in(1), c.out(0));
}
void checkClassTokenGrad(const OpContext &c) {
  checks::classTokenGrad<float>(c.in(0), c.out(0), c.out(1));
}
void checkSelectTokenGrad(const OpContext &c) {
  checks::selectTokenGrad<float>(c.in(0), c.op().getInt("index"), c.out(0));
}
void checkAttentionGrad(const OpContext &c) {
  OptionalOutput<float> drel = attentionGradDrel(c);
  AttentionMask mask = attentionMask(c);
  checks::attentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.optIn(4),
                               c.op().getInt("heads"), mask, attentionSkipBase(c, mask), c.out(0),
                               c.out(1), c.out(2), drel);
}
void checkCrossEntropyGrad(const OpContext &c) {
  checks::crossEntropyGrad<float>(c.in(0), c.inI32(1), c.in(2), c.out(0));
}

void runRopeGradFreqs(const OpContext &c) {
  ropeGradFreqs<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.out(0));
}

void runHouseholderGradFreqs(const OpContext &c) {
  householderGradFreqs<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.out(0), c.out(1));
}

void runSkewGrad(const OpContext &c) { skewGrad<float>(c.in(0), c.op().getInt("dim"), c.out(0)); }

void runSparseSkewGrad(const OpContext &c) {
  sparseSkewGrad<float>(c.in(0), c.op().getInt("dim"), c.op().getInts("support"), c.out(0));
}

void runCayleyGrad(const OpContext &c) {
  cayleyGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0), c.out(1));
}

void runGeneratorExpGrad(const OpContext &c) {
  generatorExpGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}

void runApplyRotationGrad(const OpContext &c) {
  applyRotationGrad<float>(c.in(0), c.in(1), c.in(2), c.op().getInt("heads"), c.out(0),
                           c.out(1));
}

void runCommutatorNormGrad(const OpContext &c) {
  commutatorNormGrad<float>(c.in(0), c.in(1), c.out(0));
}

void runSpdGateGrad(const OpContext &c) {
  spdGateGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0), c.out(1));
}

} // namespace

void addGradOps(OpTable &table) {
  table["pe.sum_to"] = {runSumTo, 1, 1, 1, 1, checkSumTo};
  table["pe.broadcast_to"] = {runBroadcastTo, 1, 2};
  table["pe.expand_axis"] = {runExpandAxis, 1, 1};
  table["pe.mean_grad"] = {runMeanGrad, 2, 2};
  table["pe.linear_grad_input"] = {runLinearGradInput, 2, 2};
  table["pe.linear_grad_weight"] = {runLinearGradWeight, 2, 2};
  table["pe.layer_norm_grad"] = {runLayerNormGrad, 3, 3, 3, 3, checkLayerNormGrad};
  table["pe.gelu_grad"] = {runGeluGrad, 2, 2, 1, 1, checkGeluGrad};
  table["pe.relu_grad"] = {runReluGrad, 2, 2, 1, 1, checkReluGrad};
  table["pe.patch_embed_grad"] = {runPatchEmbedGrad, 2, 2, 2, 2};
  table["pe.token_embed_grad"] = {runTokenEmbedGrad, 2, 2, 1, 1, checkTokenEmbedGrad};
  table["pe.class_token_grad"] = {runClassTokenGrad, 1, 1, 2, 2, checkClassTokenGrad};
  table["pe.select_token_grad"] = {runSelectTokenGrad, 1, 1, 1, 1, checkSelectTokenGrad};
  table["pe.attention_grad"] = {runAttentionGrad, 4, 5, 3, 4, checkAttentionGrad};
  table["pe.cross_entropy_grad"] = {runCrossEntropyGrad, 3, 3, 1, 1, checkCrossEntropyGrad};
  table["pe.rope_grad_freqs"] = {runRopeGradFreqs, 4, 4};
  table["pe.householder_grad_freqs"] = {runHouseholderGradFreqs, 5, 5, 2, 2};
  table["pe.skew_grad"] = {runSkewGrad, 1, 1};
  table["pe.sparse_skew_grad"] = {runSparseSkewGrad, 1, 1};
  table["pe.cayley_grad"] = {runCayleyGrad, 3, 3, 2, 2};
  table["pe.generator_exp_grad"] = {runGeneratorExpGrad, 3, 3};
  table["pe.apply_rotation_grad"] = {runApplyRotationGrad, 3, 3, 2, 2};
  table["pe.commutator_norm_grad"] = {runCommutatorNormGrad, 2, 2};
  table["pe.spd_gate_grad"] = {runSpdGateGrad, 3, 3, 2, 2};
}

} // namespace stringrt::detail
