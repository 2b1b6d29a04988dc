#!/bin/sh
# Builds the runtime alone (no MLIR: cmake + ninja) on a machine with an
# NVIDIA GPU and the CUDA toolkit, and runs the CUDA backend's tests there
# (docs/cuda.md). The GPU kernels come in a package compiled elsewhere:
#
#   on the MLIR machine:  stringc tests/cuda/kernels.pe --target=cuda --gpu-all-kernels -o gpu/kernels.pkg
#   on the GPU machine:   bash scripts/gpu_verify.sh [gpu/kernels.pkg] [build dir]   (JOBS=N: ninja -jN)
#
# The package argument defaults to $STRINGRT_CUDA_TEST_PACKAGE, then to
# gpu/kernels.pkg, then to build/tests/cuda/kernels.pkg. Without any, the
# kernel tests are skipped (and reported so) but the driver, arena, OOM and
# cuBLAS tests still run. Exit status: that of the tests; 3 when no GPU can
# be used here (nothing would have been tested).
set -eu
cd "$(dirname "$0")/.."
package=${1:-${STRINGRT_CUDA_TEST_PACKAGE:-}}
if [ -z "$package" ]; then
  for candidate in gpu/kernels.pkg build/tests/cuda/kernels.pkg; do
    [ -f "$candidate" ] && package=$candidate && break
  done
fi
build=${2:-build-gpu-runtime}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv || true
cmake -S runtime -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C "$build" -j"$jobs" stringrt_cuda_tests

if [ -n "$package" ]; then
  STRINGRT_CUDA_TEST_PACKAGE=$(cd "$(dirname "$package")" && pwd)/$(basename "$package")
  export STRINGRT_CUDA_TEST_PACKAGE
  echo "kernel package: $STRINGRT_CUDA_TEST_PACKAGE"
else
  echo "no kernel package: the GPU kernel tests will be skipped"
fi
status=0
"$build/tests/stringrt_cuda_tests" --gtest_color=no || status=$?
# Fail loudly when the device was not usable: a skipped run proves nothing.
if "$build/tests/stringrt_cuda_tests" --gtest_filter='CudaDevice.ArenaRoundTripAndBounds' 2>&1 | grep -q '\[  SKIPPED \]'; then
  echo "gpu_verify: no usable CUDA device here; nothing was verified" >&2
  exit 3
fi
exit $status
