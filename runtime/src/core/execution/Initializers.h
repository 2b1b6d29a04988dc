// Parameter initialisers (docs/package.md, "Parameter initialisation"):
// counter-based random draws, so element e of a parameter depends only on its
// seed and e. Private to the runtime (Model uses them; tests call them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

// One step of Vigna's splitmix64 from state x: z = x + 0x9E3779B97F4A7C15,
// then the xor-shift-multiply finaliser of z. splitmix64(0) = 0xE220A8397B1DCDAF
// (the first output of the generator seeded with 0).
uint64_t splitmix64(uint64_t x);

// u(seed, e): the top 53 bits of splitmix64(seed ^ splitmix64(e)) scaled into [0, 1).
double unitUniform(uint64_t seed, uint64_t e);

// The seed a random initialiser draws with in a run of init seed `initSeed`
// (stringrun train --init-seed): the package's `seed` itself for 0, else
// splitmix64(seed ^ splitmix64(initSeed)), so every parameter gets a new,
// still independent stream.
uint64_t runInitSeed(uint64_t seed, uint64_t initSeed);

// out[e] = low + (high - low) * u(seed, e), computed in double, rounded once.
void fillUniform(float *out, int64_t count, double low, double high, uint64_t seed);

// out[e] = mean + std * z, z = sqrt(-2 ln u1) cos(2 pi u2) with
// u1 = u(seed, 2e), u2 = u(seed, 2e + 1) (the cosine branch of Box-Muller).
// u1 = 0 (probability 2^-53) is read as 2^-53 so that z stays finite.
void fillNormal(float *out, int64_t count, double mean, double std, uint64_t seed);

// Reads the F32 tensor `tensor` of the safetensors file `file` into out,
// which has room for the product of `shape`. Throws stringrt::Error (naming
// the file, the tensor and the parameter) when it is missing, not F32 or of
// another shape.
void loadParameter(float *out, const std::vector<int64_t> &shape, const std::string &file,
                   const std::string &tensor, const std::string &param);

} // namespace stringrt::detail
