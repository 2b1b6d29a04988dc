#!/usr/bin/env bash
# Installs what is missing, configures and builds stringc into ./build.
#   build.sh                 builds everything (tests, fuzz targets, examples,
#                            the CUDA target)
#   build.sh TARGET...       builds only those targets and what they need,
#                            e.g. `build.sh stringc stringrun`
#   build.sh --without-cuda TARGET...
#                            the same, and a build directory not configured
#                            yet is configured without the CUDA target and
#                            backend (-DSTRINGC_WITH_CUDA=OFF; scripts/main.sh:
#                            they are about a third of its build); one already
#                            configured keeps its setting
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=()
if [ "${1:-}" = "--without-cuda" ]; then
  shift
  if [ $# -eq 0 ]; then
    echo "usage: bash scripts/build.sh --without-cuda TARGET..." >&2
    exit 2
  fi
  [ -f build/CMakeCache.txt ] || cuda=(-DSTRINGC_WITH_CUDA=OFF)
elif [ $# -eq 0 ]; then
  cuda=(-DSTRINGC_WITH_CUDA=ON)
fi
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}"
if [ $# -eq 0 ]; then
  cmake --build build
else
  cmake --build build --target "$@"
fi
