#!/usr/bin/env bash
# Installs what is missing, configures and builds stringc into ./build.
#   build.sh                 builds everything (tests, fuzz targets, examples)
#   build.sh TARGET...       builds only those targets and what they need,
#                            e.g. `build.sh stringc stringrun` (scripts/main.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
if [ $# -eq 0 ]; then
  cmake --build build
else
  cmake --build build --target "$@"
fi
