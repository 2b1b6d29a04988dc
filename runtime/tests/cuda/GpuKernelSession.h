// What every test that launches the generated kernels starts from: the
// package of tests/cuda/kernels.pe (STRINGRT_CUDA_TEST_PACKAGE, compiled with
// --gpu-all-kernels), a device, the package's kernels loaded on it, and an
// arena. open() says why the tests must skip (no package, no device).
// Buffers go into the arena one after another (put, output, scratch) and
// are read back by device address (get).
#pragma once

#include "stringrt/Package.h"
#include "stringrt/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

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

  // `n` floats uniform in [low, high).
  std::vector<float> random(size_t n, float low = -3, float high = 3) {
    std::uniform_real_distribution<float> dist(low, high);
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  }

  // Places `values` in the arena (at least `bytes`, at least 8, 256-byte
  // aligned); returns the buffer's device address.
  template <typename T> uint64_t putBytes(const std::vector<T> &values, size_t bytes = 0) {
    bytes = std::max<size_t>({bytes, values.size() * sizeof(T), 8});
    size_t offset = next;
    next += (bytes + 255) / 256 * 256;
    if (!values.empty())
      arena->upload(offset, values.data(), values.size() * sizeof(T), "upload");
    uint64_t address = arena->at(offset, bytes);
    offsets[address] = offset;
    return address;
  }
  uint64_t put(const std::vector<float> &values) { return putBytes(values); }
  uint64_t putInts(const std::vector<int32_t> &values) { return putBytes(values); }
  uint64_t zeros(size_t n) { return put(std::vector<float>(n, 0.0f)); }
  // Filled with NaN: a kernel that leaves an element unwritten fails the comparison.
  uint64_t output(size_t n) { return put(std::vector<float>(n, NAN)); }
  uint64_t scratch(size_t bytes) { return putBytes(std::vector<float>{}, bytes); }
  // Forgets every buffer: the next one starts at the arena's start.
  void clearBuffers() {
    next = 0;
    offsets.clear();
  }

  // `n` floats of the buffer at `address`, after the device's work so far.
  std::vector<float> get(uint64_t address, size_t n) {
    device->synchronize("test");
    return arena->downloadVector<float>(offsets.at(address), n);
  }

  void launch(const char *kernel, const std::vector<KernelArg> &args) {
    kernels->launch(kernel, args, kernel);
  }
  void launchGrid(const char *kernel, const std::vector<KernelArg> &args,
                  std::array<int64_t, 3> grid) {
    kernels->launch(kernel, args, kernel, &grid);
  }

  // |got - want| <= tol * (1 + |want|) elementwise, or tol * (1 + max |want|)
  // when `scaled` (for sums that cancel).
  static void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                          double tol, const std::string &what, bool scaled = false) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double largest = 0;
    for (float w : want)
      largest = std::max(largest, std::fabs(double(w)));
    for (size_t i = 0; i < got.size(); ++i) {
      double bound = tol * (1 + (scaled ? largest : std::fabs(double(want[i]))));
      ASSERT_LE(std::fabs(double(got[i]) - want[i]), bound)
          << what << " at " << i << ": " << got[i] << " vs " << want[i];
    }
  }

  std::map<uint64_t, size_t> offsets; // device address -> arena offset
  size_t next = 0;                    // the next buffer's arena offset
  std::mt19937 rng{11};               // fixtures reseed it in SetUp where they drew other data
};

} // namespace stringrt::cuda
