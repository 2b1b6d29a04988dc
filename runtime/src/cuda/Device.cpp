// Device (primary context, memory) and Arena (CudaBackend.h).
#include "DriverApi.h"

#include "stringrt/Error.h"
#include "stringrt/cuda/CudaBackend.h"

#include <fmt/format.h>

namespace stringrt::cuda {

std::string unavailableReason() {
  std::string why;
  const driver::Api *api = driver::api(&why);
  if (!api)
    return why;
  int count = 0;
  CUresult result = api->deviceGetCount(&count);
  if (result != CUDA_SUCCESS)
    return "cuDeviceGetCount failed: " + driver::describe(result);
  if (count == 0)
    return "the CUDA driver reports no device";
  return "";
}

std::shared_ptr<Device> Device::open(int ordinal) {
  const driver::Api &api = driver::require();
  const std::string step = fmt::format("opening CUDA device {}", ordinal);
  int count = 0;
  driver::check(api.deviceGetCount(&count), step, "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    throw Error(fmt::format("{}: there are {} CUDA devices", step, count));
  std::shared_ptr<Device> device(new Device());
  device->ordinal_ = ordinal;
  CUdevice handle = 0;
  driver::check(api.deviceGet(&handle, ordinal), step, "cuDeviceGet");
  device->device_ = handle;
  char name[256] = {};
  driver::check(api.deviceGetName(name, sizeof name - 1, handle), step, "cuDeviceGetName");
  device->name_ = name;
  int major = 0, minor = 0;
  driver::check(api.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
                step, "cuDeviceGetAttribute");
  driver::check(api.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle),
                step, "cuDeviceGetAttribute");
  device->capability_ = major * 10 + minor;
  CUcontext context = nullptr;
  driver::check(api.primaryCtxRetain(&context, handle), step, "cuDevicePrimaryCtxRetain");
  device->context_ = context;
  driver::check(api.ctxSetCurrent(context), step, "cuCtxSetCurrent");
  return device;
}

Device::~Device() {
  if (context_)
    driver::require().primaryCtxRelease(CUdevice(device_));
}

std::string Device::arch() const { return fmt::format("sm_{}", capability_); }

int64_t Device::sharedMemoryPerBlockOptin() const {
  int bytes = 0;
  driver::check(driver::require().deviceGetAttribute(
                    &bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                    CUdevice(device_)),
                fmt::format("reading CUDA device {}'s shared memory limit", ordinal_),
                "cuDeviceGetAttribute");
  return bytes;
}

namespace {
std::pair<size_t, size_t> memoryInfo() {
  size_t free = 0, total = 0;
  driver::check(driver::require().memGetInfo(&free, &total), "querying device memory",
                "cuMemGetInfo");
  return {free, total};
}
} // namespace

size_t Device::freeBytes() const { return memoryInfo().first; }
size_t Device::totalBytes() const { return memoryInfo().second; }

void Device::synchronize(const std::string &step) const {
  driver::check(driver::require().ctxSynchronize(), step, "cuCtxSynchronize");
}

uint64_t Device::allocate(size_t bytes, const std::string &step) {
  const driver::Api &api = driver::require();
  CUdeviceptr pointer = 0;
  CUresult result = api.memAlloc(&pointer, bytes == 0 ? 1 : bytes);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    auto [free, total] = memoryInfo();
    throw Error(fmt::format("out of device memory in {}: asked for {} bytes, {} bytes free of {} "
                            "on {} (device {})",
                            step, bytes, free, total, name_, ordinal_));
  }
  driver::check(result, step, fmt::format("cuMemAlloc({} bytes)", bytes));
  return pointer;
}

void Device::release(uint64_t pointer) {
  if (pointer)
    driver::require().memFree(CUdeviceptr(pointer));
}

void Device::upload(uint64_t dst, const void *src, size_t bytes, const std::string &step) {
  driver::check(driver::require().memcpyHtoD(CUdeviceptr(dst), src, bytes), step, "cuMemcpyHtoD");
}

void Device::download(void *dst, uint64_t src, size_t bytes, const std::string &step) {
  driver::check(driver::require().memcpyDtoH(dst, CUdeviceptr(src), bytes), step, "cuMemcpyDtoH");
}

Arena::Arena(std::shared_ptr<Device> device, size_t bytes)
    : device_(std::move(device)), size_(bytes) {
  base_ = device_->allocate(bytes, "allocating the device arena");
}

Arena::~Arena() { device_->release(base_); }

uint64_t Arena::at(size_t offset, size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset)
    throw Error(fmt::format("device arena: bytes [{}, {}) lie outside the arena of {} bytes",
                            offset, offset + bytes, size_));
  return base_ + offset;
}

void Arena::upload(size_t offset, const void *src, size_t bytes, const std::string &step) {
  device_->upload(at(offset, bytes), src, bytes, step);
}

void Arena::download(size_t offset, void *dst, size_t bytes, const std::string &step) const {
  device_->download(dst, at(offset, bytes), bytes, step);
}

} // namespace stringrt::cuda
