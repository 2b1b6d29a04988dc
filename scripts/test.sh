#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GoogleTest + lit via CTest).
# Also builds the runtime on its own, as the GPU machine (CUDA, no MLIR) does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cmake -S runtime -B build/runtime-alone -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRINGRT_BUILD_TESTS=OFF
cmake --build build/runtime-alone
ctest --test-dir build --output-on-failure -j2
