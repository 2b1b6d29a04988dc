// stringrun train's progress lines (TrainProgress.h).

#include "TrainProgress.h"

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

} // namespace stringrun
