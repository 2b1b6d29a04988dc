#!/usr/bin/env bash
# scripts/sanitize.sh: builds the .pe frontend, libstringrt and their unit
# tests (frontend_tests, stringrt_tests, stringrt_kernel_tests,
# stringrt_cpu_tests) with clang 19, AddressSanitizer and
# UndefinedBehaviorSanitizer (fuzz/CMakeLists.txt, into build/fuzz; no
# recovery: the first report fails the test), and runs them with leak
# detection, together with every committed fuzz regression input
# (fuzz/regressions, fuzz/seeds). docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S fuzz -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
cmake --build build/fuzz
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir build/fuzz --output-on-failure -j"${SANITIZE_JOBS:-2}"
