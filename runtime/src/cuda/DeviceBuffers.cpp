// The device executor's buffers (DeviceModelImpl.h): the parameters' device
// layout, each program's buffers at a batch size, staging a batch, copies,
// synchronisation and the profile's spans.
#include "DeviceModelImpl.h"

#include <algorithm>
#include <cstring>

namespace stringrt::cuda {

DeviceModel::Impl::~Impl() {
  if (const driver::Api *api = driver::api())
    for (CUevent event : allEvents)
      api->eventDestroy(event);
  control.reset();
  staging.reset();
  evalStaging.reset();
  accumulated.clear();
  buffers.clear();
  if (const driver::Api *api = driver::api()) {
    for (CUevent event : {forkEvent, joinEvent})
      if (event)
        api->eventDestroy(event);
    if (commStream)
      api->streamDestroy(commStream);
  }
  if (stream)
    if (const driver::Api *api = driver::api())
      api->streamDestroy(stream);
}

/// Adds the queued spans' times to the profile (waits for the stream).
void DeviceModel::Impl::collectProfile() {
  if (!options.profile || spans.empty())
    return;
  sync("profiling the step");
  for (const TimedSpan &span : spans) {
    if (!span.start) { // untimed(): a call of no time of its own
      options.profile->add(span.kind, 0.0);
      continue;
    }
    float ms = 0;
    driver::check(driver::require().eventElapsedTime(&ms, span.start, span.end),
                  "profiling the step", "cuEventElapsedTime");
    options.profile->add(span.kind, double(ms) / 1000.0);
    freeEvents.push_back(span.start);
    freeEvents.push_back(span.end);
  }
  spans.clear();
}

/// A host flat vector (packed, hostTotal floats) in the device layout.
std::vector<float> DeviceModel::Impl::toDeviceLayout(const float *packed) const {
  std::vector<float> padded(size_t(total), 0.0f);
  size_t at = 0;
  for (const OptimizerSlot &s : slots) {
    std::copy(packed + at, packed + at + s.size, padded.begin() + long(s.offset));
    at += s.size;
  }
  return padded;
}

/// The device layout's values back into a packed host vector.
void DeviceModel::Impl::toHostLayout(const std::vector<float> &padded, float *packed) const {
  size_t at = 0;
  for (const OptimizerSlot &s : slots) {
    std::copy(padded.begin() + long(s.offset), padded.begin() + long(s.offset + s.size),
              packed + at);
    at += s.size;
  }
}

void DeviceModel::Impl::uploadFlat(Arena &arena, const float *packed, const char *what) {
  std::vector<float> padded = toDeviceLayout(packed);
  arena.upload(0, padded.data(), padded.size() * 4, what);
}

void DeviceModel::Impl::downloadFlat(const Arena &arena, float *packed, const char *what) {
  std::vector<float> padded(static_cast<size_t>(total));
  arena.download(0, padded.data(), padded.size() * 4, what);
  toHostLayout(padded, packed);
}

/// The batch size of `inputs` (checked against the manifest's inputs).
int64_t DeviceModel::Impl::batchOf(const std::map<std::string, HostTensor> &inputs) const {
  std::optional<int64_t> batch;
  for (const ManifestInput &in : manifest.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      throw Error(fmt::format("device executor: missing input '{}'", in.name));
    const HostTensor &t = it->second;
    if (t.dtype != in.dtype || t.shape.size() != in.shape.size())
      throw Error(fmt::format("device executor: input '{}' has the wrong type or rank", in.name));
    for (size_t d = 0; d < in.shape.size(); ++d) {
      if (in.shape[d] >= 0) {
        if (t.shape[d] != in.shape[d])
          throw Error(fmt::format("device executor: input '{}' dimension {} is {}, not {}", in.name,
                                  d, t.shape[d], in.shape[d]));
      } else if (!batch) {
        batch = t.shape[d];
      } else if (*batch != t.shape[d]) {
        throw Error("device executor: the inputs disagree on the batch size");
      }
    }
  }
  if (inputs.size() != manifest.inputs.size())
    throw Error("device executor: inputs that the manifest does not name");
  if (batch && *batch < 1)
    throw Error("device executor: the batch size must be at least 1");
  return batch.value_or(1);
}

BatchBuffers &DeviceModel::Impl::buffersFor(const std::string &name, int64_t batch) {
  auto key = std::make_pair(name, batch);
  auto it = buffers.find(key);
  if (it != buffers.end())
    return it->second;
  BatchBuffers b;
  const Program &p = program(name);
  b.placement = placeValues(manifest, p, name, batch, section.stepsOf(name));
  uint64_t scratchBytes = 0;
  if (const CudaProgramSteps *steps = section.stepsOf(name))
    for (const CudaOpSteps &op : steps->ops)
      scratchBytes = std::max(scratchBytes, scratchLayout(op, batch).bytes);
  b.arena = newArena(b.placement.arenaBytes);
  b.extra = newArena(b.placement.extraBytes);
  b.scratch = newArena(scratchBytes);
  placeGroupPointers(name, b, batch);
  return buffers.emplace(key, std::move(b)).first->second;
}

uint64_t DeviceModel::Impl::address(const BatchBuffers &b, ValueId v) const {
  const ValuePlace &place = b.placement.values[v];
  if (place.bytes == 0)
    return 0;
  switch (place.region) {
  case Region::Params:
    if (shardMasters) { // the packed f32 copy (ZeRO-1 with sharded masters)
      auto at = f32ParamAt.find(place.offset);
      if (at == f32ParamAt.end())
        throw Error(fmt::format("device executor: an f32 parameter value at float {} is not "
                                "one the sharded master weights keep whole",
                                place.offset / 4));
      return params->at(at->second, place.bytes);
    }
    return params->at(place.offset, place.bytes);
  case Region::ParamsBf16:
    return paramsBf16->at(place.offset, place.bytes);
  case Region::Arena:
    return b.arena->at(place.offset, place.bytes);
  case Region::Extra:
    return b.extra->at(place.offset, place.bytes);
  case Region::None:
    break;
  }
  return 0;
}

/// Stages `inputs` (checked against the manifest) for the next step (on
/// `into`, default `staging`).
void DeviceModel::Impl::stage(const std::map<std::string, HostTensor> &inputs, BatchStaging *into,
                              const HostTensor *imageDraws) {
  int64_t batch = batchOf(inputs);
  std::vector<HostTensor> ordered;
  for (const ManifestInput &in : manifest.inputs)
    ordered.push_back(inputs.at(in.name));
  (into ? into : staging.get())->stage(ordered, batch, imageDraws);
}

bool DeviceModel::Impl::canAugmentImages() const {
  using K = CudaParamKind;
  const K P = K::Ptr, I = K::I64;
  const CudaKernel *kernel = section.find(kAugmentImagesKernel);
  if (!kernel || kernel->params != std::vector<K>{P, P, P, I, I, I, I} || manifest.inputs.empty())
    return false;
  const ManifestInput &images = manifest.inputs.front();
  return images.dtype == DType::F32 && images.shape.size() == 4 && images.shape[0] < 0 &&
         images.shape[1] > 0 && images.shape[2] > 0 && images.shape[3] > 0;
}

BatchStaging::Augmenter DeviceModel::Impl::imageAugmenter(int64_t batch) {
  if (!canAugmentImages())
    return {};
  const std::vector<int64_t> &shape = manifest.inputs.front().shape;
  const int64_t C = shape[1], H = shape[2], W = shape[3];
  return [this, batch, C, H, W](CUstream on, uint64_t images, uint64_t draws,
                                uint64_t destination) {
    kernels->launch(kAugmentImagesKernel,
                    {KernelArg::pointer(destination), KernelArg::pointer(images),
                     KernelArg::pointer(draws), KernelArg::integer(batch * C * H * W),
                     KernelArg::integer(C), KernelArg::integer(H), KernelArg::integer(W)},
                    "augmenting the batch's images", nullptr, on);
    checkLaunch("augmenting the batch's images (kernel pe_augment_images)");
  };
}

/// The staged batch's size (throws when none is staged).
int64_t DeviceModel::Impl::stagedBatch(const BatchStaging *from) const {
  const BatchStaging &s = from ? *from : *staging;
  if (!s.pending())
    throw Error("device executor: no batch was staged for this step");
  return s.batch();
}

/// Queues the copy of the staged batch into program `name`'s inputs.
void DeviceModel::Impl::consumeStaged(const BatchBuffers &b, const std::string &name,
                                      BatchStaging *from) {
  const Program &p = program(name);
  std::vector<uint64_t> destinations, bytes;
  for (size_t i = 0; i < manifest.inputs.size(); ++i) {
    destinations.push_back(address(b, p.inputs[i]));
    bytes.push_back(b.placement.values[p.inputs[i]].bytes);
  }
  BatchStaging &source = from ? *from : *staging;
  source.consume(destinations, bytes, imageAugmenter(source.batch()));
}

void DeviceModel::Impl::copyOnDevice(uint64_t to, uint64_t from, uint64_t bytes,
                                     const std::string &what) {
  driver::check(
      driver::require().memcpyDtoDAsync(CUdeviceptr(to), CUdeviceptr(from), bytes, stream), what,
      "cuMemcpyDtoDAsync");
}

void DeviceModel::Impl::zeroOnDevice(uint64_t at, uint64_t floats, const std::string &what) {
  driver::check(driver::require().memsetD32Async(CUdeviceptr(at), 0, floats, stream), what,
                "cuMemsetD32Async");
}

void DeviceModel::Impl::copyBack(float *host, uint64_t device, size_t bytes, const char *what) {
  driver::check(driver::require().memcpyDtoHAsync(host, CUdeviceptr(device), bytes, stream), what,
                "cuMemcpyDtoHAsync");
}

void DeviceModel::Impl::sync(const std::string &what) {
  driver::check(driver::require().streamSynchronize(stream), what, "cuStreamSynchronize");
}

/// DeviceOptions::syncEachLaunch: waits for the launch just queued, so
/// that its failure names it.
void DeviceModel::Impl::checkLaunch(const std::string &launch) {
  if (options.syncEachLaunch)
    sync(launch);
}

} // namespace stringrt::cuda
