#include "stringrt/Optimizer.h"

#include "training/AdamWUpdate.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace stringrt {

namespace {

constexpr double kPi = 3.14159265358979323846;

void checkConfig(const ManifestOptimizer &c) {
  auto bad = [](const std::string &what) {
    throw Error("optimizer: " + what);
  };
  if (c.kind != OptimizerKind::AdamW && c.kind != OptimizerKind::Sgd)
    bad("unknown kind");
  if (c.schedule != LrSchedule::Constant &&
      c.schedule != LrSchedule::WarmupCosine)
    bad("unknown schedule");
  // Written so that NaN fails too.
  if (!(c.lr > 0) || !std::isfinite(c.lr))
    bad(fmt::format("lr must be > 0, got {}", c.lr));
  if (!(c.beta1 >= 0 && c.beta1 < 1))
    bad(fmt::format("beta1 must be in [0, 1), got {}", c.beta1));
  if (!(c.beta2 >= 0 && c.beta2 < 1))
    bad(fmt::format("beta2 must be in [0, 1), got {}", c.beta2));
  if (!(c.eps > 0))
    bad(fmt::format("eps must be > 0, got {}", c.eps));
  if (!(c.weightDecay >= 0) || !std::isfinite(c.weightDecay))
    bad(fmt::format("weight_decay must be >= 0, got {}", c.weightDecay));
  if (!(c.momentum >= 0 && c.momentum < 1))
    bad(fmt::format("momentum must be in [0, 1), got {}", c.momentum));
  if (!(c.clipNorm >= 0) || !std::isfinite(c.clipNorm))
    bad(fmt::format("clip_norm must be >= 0, got {}", c.clipNorm));
  if (c.warmupSteps < 0)
    bad(fmt::format("warmup_steps must be >= 0, got {}", c.warmupSteps));
  if (!(c.minLr >= 0 && c.minLr <= c.lr))
    bad(fmt::format("min_lr must be in [0, lr], got {}", c.minLr));
  if (!(c.emaDecay >= 0 && c.emaDecay < 1))
    bad(fmt::format("ema_decay must be in [0, 1), got {}", c.emaDecay));
}

} // namespace

double learningRate(const ManifestOptimizer &opt, int64_t step,
                    int64_t totalSteps) {
  if (step < 1)
    throw Error(fmt::format("learningRate: step must be >= 1, got {}", step));
  if (totalSteps < 1)
    throw Error(fmt::format("learningRate: totalSteps must be >= 1, got {}",
                            totalSteps));
  switch (opt.schedule) {
  case LrSchedule::Constant:
    return opt.lr;
  case LrSchedule::WarmupCosine: {
    const int64_t warmup = opt.warmupSteps;
    if (step <= warmup)
      return opt.lr * static_cast<double>(step) / static_cast<double>(warmup);
    double progress = 1.0;
    if (totalSteps > warmup)
      progress = std::min(1.0, static_cast<double>(step - warmup) /
                                   static_cast<double>(totalSteps - warmup));
    return opt.minLr +
           (opt.lr - opt.minLr) * (1.0 + std::cos(kPi * progress)) / 2.0;
  }
  }
  throw Error("learningRate: unknown schedule");
}

namespace {

// Elements per chunk of the parallel updates below: a few thousand cycles
// of work each, so that small models stay on the calling thread.
constexpr int64_t kUpdateGrain = 16384;

// Calls update(begin, end) over the elements of the trainable slots inside
// [first, last), runs of adjacent slots merged, in parallel chunks. For
// elementwise updates only: then the chunking changes no result.
template <class Update>
void forTrainableElements(const std::vector<OptimizerSlot> &slots, size_t first, size_t last,
                          Update &&update) {
  for (size_t i = 0; i < slots.size();) {
    if (slots[i].frozen) {
      ++i;
      continue;
    }
    size_t begin = slots[i].offset;
    size_t end = begin + slots[i].size;
    for (++i; i < slots.size() && !slots[i].frozen && slots[i].offset == end; ++i)
      end += slots[i].size;
    begin = std::max(begin, first);
    end = std::min(end, last);
    if (begin >= end)
      continue;
    cpu::parallelFor(static_cast<int64_t>(begin), static_cast<int64_t>(end), kUpdateGrain,
                     [&](int64_t b, int64_t e) {
                       update(static_cast<size_t>(b), static_cast<size_t>(e));
                     });
  }
}

} // namespace

double globalNorm(const float *grads, size_t count) {
  double sum = 0.0;
  for (size_t i = 0; i < count; ++i) {
    double g = grads[i];
    sum += g * g;
  }
  return std::sqrt(sum);
}

double globalNorm(const std::vector<float> &grads) {
  return globalNorm(grads.data(), grads.size());
}

Optimizer::Optimizer(const ManifestOptimizer &config,
                     std::vector<OptimizerSlot> slots, size_t totalSize)
    : config_(config), slots_(std::move(slots)), totalSize_(totalSize) {
  checkConfig(config_);
  adamw_ = config_.kind == OptimizerKind::AdamW;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const OptimizerSlot &slot : slots_) {
    if (slot.offset > totalSize_ || slot.size > totalSize_ - slot.offset)
      throw Error(fmt::format(
          "optimizer: slot '{}' [{}, {}) lies outside the {} parameters",
          slot.name, slot.offset, slot.offset + slot.size, totalSize_));
    ranges.emplace_back(slot.offset, slot.offset + slot.size);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw Error("optimizer: parameter slots overlap");
  stateEnd_ = totalSize_;
  if (adamw_) {
    m_.assign(totalSize_, 0.0f);
    v_.assign(totalSize_, 0.0f);
  } else {
    u_.assign(totalSize_, 0.0f);
  }
  if (config_.emaDecay > 0)
    ema_.assign(totalSize_, 0.0f);
}

Optimizer Optimizer::shard(size_t begin, size_t end) const {
  if (begin > end || (begin < end && (begin < stateBegin_ || end > stateEnd_)))
    throw Error(fmt::format("optimizer: a shard of the state of elements [{}, {}), but this "
                            "optimizer holds [{}, {})",
                            begin, end, stateBegin_, stateEnd_));
  for (size_t i = 1; i < slots_.size(); ++i)
    if (slots_[i].offset < slots_[i - 1].offset)
      throw Error(fmt::format("optimizer: slot '{}' lies before slot '{}' in the parameters: "
                              "the state cannot be sharded in the order step() visits it",
                              slots_[i].name, slots_[i - 1].name));
  Optimizer s;
  s.config_ = config_;
  s.slots_ = slots_;
  s.totalSize_ = totalSize_;
  s.adamw_ = adamw_;
  s.step_ = step_;
  s.stateBegin_ = begin;
  s.stateEnd_ = end;
  auto slice = [&](const std::vector<float> &values) {
    if (values.empty() || begin == end)
      return std::vector<float>();
    return std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(begin - stateBegin_),
                              values.begin() + static_cast<std::ptrdiff_t>(end - stateBegin_));
  };
  s.m_ = slice(m_);
  s.v_ = slice(v_);
  s.u_ = slice(u_);
  s.ema_ = slice(ema_);
  return s;
}

void Optimizer::setStepCount(int64_t step) {
  if (step < 0)
    throw Error(fmt::format("optimizer: step count must be >= 0, got {}", step));
  step_ = step;
}

template <typename Buffer, typename Self>
std::vector<Buffer> Optimizer::buffersOf(Self &self) {
  std::vector<Buffer> buffers;
  if (self.adamw_)
    buffers = {{"adam.m.", &self.m_}, {"adam.v.", &self.v_}};
  else
    buffers = {{"sgd.u.", &self.u_}};
  if (self.hasEma())
    buffers.push_back({"ema.", &self.ema_});
  return buffers;
}

std::vector<Optimizer::StateBuffer> Optimizer::stateBuffers() {
  return buffersOf<StateBuffer>(*this);
}

std::vector<Optimizer::ConstStateBuffer> Optimizer::stateBuffers() const {
  return buffersOf<ConstStateBuffer>(*this);
}

std::vector<float> Optimizer::emaParameters(const std::vector<float> &params) const {
  if (!hasEma())
    throw Error("optimizer: the model keeps no EMA of its weights (optimizer ema = ...)");
  if (params.size() != totalSize_)
    throw Error(fmt::format("optimizer: expected {} parameters, got {}", totalSize_,
                            params.size()));
  std::vector<float> weights = params;
  if (step_ == 0)
    return weights;
  for (const OptimizerSlot &slot : slots_) {
    const size_t begin = std::max(slot.offset, stateBegin_);
    const size_t end = std::min(slot.offset + slot.size, stateEnd_);
    if (!slot.frozen && begin < end)
      std::copy(ema_.begin() + static_cast<std::ptrdiff_t>(begin - stateBegin_),
                ema_.begin() + static_cast<std::ptrdiff_t>(end - stateBegin_),
                weights.begin() + static_cast<std::ptrdiff_t>(begin));
  }
  return weights;
}

void Optimizer::updateEma(const std::vector<float> &params, int64_t t) {
  const double d = config_.emaDecay;
  float *ema = ema_.data();
  const size_t base = stateBegin_;
  forTrainableElements(slots_, stateBegin_, stateEnd_, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      ema[i - base] = t == 1 ? params[i]
                             : static_cast<float>(d * static_cast<double>(ema[i - base]) +
                                                  (1.0 - d) * static_cast<double>(params[i]));
  });
}

OptimizerStepInfo Optimizer::step(std::vector<float> &params,
                                  const std::vector<float> &grads,
                                  int64_t totalSteps) {
  if (params.size() != totalSize_ || grads.size() != totalSize_)
    throw Error(fmt::format("optimizer: expected {} parameters and gradients, "
                            "got {} and {}",
                            totalSize_, params.size(), grads.size()));
  if (!holdsAllState())
    throw Error(fmt::format("optimizer: this shard holds the state of elements [{}, {}) of "
                            "{}: its step needs the whole gradient's norm (stepShard)",
                            stateBegin_, stateEnd_, totalSize_));
  return stepShard(params, grads.data(), squaredNorm(grads.data(), 0.0), totalSteps);
}

double Optimizer::squaredNorm(const float *grads, double sum) const {
  for (const OptimizerSlot &slot : slots_) {
    const size_t begin = std::max(slot.offset, stateBegin_);
    const size_t end = std::min(slot.offset + slot.size, stateEnd_);
    if (slot.frozen || begin >= end)
      continue;
    const float *g = grads + (begin - stateBegin_);
    for (size_t i = 0; i < end - begin; ++i) {
      double x = g[i];
      sum += x * x;
    }
  }
  return sum;
}

OptimizerStepInfo Optimizer::stepShard(std::vector<float> &params, const float *grads,
                                       double sumSq, int64_t totalSteps) {
  if (params.size() != totalSize_)
    throw Error(fmt::format("optimizer: expected {} parameters, got {}", totalSize_,
                            params.size()));
  OptimizerStepInfo info;
  info.step = step_ + 1;
  info.lr = learningRate(config_, info.step, totalSteps);
  info.gradNorm = std::sqrt(sumSq);
  if (config_.clipNorm > 0 && info.gradNorm > config_.clipNorm)
    info.clipScale = config_.clipNorm / info.gradNorm;

  const double lr = info.lr;
  const double wd = config_.weightDecay;
  const double scale = info.clipScale;
  // Element i's gradient and state at i - base.
  const size_t base = stateBegin_;
  float *w = params.data();
  if (adamw_) {
    const double t = static_cast<double>(info.step);
    const detail::AdamWConstants constants{lr,
                                           wd,
                                           scale,
                                           config_.beta1,
                                           config_.beta2,
                                           config_.eps,
                                           1.0 - std::pow(config_.beta1, t),
                                           1.0 - std::pow(config_.beta2, t)};
    forTrainableElements(slots_, stateBegin_, stateEnd_, [&](size_t begin, size_t end) {
      detail::adamwUpdate(constants, grads + (begin - base), w + begin, m_.data() + (begin - base),
                          v_.data() + (begin - base), 0, end - begin);
    });
  } else {
    const double mu = config_.momentum;
    float *u = u_.data();
    forTrainableElements(slots_, stateBegin_, stateEnd_, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const double g = scale * static_cast<double>(grads[i - base]);
        const double wi = w[i];
        const double ui = mu * static_cast<double>(u[i - base]) + g + wd * wi;
        u[i - base] = static_cast<float>(ui);
        w[i] = static_cast<float>(wi - lr * ui);
      }
    });
  }
  if (hasEma())
    updateEma(params, info.step);
  step_ = info.step;
  return info;
}

} // namespace stringrt
