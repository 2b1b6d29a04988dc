// The training step's optimizer over flat parameter buffers, exactly as
// pe.optimizer describes it (dialect/include/stringc/Dialect/PE/PEModuleOps.td):
//
// - global clipping (clip_norm > 0): every gradient is multiplied by
//   min(1, clip_norm / ||g||_2), the norm over all trainable gradients;
// - adamw: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
//   w -= lr_t (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd w);
// - sgd: u = momentum u + g + wd w, w -= lr_t u;
// - ema_decay d > 0: after the update of step t, the EMA of the weights
//   e = w (t = 1), e = d e + (1 - d) w (t > 1): PyTorch's
//   AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(d)) updated after every
//   step (its first update copies the weights);
// - frozen slots are never read or written (parameters, state).
//
// Arithmetic is done in double per element and stored as float; the order of
// every reduction is fixed, so a step is deterministic (resume is bit-exact).
#pragma once

#include "stringrt/Manifest.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stringrt {

// The learning rate of step `step` (counting from 1) of a run of `totalSteps`
// steps. `constant`: lr. `warmup_cosine`: lr * t / warmup for t <= warmup, then
// min_lr + (lr - min_lr) (1 + cos(pi (t - warmup) / (N - warmup))) / 2, with
// the cosine's progress clamped to [0, 1] (t > N, or N <= warmup, give min_lr).
// Throws Error for step < 1 or totalSteps < 1.
double learningRate(const ManifestOptimizer &opt, int64_t step, int64_t totalSteps);

// sqrt(sum g^2) accumulated in double, in order.
double globalNorm(const float *grads, size_t count);
double globalNorm(const std::vector<float> &grads);

// One parameter's elements [offset, offset + size) of the flat buffers (its
// shape is what checkpoints record).
struct OptimizerSlot {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;
  size_t size = 0;
  bool frozen = false;
};

// What one step did.
struct OptimizerStepInfo {
  int64_t step = 0;        // The step number t just taken (from 1).
  double lr = 0;           // lr_t.
  double gradNorm = 0;     // Global norm of the trainable gradients, before clipping.
  double clipScale = 1;    // The factor the gradients were multiplied by.
};

class Optimizer {
public:
  // `slots` must lie inside [0, totalSize) and not overlap. Validates the
  // configuration (kind, ranges of the hyperparameters) and throws Error.
  Optimizer(const ManifestOptimizer &config, std::vector<OptimizerSlot> slots,
            size_t totalSize);

  const ManifestOptimizer &config() const { return config_; }
  const std::vector<OptimizerSlot> &slots() const { return slots_; }
  bool isAdamW() const { return adamw_; }

  // Takes step t = stepCount() + 1 of a run of `totalSteps` steps: updates the
  // trainable elements of `params` and the state from `grads` (which are not
  // modified). Both must have totalSize() elements. Refuses a shard (below).
  OptimizerStepInfo step(std::vector<float> &params,
                         const std::vector<float> &grads, int64_t totalSteps);

  // Sharded state (ZeRO-1, stringrt/Distributed.h): an optimizer may hold
  // the state of the elements [stateBegin(), stateEnd()) only; one built by
  // the constructor holds all of them.
  size_t stateBegin() const { return stateBegin_; }
  size_t stateEnd() const { return stateEnd_; }
  bool holdsAllState() const { return stateBegin_ == 0 && stateEnd_ == totalSize_; }
  // A copy holding the state of [begin, end) only, which this one holds (or
  // which is empty): its
  // stateBuffers() are end - begin elements each (element i at i - begin);
  // the configuration and the step count are kept. The slots must be in
  // offset order, so that shards in order visit the elements in step()'s
  // order. shard(0, 0) holds no state.
  Optimizer shard(size_t begin, size_t end) const;
  // The squared gradients of the trainable elements held, summed in double in
  // step()'s order onto `sum` (grads[i - stateBegin()] is element i's): the
  // shards of [0, totalSize()) in order, each continuing the sum of the one
  // before, give the sum step() takes the norm of, bit for bit.
  double squaredNorm(const float *grads, double sum) const;
  // step() of the elements held, given `sumSq`, the squared norm of all
  // trainable gradients (squaredNorm over every shard): updates the held
  // trainable elements of `params` (totalSize() elements) and their state
  // from grads[i - stateBegin()]; the same bits as step() gives them.
  OptimizerStepInfo stepShard(std::vector<float> &params, const float *grads, double sumSq,
                              int64_t totalSteps);

  size_t totalSize() const { return totalSize_; }
  // Steps taken so far (restored from checkpoints).
  int64_t stepCount() const { return step_; }
  void setStepCount(int64_t step);

  // Whether an EMA of the weights is kept (config().emaDecay > 0).
  bool hasEma() const { return config_.emaDecay > 0; }
  // The EMA weights: `params` with every trainable slot replaced by its EMA
  // (frozen slots are the parameters themselves; a shard replaces the
  // elements it holds). Before the first step, `params`. Throws Error
  // without an EMA or for a wrong size.
  std::vector<float> emaParameters(const std::vector<float> &params) const;

  // The state buffers, each totalSize() elements (frozen slots stay 0); a
  // shard's, stateEnd() - stateBegin().
  // AdamW: "m" and "v"; SGD: "u"; with an EMA also "ema". Checkpoints store
  // them per slot as "<prefix><slot name>".
  struct StateBuffer {
    std::string prefix; // "adam.m.", "adam.v.", "sgd.u.", "ema."
    std::vector<float> *values;
  };
  std::vector<StateBuffer> stateBuffers();
  struct ConstStateBuffer {
    std::string prefix;
    const std::vector<float> *values;
  };
  std::vector<ConstStateBuffer> stateBuffers() const;

private:
  Optimizer() = default; // shard()'s, filled by it
  // stateBuffers() of a const or mutable optimizer.
  template <typename Buffer, typename Self> static std::vector<Buffer> buffersOf(Self &self);
  // The EMA after the update of step t (the weights themselves at t = 1).
  void updateEma(const std::vector<float> &params, int64_t t);

  ManifestOptimizer config_;
  std::vector<OptimizerSlot> slots_;
  size_t totalSize_ = 0;
  bool adamw_ = true;
  int64_t step_ = 0;
  size_t stateBegin_ = 0, stateEnd_ = 0; // the elements whose state is held
  std::vector<float> m_, v_; // AdamW moments.
  std::vector<float> u_;     // SGD momentum buffer.
  std::vector<float> ema_;   // EMA of the weights (empty: none).
};

} // namespace stringrt
