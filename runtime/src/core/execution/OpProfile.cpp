#include "stringrt/OpProfile.h"

#include <algorithm>

namespace stringrt {

void OpProfile::add(const std::string &kind, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  OpTime &t = byKind_[kind];
  ++t.calls;
  t.seconds += seconds;
}

std::map<std::string, OpTime> OpProfile::totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return byKind_;
}

std::vector<std::pair<std::string, OpTime>> OpProfile::sorted() const {
  std::map<std::string, OpTime> copy = totals();
  std::vector<std::pair<std::string, OpTime>> rows(copy.begin(), copy.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  return rows;
}

double OpProfile::totalSeconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  double total = 0.0;
  for (const auto &[kind, t] : byKind_)
    total += t.seconds;
  return total;
}

void OpProfile::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  byKind_.clear();
}

} // namespace stringrt
