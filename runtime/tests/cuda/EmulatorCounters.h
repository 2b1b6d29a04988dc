// The host CUDA emulator's call counts (tests/cuda/emulate, its
// stringrt_emulator_counters export): for tests of what the runtime asks of
// the device, and of what only the emulator can survive (a faulting kernel
// poisons a real GPU's context for the rest of the process).
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <dlfcn.h>
#include <optional>

namespace stringrt::test {

// Kernel launches outside capture, graph launches and host waits so far,
// when the driver the runtime opened (STRINGRT_CUDA_DRIVER) is the emulator;
// empty on a real driver.
inline std::optional<std::array<uint64_t, 3>> emulatorCounters() {
  const char *driver = std::getenv("STRINGRT_CUDA_DRIVER");
  if (!driver)
    return std::nullopt;
  void *library = dlopen(driver, RTLD_NOW | RTLD_NOLOAD);
  if (!library)
    return std::nullopt;
  auto counters =
      reinterpret_cast<void (*)(uint64_t *)>(dlsym(library, "stringrt_emulator_counters"));
  dlclose(library);
  if (!counters)
    return std::nullopt;
  std::array<uint64_t, 3> out{};
  counters(out.data());
  return out;
}

} // namespace stringrt::test
