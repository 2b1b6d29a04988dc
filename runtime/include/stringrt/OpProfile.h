// Where a program's time goes, op kind by op kind (`stringrun bench
// --profile`). Model::setProfile points the executors at one; every op a
// program runs then adds its wall time to its kind ("pe.attention",
// "pe.linear_grad_weight", ...), and a kind that ran on compiled kernels is
// counted under "KIND [compiled]", so the table also tells which kernel set
// served it. Timing an op costs two clock reads; without a profile the
// executors read no clock.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace stringrt {

struct OpTime {
  int64_t calls = 0;
  double seconds = 0.0;
};

class OpProfile {
public:
  void add(const std::string &kind, double seconds);
  // A copy of the totals, by kind.
  std::map<std::string, OpTime> totals() const;
  // The kinds, the largest total time first.
  std::vector<std::pair<std::string, OpTime>> sorted() const;
  double totalSeconds() const;
  void clear();

private:
  mutable std::mutex mutex_;
  std::map<std::string, OpTime> byKind_;
};

} // namespace stringrt
