// The table `stringrun bench --profile` prints: op kinds by total time, per
// step and as a share of the step, and what the kinds do not cover.
#pragma once

#include "stringrt/OpProfile.h"

#include <cstdint>

namespace stringrun {

// `rest` names the part of the step outside the profiled kinds (the CPU's
// optimizer and batches; the GPU's host work and gaps between launches).
void printProfile(const stringrt::OpProfile &profile, int64_t steps, double seconds,
                  const char *rest);

} // namespace stringrun
