// The device executor's batch upload (BatchStaging.h).
#include "BatchStaging.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/cuda/CudaBackend.h"

#include <fmt/format.h>

#include <cstring>

namespace stringrt::cuda {
namespace {

constexpr size_t kAlignment = 256; // each tensor's offset in a slot

size_t alignUp(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

size_t bytesOf(const HostTensor &t) { return size_t(t.numel()) * 4; }

} // namespace

BatchStaging::BatchStaging(std::shared_ptr<Device> device, CUstream compute, bool overlap)
    : device_(std::move(device)), compute_(compute), overlap_(overlap) {
  if (!overlap_)
    return;
  const driver::Api &api = driver::require();
  driver::check(api.streamCreate(&upload_, CU_STREAM_NON_BLOCKING),
                "creating the batch upload stream", "cuStreamCreate");
  for (Slot &slot : slots_) {
    driver::check(api.eventCreate(&slot.uploaded, CU_EVENT_DISABLE_TIMING),
                  "creating the batch upload events", "cuEventCreate");
    driver::check(api.eventCreate(&slot.consumed, CU_EVENT_DISABLE_TIMING),
                  "creating the batch upload events", "cuEventCreate");
  }
}

BatchStaging::~BatchStaging() {
  const driver::Api *api = driver::api();
  if (!api)
    return;
  if (upload_)
    api->streamSynchronize(upload_);
  for (Slot &slot : slots_) {
    // The compute stream may still copy out of the slot: wait for that too.
    if (slot.consumeRecorded)
      api->eventSynchronize(slot.consumed);
    if (slot.host)
      api->memFreeHost(slot.host);
    if (slot.device)
      device_->release(slot.device);
    if (slot.uploaded)
      api->eventDestroy(slot.uploaded);
    if (slot.consumed)
      api->eventDestroy(slot.consumed);
  }
  if (upload_)
    api->streamDestroy(upload_);
  if (augmentSource_) {
    api->streamSynchronize(compute_); // the last augmentation may still read it
    device_->release(augmentSource_);
  }
}

void BatchStaging::release(Slot &slot) {
  const driver::Api &api = driver::require();
  // Nothing may still read or write the buffers being freed.
  if (slot.uploadRecorded)
    driver::check(api.eventSynchronize(slot.uploaded), "growing the batch staging buffers",
                  "cuEventSynchronize");
  if (slot.consumeRecorded)
    driver::check(api.eventSynchronize(slot.consumed), "growing the batch staging buffers",
                  "cuEventSynchronize");
  if (slot.host)
    api.memFreeHost(slot.host);
  if (slot.device)
    device_->release(slot.device);
  slot.host = nullptr;
  slot.device = 0;
  slot.capacity = 0;
}

void BatchStaging::reserve(Slot &slot, size_t bytes) {
  if (bytes <= slot.capacity)
    return;
  release(slot);
  void *host = nullptr;
  driver::check(driver::require().memHostAlloc(&host, bytes, 0),
                "allocating the page-locked batch staging buffer", "cuMemHostAlloc");
  slot.host = host;
  slot.device = device_->allocate(bytes, "allocating the device batch staging buffer");
  slot.capacity = bytes;
}

void BatchStaging::stage(const std::vector<HostTensor> &given, int64_t batch,
                         const HostTensor *imageDraws) {
  if (pending_)
    throw Error("device executor: a batch is already staged and not yet used");
  if (imageDraws && given.empty())
    throw Error("device executor: image draws staged without images");
  batch_ = batch;
  drawsStaged_ = imageDraws != nullptr;
  std::vector<HostTensor> tensors = given;
  if (imageDraws)
    tensors.push_back(*imageDraws);
  if (!overlap_) {
    copies_.clear();
    for (const HostTensor &t : tensors) {
      const char *data = static_cast<const char *>(t.data);
      copies_.emplace_back(data, data + bytesOf(t));
    }
    pending_ = true;
    return;
  }
  const driver::Api &api = driver::require();
  Slot &slot = slots_[size_t(staged_ % 2)];
  size_t total = 0;
  slot.offsets.clear();
  slot.sizes.clear();
  for (const HostTensor &t : tensors) {
    slot.offsets.push_back(total);
    slot.sizes.push_back(bytesOf(t));
    total += alignUp(bytesOf(t));
  }
  reserve(slot, std::max<size_t>(total, kAlignment));
  // The slot's previous upload (two batches ago) has read the host buffer.
  if (slot.uploadRecorded)
    driver::check(api.eventSynchronize(slot.uploaded), "staging a batch", "cuEventSynchronize");
  // On the CPU pool: a batch of large images is hundreds of megabytes.
  for (size_t i = 0; i < tensors.size(); ++i)
    if (slot.sizes[i])
      cpu::parallelCopy(static_cast<char *>(slot.host) + slot.offsets[i], tensors[i].data,
                        slot.sizes[i]);
  // ... and the compute stream has copied its device buffer out.
  if (slot.consumeRecorded)
    driver::check(api.streamWaitEvent(upload_, slot.consumed, 0), "staging a batch",
                  "cuStreamWaitEvent");
  if (total)
    driver::check(api.memcpyHtoDAsync(CUdeviceptr(slot.device), slot.host, total, upload_),
                  "uploading a batch", "cuMemcpyHtoDAsync");
  driver::check(api.eventRecord(slot.uploaded, upload_), "uploading a batch", "cuEventRecord");
  slot.uploadRecorded = true;
  ++staged_;
  pending_ = true;
}

/// Not overlapped: uploads the images and their draws into augmentSource_
/// on the compute stream, then augments them into `destination`.
void BatchStaging::augmentUploaded(const std::vector<char> &images,
                                   const std::vector<char> &draws, uint64_t destination,
                                   const Augmenter &augment) {
  const driver::Api &api = driver::require();
  const size_t drawsAt = alignUp(images.size());
  const size_t bytes = drawsAt + draws.size();
  if (bytes > augmentSourceBytes_) {
    if (augmentSource_) {
      // The compute stream may still read the smaller buffer.
      driver::check(api.streamSynchronize(compute_), "growing the augmentation buffer",
                    "cuStreamSynchronize");
      device_->release(augmentSource_);
      augmentSource_ = 0;
      augmentSourceBytes_ = 0;
    }
    augmentSource_ = device_->allocate(bytes, "allocating the augmentation buffer");
    augmentSourceBytes_ = bytes;
  }
  driver::check(api.memcpyHtoDAsync(CUdeviceptr(augmentSource_), images.data(), images.size(),
                                    compute_),
                "uploading the batch", "cuMemcpyHtoDAsync");
  if (!draws.empty())
    driver::check(api.memcpyHtoDAsync(CUdeviceptr(augmentSource_ + drawsAt), draws.data(),
                                      draws.size(), compute_),
                  "uploading the batch's augmentation draws", "cuMemcpyHtoDAsync");
  augment(compute_, augmentSource_, augmentSource_ + drawsAt, destination);
}

void BatchStaging::consume(const std::vector<uint64_t> &destinations,
                           const std::vector<uint64_t> &bytes, const Augmenter &augment) {
  if (!pending_)
    throw Error("device executor: no batch was staged for this step");
  if (drawsStaged_ && !augment)
    throw Error("device executor: the staged batch is to be augmented, and no kernel was given");
  const driver::Api &api = driver::require();
  // The staged tensors the program reads (the draws, last, are not one).
  const size_t inputs = (overlap_ ? slots_[size_t((staged_ - 1) % 2)].sizes.size()
                                  : copies_.size()) -
                        (drawsStaged_ ? 1 : 0);
  auto augmented = [&](size_t i) { return drawsStaged_ && i == 0; };
  auto checkSize = [&](size_t i, size_t staged) {
    if (destinations.size() != bytes.size() || i >= bytes.size() ||
        (destinations[i] && bytes[i] != staged))
      throw Error(fmt::format("device executor: the staged input {} has {} bytes, the program "
                              "takes {}",
                              i, staged, i < bytes.size() ? bytes[i] : 0));
  };
  if (inputs != destinations.size())
    throw Error("device executor: the staged batch has the wrong number of inputs");
  if (!overlap_) {
    for (size_t i = 0; i < inputs; ++i) {
      checkSize(i, copies_[i].size());
      if (!destinations[i] || copies_[i].empty())
        continue;
      if (augmented(i)) {
        augmentUploaded(copies_[i], copies_.back(), destinations[i], augment);
        continue;
      }
      driver::check(api.memcpyHtoDAsync(CUdeviceptr(destinations[i]), copies_[i].data(),
                                        copies_[i].size(), compute_),
                    "uploading the batch", "cuMemcpyHtoDAsync");
    }
    pending_ = false;
    return;
  }
  Slot &slot = slots_[size_t((staged_ - 1) % 2)];
  driver::check(api.streamWaitEvent(compute_, slot.uploaded, 0), "using the staged batch",
                "cuStreamWaitEvent");
  for (size_t i = 0; i < inputs; ++i) {
    checkSize(i, slot.sizes[i]);
    if (!destinations[i] || !slot.sizes[i])
      continue;
    if (augmented(i))
      augment(compute_, slot.device + slot.offsets[i], slot.device + slot.offsets.back(),
              destinations[i]);
    else
      driver::check(api.memcpyDtoDAsync(CUdeviceptr(destinations[i]),
                                        CUdeviceptr(slot.device + slot.offsets[i]),
                                        slot.sizes[i], compute_),
                    "copying the staged batch into the inputs", "cuMemcpyDtoDAsync");
  }
  driver::check(api.eventRecord(slot.consumed, compute_), "using the staged batch",
                "cuEventRecord");
  slot.consumeRecorded = true;
  pending_ = false;
}

} // namespace stringrt::cuda
