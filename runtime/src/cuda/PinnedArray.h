// Page-locked host memory for asynchronous copies back from the device
// (private to runtime/src/cuda): the device executor's losses and logits,
// the step control block's ring (DeviceStepControl.h).
#pragma once

#include "DriverApi.h"

#include <algorithm>
#include <cstddef>

namespace stringrt::cuda {

template <typename T> class PinnedArray {
public:
  explicit PinnedArray(size_t count) : count_(count) {
    void *p = nullptr;
    driver::check(driver::require().memHostAlloc(&p, std::max<size_t>(count, 1) * sizeof(T), 0),
                  "allocating page-locked host memory", "cuMemHostAlloc");
    data_ = static_cast<T *>(p);
  }
  ~PinnedArray() {
    if (const driver::Api *api = driver::api())
      api->memFreeHost(data_);
  }
  PinnedArray(const PinnedArray &) = delete;
  PinnedArray &operator=(const PinnedArray &) = delete;
  T *data() { return data_; }
  size_t size() const { return count_; }

private:
  T *data_ = nullptr;
  size_t count_;
};

} // namespace stringrt::cuda
