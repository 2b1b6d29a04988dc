/* A hand-written kernel library in the ABI of stringc's generated CPU
 * kernels (docs/codegen.md, "The ABI"), for the runtime's tests of "cpu"
 * packages without the compiler (PackageKernelsTest.cpp): relu and a
 * multiplication by a [4] vector over rows of 4 floats. Built three ways
 * (runtime/tests/CMakeLists.txt): as is; with STRINGRT_TEST_EXTRA_EXPORT,
 * which exports a kernel no manifest names; and with
 * STRINGRT_TEST_ABSOLUTE_RELU, whose relu is an absolute symbol (an
 * address outside the library) instead of code. The symbols carry the
 * digest of their ops' buffer sizes, as stringc's do
 * ("stringc_k<N>_<digest>_<kind>", stringrt::kernelSizeDigest;
 * PackageKernelsTest checks the two digests). */
#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

/* Loading the library runs this: the tests see whether the runtime loaded
 * it (the fast and reference kernels must not). */
__attribute__((constructor)) static void markLoaded(void) {
  setenv("STRINGRT_TEST_KERNELS_LOADED", "1", 1);
}

static void reluRows(void *const *buffers, int64_t begin, int64_t end) {
  const float *x = (const float *)buffers[0];
  float *y = (float *)buffers[1];
  for (int64_t i = begin * 4; i < end * 4; ++i)
    y[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
}

#ifdef STRINGRT_TEST_ABSOLUTE_RELU
__asm__(".globl stringc_k0_a9eda7630a59fb15_relu\n"
#if defined(__aarch64__)
        ".type stringc_k0_a9eda7630a59fb15_relu, %function\n"
#else
        ".type stringc_k0_a9eda7630a59fb15_relu, @function\n"
#endif
        ".set stringc_k0_a9eda7630a59fb15_relu, 0x10\n");
#else
/* x [B, 4] -> y [B, 4]; rows [begin, end). */
EXPORT void stringc_k0_a9eda7630a59fb15_relu(void *const *buffers, int64_t batch,
                                             int64_t begin, int64_t end) {
  (void)batch;
  reluRows(buffers, begin, end);
}
#endif

/* x [B, 4] * g [4] -> y [B, 4]; rows [begin, end). */
EXPORT void stringc_k1_1bd2da8c19f92d81_mul(void *const *buffers, int64_t batch,
                                            int64_t begin, int64_t end) {
  (void)batch;
  const float *x = (const float *)buffers[0], *g = (const float *)buffers[1];
  float *y = (float *)buffers[2];
  for (int64_t r = begin; r < end; ++r)
    for (int64_t j = 0; j < 4; ++j)
      y[r * 4 + j] = x[r * 4 + j] * g[j];
}

#ifdef STRINGRT_TEST_EXTRA_EXPORT
EXPORT void stringc_k2_a9eda7630a59fb15_relu(void *const *buffers, int64_t batch,
                                             int64_t begin, int64_t end) {
  (void)batch;
  reluRows(buffers, begin, end);
}
#endif
