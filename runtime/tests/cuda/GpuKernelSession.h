// What every test that launches the generated kernels starts from: the
// package of tests/cuda/kernels.pe (STRINGRT_CUDA_TEST_PACKAGE, compiled with
// --gpu-all-kernels), a device, the package's kernels loaded on it, and an
// arena. open() says why the tests must skip (no package, no device).
#pragma once

#include "stringrt/Package.h"
#include "stringrt/cuda/CudaBackend.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace stringrt::cuda {

// The package's path, or "" with `why` set when there is none to test.
inline std::string kernelPackagePath(std::string *why = nullptr) {
  const char *path = std::getenv("STRINGRT_CUDA_TEST_PACKAGE");
  if (!path || !*path) {
    if (why)
      *why = "STRINGRT_CUDA_TEST_PACKAGE is not set (a package of tests/cuda/kernels.pe)";
    return "";
  }
  if (!std::filesystem::exists(path)) {
    if (why)
      *why = std::string("STRINGRT_CUDA_TEST_PACKAGE=") + path +
             " does not exist (the build makes it only where ptxas and libdevice are found)";
    return "";
  }
  return path;
}

struct GpuKernelSession {
  std::unique_ptr<Package> package;
  std::shared_ptr<Device> device;
  std::unique_ptr<KernelSet> kernels;
  std::unique_ptr<Arena> arena;

  // Opens everything with an arena of `arenaBytes`; returns "" on success,
  // else the reason to skip (nothing is opened then).
  std::string open(size_t arenaBytes) {
    std::string why;
    const std::string path = kernelPackagePath(&why);
    if (path.empty())
      return why;
    why = unavailableReason();
    if (!why.empty())
      return "no CUDA device: " + why;
    package = std::make_unique<Package>(Package::load(path));
    device = Device::open();
    kernels = std::make_unique<KernelSet>(device, *package->cuda());
    arena = std::make_unique<Arena>(device, arenaBytes);
    return "";
  }
};

} // namespace stringrt::cuda
