// stringrun train's progress lines (TrainProgress.h).

#include "TrainProgress.h"

#include <fmt/format.h>

#include <cstdio>
#include <utility>

#include <unistd.h>

namespace stringrun {

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8)
    return "?";
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600)
    return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string evalLine(const stringrt::EvalResult &e, const std::string &unit) {
  std::string line = fmt::format("loss {:.6f}", e.loss);
  if (e.accuracy)
    line += fmt::format(", accuracy {:.2f}%", 100.0 * *e.accuracy);
  if (e.perplexity)
    line += fmt::format(", perplexity {:.4f}", *e.perplexity);
  line += fmt::format(" ({} {}, {:.1f} s)", e.examples,
                      unit == "tokens" ? "windows" : unit, e.seconds);
  return line;
}

Printer::Printer(std::string model)
    : model_(std::move(model)), tty_(isatty(STDOUT_FILENO) != 0) {}

void Printer::onStart(const stringrt::TrainPlan &p) {
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

void Printer::onStep(const stringrt::TrainPlan &p, const stringrt::StepReport &r) {
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

void Printer::onEpochEnd(const stringrt::TrainPlan &p, const stringrt::EpochReport &r) {
  line(fmt::format("epoch {}/{} {}: mean loss {:.6f} ({})", r.epoch + 1, p.epochs,
                   r.complete ? "done" : "stopped", r.meanLoss, epochTimes(p, r)));
}

std::string Printer::epochTimes(const stringrt::TrainPlan &p, const stringrt::EpochReport &r) {
  std::string text = fmt::format("{:.1f} s, {:.1f} s of it assembling batches", r.seconds,
                                 r.batchSeconds);
  if (p.device.empty())
    return text;
  text += fmt::format(", {:.1f} s waiting for the device", r.waitSeconds);
  if (r.seconds >= 1 && r.waitSeconds < 0.05 * r.seconds)
    text += "; the host sets the pace, not the device";
  return text;
}

void Printer::onEval(const stringrt::TrainPlan &p, int64_t step,
                     const stringrt::EvalResult &e) {
  line(fmt::format("eval {}after step {}: {}", e.ema ? "of the EMA weights " : "", step,
                   evalLine(e, p.unit)));
}

void Printer::onCheckpoint(const stringrt::TrainPlan &, const std::string &path,
                           int64_t step) {
  line(fmt::format("checkpoint {} (step {})", path, step));
}

void Printer::finish() {
  if (pending_) {
    std::fputs("\n", stdout);
    std::fflush(stdout);
    pending_ = false;
  }
}

void Printer::line(const std::string &text) {
  finish();
  std::fputs((text + "\n").c_str(), stdout);
  std::fflush(stdout);
}

} // namespace stringrun
