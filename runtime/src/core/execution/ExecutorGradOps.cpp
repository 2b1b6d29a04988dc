// Executor adapters of the pe backward ops (PEGradOps.td, docs/autodiff.md):
// broadcasting adjoints, mean_grad, and one adapter per backward kernel of
// LayerKernels.h / PositionKernels.h.
#include "execution/Executor.h"

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
  crossEntropyGrad<float>(c.in(0), c.inI32(1), c.in(2), c.out(0), c.floatOr("smoothing", 0.0));
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
  checks::crossEntropyGrad<float>(c.in(0), c.inI32(1), c.in(2), c.out(0), c.floatOr("smoothing", 0.0));
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
  table[OpCode::SumTo] = {runSumTo, checkSumTo};
  table[OpCode::BroadcastTo] = {runBroadcastTo};
  table[OpCode::ExpandAxis] = {runExpandAxis};
  table[OpCode::MeanGrad] = {runMeanGrad};
  table[OpCode::LinearGradInput] = {runLinearGradInput};
  table[OpCode::LinearGradWeight] = {runLinearGradWeight};
  table[OpCode::LayerNormGrad] = {runLayerNormGrad, checkLayerNormGrad};
  table[OpCode::GeluGrad] = {runGeluGrad, checkGeluGrad};
  table[OpCode::ReluGrad] = {runReluGrad, checkReluGrad};
  table[OpCode::PatchEmbedGrad] = {runPatchEmbedGrad};
  table[OpCode::TokenEmbedGrad] = {runTokenEmbedGrad, checkTokenEmbedGrad};
  table[OpCode::ClassTokenGrad] = {runClassTokenGrad, checkClassTokenGrad};
  table[OpCode::SelectTokenGrad] = {runSelectTokenGrad, checkSelectTokenGrad};
  table[OpCode::AttentionGrad] = {runAttentionGrad, checkAttentionGrad};
  table[OpCode::CrossEntropyGrad] = {runCrossEntropyGrad, checkCrossEntropyGrad};
  table[OpCode::RopeGradFreqs] = {runRopeGradFreqs};
  table[OpCode::HouseholderGradFreqs] = {runHouseholderGradFreqs};
  table[OpCode::SkewGrad] = {runSkewGrad};
  table[OpCode::SparseSkewGrad] = {runSparseSkewGrad};
  table[OpCode::CayleyGrad] = {runCayleyGrad};
  table[OpCode::GeneratorExpGrad] = {runGeneratorExpGrad};
  table[OpCode::ApplyRotationGrad] = {runApplyRotationGrad};
  table[OpCode::CommutatorNormGrad] = {runCommutatorNormGrad};
  table[OpCode::SpdGateGrad] = {runSpdGateGrad};
}

} // namespace stringrt::detail
