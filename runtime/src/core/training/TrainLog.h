// The CSV log of a training run (Trainer.h, stringrun --log). Private to the
// runtime.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace stringrt::detail {

// The log's first line.
constexpr const char *kTrainLogHeader =
    "kind,step,epoch,loss,lr,grad_norm,accuracy,perplexity,units_per_s";

class TrainLog {
public:
  // Opens the log at `path` ("": no log). A fresh run (no `resumeStep`)
  // starts it anew. A resumed run appends to it, after dropping the rows of
  // the steps beyond its checkpoint's (`resumeStep`): a run killed after
  // its last checkpoint logged them, and the resumed run takes those steps
  // again. The kept rows go to a new file renamed over the log (atomic: a
  // crash leaves the old log or the new one). A file that is not a
  // training log (another first line, a row without a step) is refused, not
  // rewritten. Throws Error(path, ...).
  TrainLog(const std::string &path, std::optional<int64_t> resumeStep);

  // Appends a row and flushes it.
  void line(const std::string &text);

private:
  std::string path_;
  std::ofstream out_;
};

} // namespace stringrt::detail
