#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GoogleTest + lit via CTest).
# Also builds the runtime on its own, as the GPU machine (CUDA, no MLIR) does.
# Then the systematic defences (docs/fuzzing.md): the frontend, the runtime and
# their unit tests built with ASan + UBSan and run with the fuzz regression
# inputs, and every fuzz target for a fixed minute.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cmake -S runtime -B build/runtime-alone -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRINGRT_BUILD_TESTS=OFF
cmake --build build/runtime-alone
# Its install, consumed by examples/cpp out of the tree (docs/install.md).
bash tests/install/consume.sh build/runtime-alone build/runtime-alone-consume "$PWD" build/bin/stringc
ctest --test-dir build --output-on-failure -j2
bash scripts/sanitize.sh
FUZZ_JOBS=2 bash scripts/fuzz.sh 60
