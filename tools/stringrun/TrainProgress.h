// How stringrun train reports a run: the progress of its steps, the epochs,
// evaluations and checkpoints (TrainCommand.cpp), and the line an evaluation
// prints (EvalCommand.cpp too).
#pragma once

#include "stringrt/Trainer.h"

#include <cstdint>
#include <string>

namespace stringrun {

// A duration as m:ss or h:mm:ss ("?" when unknown).
std::string duration(double seconds);

// "loss 0.123456, accuracy 97.00% (10000 images, 1.2 s)".
std::string evalLine(const stringrt::EvalResult &e, const std::string &unit);

// Prints the progress of a training run: on a terminal, one progress line
// rewritten in place; otherwise a plain line per step.
class Printer : public stringrt::TrainObserver {
public:
  explicit Printer(std::string model);

  void onStart(const stringrt::TrainPlan &p) override;
  void onStep(const stringrt::TrainPlan &p, const stringrt::StepReport &r) override;
  void onEpochEnd(const stringrt::TrainPlan &p, const stringrt::EpochReport &r) override;
  void onEval(const stringrt::TrainPlan &p, int64_t step,
              const stringrt::EvalResult &e) override;
  void onCheckpoint(const stringrt::TrainPlan &, const std::string &path,
                    int64_t step) override;

  // "37.2 s, 0.4 s of it assembling batches"; on a device also the time
  // spent waiting for it, and a word when it hardly waited (the host, not
  // the device, sets the pace).
  static std::string epochTimes(const stringrt::TrainPlan &p, const stringrt::EpochReport &r);

  // Ends an in-place progress line (before an error message, say).
  void finish();

private:
  void line(const std::string &text);

  std::string model_;
  bool tty_;
  bool pending_ = false;
};

} // namespace stringrun
