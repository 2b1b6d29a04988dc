// The device executor's step control block (private to runtime/src/cuda;
// the layout is stringrt/cuda/StepControl.h): the block in device memory,
// and a ring of page-locked copies through which the host reads what each
// queued step did, one event per copy, without stopping the stream.
//
// Each queued step ends with enqueueReadback(): the block is copied (after
// the step's optimizer, in stream order) into the next ring slot and an
// event recorded. collect() waits for the oldest such event only, so the
// host may queue step n + 1 before it reads step n.
#pragma once

#include "DriverApi.h"
#include "PinnedArray.h"

#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/cuda/StepControl.h"

#include <array>
#include <memory>
#include <string>

namespace stringrt::cuda {

class StepControl {
public:
  StepControl(std::shared_ptr<Device> device, const ManifestOptimizer &config);
  ~StepControl();
  StepControl(const StepControl &) = delete;
  StepControl &operator=(const StepControl &) = delete;

  // The block's device address (the kernels' `control` argument).
  uint64_t address() const;
  // Sets the counter and the run's length (>= 1, else Error) and clears the
  // halt. Synchronous: the caller makes sure no queued work reads the block.
  void reset(int64_t stepsTaken, int64_t totalSteps);
  int64_t totalSteps() const { return totalSteps_; }
  // The device's step counter (synchronous: the caller waited for the
  // stream).
  int64_t downloadStepsTaken() const;

  // Throws when kStepsInFlight copies are queued and not collected.
  void requireRoom() const;
  // Queues on `stream` the copy of the block into the next ring slot
  // (requireRoom first).
  void enqueueReadback(CUstream stream);
  size_t pending() const { return pending_; }
  // Forgets the queued copies (after the stream was waited for).
  void discardPending() { pending_ = 0; }
  // Waits for the oldest queued copy; what its step did. Throws when none is
  // pending; errors of the step's work name `step`.
  StepOutcome collect(const std::string &step);
  // Whether the oldest queued copy has arrived (without waiting; throws
  // when none is pending, or for an error of the step's work).
  bool oldestArrived(const std::string &step) const;

private:
  std::shared_ptr<Device> device_;
  ManifestOptimizer config_;
  std::unique_ptr<Arena> block_;
  PinnedArray<StepControlBlock> ring_{kStepsInFlight};
  std::array<CUevent, kStepsInFlight> copied_{};
  size_t queued_ = 0; // copies queued so far (the slot is queued_ % kStepsInFlight)
  size_t pending_ = 0;
  int64_t totalSteps_ = 0;
};

} // namespace stringrt::cuda
