// Counter-based parameter initialisers and `load` (docs/package.md).
#include "execution/Initializers.h"

#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"
#include "stringrt/reference/Tensor.h"

#include <cmath>
#include <cstring>

namespace stringrt::detail {

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t runInitSeed(uint64_t seed, uint64_t initSeed) {
  return initSeed == 0 ? seed : splitmix64(seed ^ splitmix64(initSeed));
}

double unitUniform(uint64_t seed, uint64_t e) {
  uint64_t bits = splitmix64(seed ^ splitmix64(e)) >> 11; // top 53 bits
  return static_cast<double>(bits) * 0x1.0p-53;
}

void fillUniform(float *out, int64_t count, double low, double high, uint64_t seed) {
  for (int64_t e = 0; e < count; ++e)
    out[e] = static_cast<float>(low + (high - low) * unitUniform(seed, static_cast<uint64_t>(e)));
}

void fillNormal(float *out, int64_t count, double mean, double std, uint64_t seed) {
  const double twoPi = 6.283185307179586476925286766559;
  for (int64_t e = 0; e < count; ++e) {
    uint64_t k = 2 * static_cast<uint64_t>(e);
    double u1 = unitUniform(seed, k);
    double u2 = unitUniform(seed, k + 1);
    if (u1 == 0.0)
      u1 = 0x1.0p-53;
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(twoPi * u2);
    out[e] = static_cast<float>(mean + std * z);
  }
}

void loadParameter(float *out, const std::vector<int64_t> &shape, const std::string &file,
                   const std::string &tensor, const std::string &param) {
  SafetensorsFile st = SafetensorsFile::open(file);
  const TensorInfo *info = st.find(tensor);
  if (!info)
    throw Error(file, "no tensor '" + tensor + "' (to initialise parameter '" + param + "')");
  if (info->dtype != DType::F32)
    throw Error(file, "tensor '" + tensor + "' is " + dtypeName(info->dtype) +
                          ", parameter '" + param + "' needs F32");
  if (info->shape != shape)
    throw Error(file, "tensor '" + tensor + "' has shape " + ref::shapeToString(info->shape) +
                          ", parameter '" + param + "' has shape " + ref::shapeToString(shape));
  std::vector<float> values = st.readF32(tensor);
  if (!values.empty())
    std::memcpy(out, values.data(), values.size() * sizeof(float));
}

} // namespace stringrt::detail
