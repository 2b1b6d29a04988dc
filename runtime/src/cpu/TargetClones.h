// STRINGRT_TARGET_CLONES("avx512f", "avx2", "default") before a function
// definition builds one copy of it per instruction set and picks the widest
// the running CPU has at load time (GCC / Clang function multiversioning):
// the runtime stays portable (baseline x86-64, SSE2) while its hot loops get
// AVX2 or AVX-512. Elsewhere (not x86-64 Linux with GCC / Clang) it is empty.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define STRINGRT_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define STRINGRT_TARGET_CLONES(...)
#endif
