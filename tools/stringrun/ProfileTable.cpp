// The profile table of `stringrun bench --profile` (ProfileTable.h).
#include "ProfileTable.h"

#include <cstdio>

namespace stringrun {

void printProfile(const stringrt::OpProfile &profile, int64_t steps, double seconds,
                  const char *rest) {
  if (steps <= 0)
    return;
  const double runs = static_cast<double>(steps);
  const double stepMs = 1000.0 * seconds / runs;
  std::printf("\nprofile (per step; %% of the step's %.2f ms):\n", stepMs);
  std::printf("  %-40s %8s %10s %7s\n", "op", "calls", "ms", "%");
  double opsMs = 0.0;
  for (const auto &[kind, t] : profile.sorted()) {
    const double ms = 1000.0 * t.seconds / runs;
    opsMs += ms;
    std::printf("  %-40s %8.0f %10.3f %6.1f%%\n", kind.c_str(),
                static_cast<double>(t.calls) / runs, ms, 100.0 * ms / stepMs);
  }
  std::printf("  %-40s %8s %10.3f %6.1f%%\n", rest, "", stepMs - opsMs,
              100.0 * (stepMs - opsMs) / stepMs);
}

} // namespace stringrun
