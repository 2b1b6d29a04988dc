// The device executor's batch upload (private to runtime/src/cuda): a batch
// is staged before the step that reads it, and copied into that program's
// input slots on the compute stream when the step begins.
//
// Overlapped (the default): two slots, each a page-locked host buffer and a
// device buffer. stage() copies batch n into host slot n % 2 and queues its
// upload on a stream of its own, so it runs while step n - 1 computes;
// consume() makes the compute stream wait for that upload (an event), copies
// device slot n % 2 into the program's inputs (device to device, before the
// step's work or its CUDA graph, whose input addresses stay fixed), and
// records when that copy is done. A slot is reused two batches later, after
// its upload (the host waits before writing it) and its copy out (the upload
// stream waits) are done:
//
//   host:     stage n  | stage n+1 ...........| stage n+2 (waits: upload n done)
//   upload:   HtoD n   |  HtoD n+1 (waits: copy out of slot (n+1)%2, step n-1)
//   compute:  wait HtoD n, DtoD n, step n ...   | wait HtoD n+1, DtoD n+1, ...
//
// Not overlapped: stage() keeps a host copy and consume() uploads it on the
// compute stream straight into the inputs (one stream, no events).
//
// Augmented on the device: a batch staged with the draws of its images
// (Augment.h) carries them as one more staged tensor, and consume() writes
// the first input with a kernel (the caller's Augmenter, pe_augment_images)
// reading the staged images and draws instead of copying them.
#pragma once

#include "DriverApi.h"

#include "stringrt/HostTensor.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace stringrt::cuda {

class Device;

class BatchStaging {
public:
  BatchStaging(std::shared_ptr<Device> device, CUstream compute, bool overlap);
  ~BatchStaging();
  BatchStaging(const BatchStaging &) = delete;
  BatchStaging &operator=(const BatchStaging &) = delete;

  bool overlapped() const { return overlap_; }
  // Whether a staged batch waits for consume().
  bool pending() const { return pending_; }
  // The staged batch's size (the caller's batch dimension).
  int64_t batch() const { return batch_; }

  // Queues on `stream` the kernel that writes the augmented images at
  // `destination` from the staged images and their draws (device addresses).
  using Augmenter = std::function<void(CUstream stream, uint64_t images, uint64_t draws,
                                       uint64_t destination)>;

  // Stages `tensors` (a batch of size `batch`, in the program's input order;
  // they may be reused as soon as this returns), and `imageDraws` when
  // given: the draws of tensors[0]'s images, to be augmented by consume().
  // Throws when a batch is already pending.
  void stage(const std::vector<HostTensor> &tensors, int64_t batch,
             const HostTensor *imageDraws = nullptr);
  // Queues on the compute stream the copy of the pending batch's tensor i
  // into destinations[i] (a device address; 0 skips the tensor), each
  // `bytes[i]` long, which must equal the staged tensor's size; with draws,
  // tensor 0 through `augment` instead (required then).
  void consume(const std::vector<uint64_t> &destinations, const std::vector<uint64_t> &bytes,
               const Augmenter &augment = {});

private:
  struct Slot {
    void *host = nullptr;    // page-locked
    uint64_t device = 0;
    size_t capacity = 0;     // bytes of each
    CUevent uploaded = nullptr, consumed = nullptr;
    bool uploadRecorded = false, consumeRecorded = false;
    std::vector<size_t> offsets, sizes; // the staged tensors in the slot
  };
  void reserve(Slot &slot, size_t bytes);
  void augmentUploaded(const std::vector<char> &images, const std::vector<char> &draws,
                       uint64_t destination, const Augmenter &augment);
  void release(Slot &slot);

  std::shared_ptr<Device> device_;
  CUstream compute_ = nullptr, upload_ = nullptr;
  bool overlap_;
  std::array<Slot, 2> slots_;
  int64_t staged_ = 0; // batches staged so far (the slot is staged_ % 2)
  bool pending_ = false;
  int64_t batch_ = 0;
  bool drawsStaged_ = false; // the pending batch's last staged tensor is its image draws
  // Not overlapped: the pending batch's bytes, tensor by tensor; and a
  // device buffer the images and draws go through to be augmented.
  std::vector<std::vector<char>> copies_;
  uint64_t augmentSource_ = 0;
  size_t augmentSourceBytes_ = 0;
};

} // namespace stringrt::cuda
