// What a batch size needs in memory, checked before anything is allocated
// (Trainer.h): an impossible --batch is an error that says so, not a
// std::bad_alloc halfway through a step.
#include "stringrt/Trainer.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <unistd.h>

namespace stringrt {

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

int64_t saturatingAdd(int64_t a, int64_t b) { return a > kUnbounded - b ? kUnbounded : a + b; }

int64_t saturatingMul(int64_t a, int64_t b) {
  return b != 0 && a > kUnbounded / b ? kUnbounded : a * b;
}

// "93.2 GB", "512.0 MB".
std::string bytesText(int64_t bytes) {
  if (bytes == kUnbounded)
    return "more than 9 EB";
  const char *units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000.0 && unit < 6) {
    value /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

} // namespace

int64_t availableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kilobytes = 0;
    if (fields >> key >> kilobytes && key == "MemAvailable:" && kilobytes >= 0)
      return saturatingMul(kilobytes, 1024);
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    return saturatingMul(pages, pageSize);
  return -1;
}

int64_t BatchMemory::total() const {
  return saturatingAdd(saturatingAdd(gradients, forward), saturatingAdd(batch, grads));
}

BatchMemory batchMemory(const Model &model, int64_t batch, bool training, int64_t evalRuns) {
  BatchMemory m;
  if (training) {
    m.gradients = model.programBytes("gradients", batch);
    // The flat gradient buffer and the program's copies of its outputs.
    m.grads = saturatingMul(model.parameterCount(), 2 * int64_t(sizeof(float)));
  }
  if (evalRuns > 0)
    m.forward = saturatingMul(model.programBytes("forward", batch), evalRuns);
  for (const ManifestInput &in : model.manifest().inputs) {
    int64_t bytes = 4; // f32 and i32
    for (int64_t d : in.shape)
      bytes = saturatingMul(bytes, d == kBatchDim ? batch : d);
    m.batch = saturatingAdd(m.batch, bytes);
  }
  return m;
}

void checkBatchMemory(const Model &model, int64_t batch, bool training, int64_t evalRuns,
                      const std::string &what, int64_t availableBytes) {
  if (availableBytes < 0)
    return;
  const BatchMemory need = batchMemory(model, batch, training, evalRuns);
  if (need.total() <= availableBytes)
    return;
  // Needs are affine in the batch: the largest batch that fits.
  const int64_t one = batchMemory(model, 1, training, evalRuns).total();
  const int64_t perExample = batchMemory(model, 2, training, evalRuns).total() - one;
  std::string fits = "none fits";
  if (one <= availableBytes && perExample > 0)
    fits = fmt::format("at most about {} fits", 1 + (availableBytes - one) / perExample);
  std::string parts;
  auto part = [&](int64_t bytes, const char *name) {
    if (bytes > 0)
      parts += (parts.empty() ? "" : ", ") + bytesText(bytes) + " " + name;
  };
  part(need.gradients, "for the gradients program's intermediate values");
  part(need.forward, "for the forward program's");
  part(need.batch, "for the batch");
  part(need.grads, "for the gradients");
  throw Error(fmt::format("{} at batch {} needs about {} of memory ({}); this machine has {} "
                          "available: use a smaller --batch ({})",
                          what, batch, bytesText(need.total()), parts,
                          bytesText(availableBytes), fits));
}

} // namespace stringrt
