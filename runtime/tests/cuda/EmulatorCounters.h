// The host CUDA emulator's call counts (tests/cuda/emulate, its
// stringrt_emulator_counters export): for tests of what the runtime asks of
// the device, and of what only the emulator can survive (a faulting kernel
// poisons a real GPU's context for the rest of the process).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <dlfcn.h>
#include <optional>

namespace stringrt::test {

// The address of `symbol` in the driver the runtime opened
// (STRINGRT_CUDA_DRIVER) when that driver is the emulator (it exports
// stringrt_emulator_counters); nullptr on a real driver or without one.
inline void *emulatorSymbol(const char *symbol) {
  const char *driver = std::getenv("STRINGRT_CUDA_DRIVER");
  if (!driver)
    return nullptr;
  void *library = dlopen(driver, RTLD_NOW | RTLD_NOLOAD);
  if (!library)
    return nullptr;
  void *address = dlsym(library, "stringrt_emulator_counters") ? dlsym(library, symbol) : nullptr;
  dlclose(library); // NOLOAD: the runtime's handle keeps it loaded
  return address;
}

// Kernel launches outside capture, graph launches and host waits so far,
// when the driver is the emulator; empty on a real driver.
inline std::optional<std::array<uint64_t, 3>> emulatorCounters() {
  auto counters =
      reinterpret_cast<void (*)(uint64_t *)>(emulatorSymbol("stringrt_emulator_counters"));
  if (!counters)
    return std::nullopt;
  std::array<uint64_t, 3> out{};
  counters(out.data());
  return out;
}

// The device bytes in use (cuMemGetInfo's total - free) when the driver is
// the emulator, which counts each allocation's bytes; empty on a real
// driver (other processes' memory).
inline std::optional<size_t> emulatorBytesInUse() {
  auto info = reinterpret_cast<int (*)(size_t *, size_t *)>(emulatorSymbol("cuMemGetInfo_v2"));
  size_t free = 0, total = 0;
  if (!info || info(&free, &total) != 0)
    return std::nullopt;
  return total - free;
}

} // namespace stringrt::test
