// How stringrun train reports a run: the progress of its steps, the epochs,
// evaluations and checkpoints (TrainCommand.cpp), and the line an evaluation
// prints (EvalCommand.cpp too).
#pragma once

#include "stringrt/Trainer.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>

#include <unistd.h>

namespace stringrun {

// A duration as m:ss or h:mm:ss ("?" when unknown).
std::string duration(double seconds);

// "loss 0.123456, accuracy 97.00% (10000 images, 1.2 s)".
std::string evalLine(const stringrt::EvalResult &e, const std::string &unit);

// Prints the progress of a training run: on a terminal, one progress line
// rewritten in place; otherwise a plain line per step.
class Printer : public stringrt::TrainObserver {
public:
  explicit Printer(std::string model)
      : model_(std::move(model)), tty_(isatty(STDOUT_FILENO) != 0) {}

  void onStart(const stringrt::TrainPlan &p) override {
    std::string resume =
        p.startStep > 0 ? fmt::format(", resuming at step {}", p.startStep)
                        : std::string();
    if (!p.device.empty())
      resume += ", on " + p.device;
    if (p.augment.enabled())
      resume += ", augment " + stringrt::describeAugmentPolicy(p.augment) +
                (p.augmentOnBackend ? " (on the device)" : "");
    line(fmt::format("training '{}': {} train / {} test examples, batch {}, {} "
                     "steps per epoch, {} steps ({} epoch{}), seed {}{}",
                     model_, p.trainExamples, p.testExamples, p.batch,
                     p.stepsPerEpoch, p.totalSteps, p.epochs,
                     p.epochs == 1 ? "" : "s", p.seed, resume));
  }

  void onStep(const stringrt::TrainPlan &p,
              const stringrt::StepReport &r) override {
    std::string text = fmt::format(
        "epoch {}/{} step {}/{} loss {:.6f} lr {:.3e} {:.1f} {}/s eta {}",
        r.epoch + 1, p.epochs, r.step, p.totalSteps, r.loss, r.lr,
        r.unitsPerSecond, p.unit, duration(r.etaSeconds));
    if (tty_) {
      std::fputs(("\r\033[K" + text).c_str(), stdout);
      std::fflush(stdout);
      pending_ = true;
    } else {
      line(text);
    }
  }

  void onEpochEnd(const stringrt::TrainPlan &p,
                  const stringrt::EpochReport &r) override {
    line(fmt::format("epoch {}/{} {}: mean loss {:.6f} ({})", r.epoch + 1, p.epochs,
                     r.complete ? "done" : "stopped", r.meanLoss, epochTimes(p, r)));
  }

  // "37.2 s, 0.4 s of it assembling batches"; on a device also the time
  // spent waiting for it, and a word when it hardly waited (the host, not
  // the device, sets the pace).
  static std::string epochTimes(const stringrt::TrainPlan &p, const stringrt::EpochReport &r) {
    std::string text = fmt::format("{:.1f} s, {:.1f} s of it assembling batches", r.seconds,
                                   r.batchSeconds);
    if (p.device.empty())
      return text;
    text += fmt::format(", {:.1f} s waiting for the device", r.waitSeconds);
    if (r.seconds >= 1 && r.waitSeconds < 0.05 * r.seconds)
      text += "; the host sets the pace, not the device";
    return text;
  }

  void onEval(const stringrt::TrainPlan &p, int64_t step,
              const stringrt::EvalResult &e) override {
    line(fmt::format("eval {}after step {}: {}", e.ema ? "of the EMA weights " : "", step,
                     evalLine(e, p.unit)));
  }

  void onCheckpoint(const stringrt::TrainPlan &, const std::string &path,
                    int64_t step) override {
    line(fmt::format("checkpoint {} (step {})", path, step));
  }

  // Ends an in-place progress line (before an error message, say).
  void finish() {
    if (pending_) {
      std::fputs("\n", stdout);
      std::fflush(stdout);
      pending_ = false;
    }
  }

private:
  void line(const std::string &text) {
    finish();
    std::fputs((text + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

  std::string model_;
  bool tty_;
  bool pending_ = false;
};

} // namespace stringrun
