// libdevice's functions (__nv_*), which stringc's kernels call and
// host_kernels.py leaves external, implemented with the host's libm. The
// results may differ from libdevice's in the last bits (libdevice's own
// accuracy is a few ulp): the emulator checks the kernels' logic, not these.
#include <cmath>

#define STRINGRT_EMU_EXPORT extern "C" __attribute__((visibility("default")))

// f32
STRINGRT_EMU_EXPORT float __nv_expf(float x) { return std::exp(x); }
STRINGRT_EMU_EXPORT float __nv_exp2f(float x) { return std::exp2(x); }
STRINGRT_EMU_EXPORT float __nv_expm1f(float x) { return std::expm1(x); }
STRINGRT_EMU_EXPORT float __nv_logf(float x) { return std::log(x); }
STRINGRT_EMU_EXPORT float __nv_log2f(float x) { return std::log2(x); }
STRINGRT_EMU_EXPORT float __nv_log1pf(float x) { return std::log1p(x); }
STRINGRT_EMU_EXPORT float __nv_powf(float x, float y) { return std::pow(x, y); }
STRINGRT_EMU_EXPORT float __nv_tanhf(float x) { return std::tanh(x); }
STRINGRT_EMU_EXPORT float __nv_erff(float x) { return std::erf(x); }
STRINGRT_EMU_EXPORT float __nv_sinf(float x) { return std::sin(x); }
STRINGRT_EMU_EXPORT float __nv_cosf(float x) { return std::cos(x); }
STRINGRT_EMU_EXPORT float __nv_fabsf(float x) { return std::fabs(x); }
STRINGRT_EMU_EXPORT float __nv_fmaxf(float x, float y) { return std::fmax(x, y); }
STRINGRT_EMU_EXPORT float __nv_fminf(float x, float y) { return std::fmin(x, y); }
STRINGRT_EMU_EXPORT float __nv_fmaf(float x, float y, float z) { return std::fma(x, y, z); }
// sqrt.approx on hardware; the host's is correctly rounded.
STRINGRT_EMU_EXPORT float __nv_sqrtf(float x) { return std::sqrt(x); }
STRINGRT_EMU_EXPORT float __nv_fsqrt_rn(float x) { return std::sqrt(x); }
STRINGRT_EMU_EXPORT float __nv_rsqrtf(float x) { return 1.0f / std::sqrt(x); }
STRINGRT_EMU_EXPORT float __nv_fdiv_rn(float x, float y) { return x / y; }
STRINGRT_EMU_EXPORT float __nv_floorf(float x) { return std::floor(x); }
STRINGRT_EMU_EXPORT float __nv_ceilf(float x) { return std::ceil(x); }
// f64
STRINGRT_EMU_EXPORT double __nv_exp(double x) { return std::exp(x); }
STRINGRT_EMU_EXPORT double __nv_log(double x) { return std::log(x); }
STRINGRT_EMU_EXPORT double __nv_pow(double x, double y) { return std::pow(x, y); }
STRINGRT_EMU_EXPORT double __nv_sin(double x) { return std::sin(x); }
STRINGRT_EMU_EXPORT double __nv_cos(double x) { return std::cos(x); }
STRINGRT_EMU_EXPORT double __nv_tanh(double x) { return std::tanh(x); }
STRINGRT_EMU_EXPORT double __nv_erf(double x) { return std::erf(x); }
STRINGRT_EMU_EXPORT double __nv_sqrt(double x) { return std::sqrt(x); }
STRINGRT_EMU_EXPORT double __nv_dsqrt_rn(double x) { return std::sqrt(x); }
STRINGRT_EMU_EXPORT double __nv_fabs(double x) { return std::fabs(x); }
