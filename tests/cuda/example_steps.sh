#!/bin/sh
# Compiles every example for CUDA and checks, without a GPU, that each
# package has steps for every op of @forward and @gradients and that every
# launch binds at batch 1, 3 and 128 with its GEMMs and constant arrays
# inside their buffers (stringrt_cuda_tests'
# CompiledSteps.EveryExamplePackageIsCoveredAndBinds, docs/cuda.md).
#
#   example_steps.sh STRINGC STRINGRT_CUDA_TESTS SOURCE_ROOT OUT_DIR
#
# Exit 0 when all pass, 1 on a failure, 77 (CTest's skip code) when there is
# no ptxas or libdevice to compile with.
set -u
stringc=$1 tests=$2 root=$3 out=$4
cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
[ -x "$cuda/bin/ptxas" ] || command -v ptxas >/dev/null || { echo "SKIP: no ptxas (CUDA_HOME=$cuda)"; exit 77; }
[ -f "$cuda/nvvm/libdevice/libdevice.10.bc" ] || { echo "SKIP: no libdevice under $cuda"; exit 77; }
rm -rf "$out" && mkdir -p "$out" || exit 1
count=0
for model in "$root"/examples/*.pe; do
  count=$((count + 1))
  name=$(basename "$model" .pe)
  "$stringc" "$model" --target=cuda -o "$out/$name.pkg" || { echo "FAIL: $name: stringc --target=cuda failed"; exit 1; }
done
log="$out/gtest.log"
STRINGRT_CUDA_EXAMPLE_PACKAGES="$out" STRINGRT_CUDA_EXAMPLE_COUNT="$count" "$tests" \
  --gtest_filter=CompiledSteps.EveryExamplePackageIsCoveredAndBinds >"$log" 2>&1
status=$?
cat "$log"
# A skipped test is not a pass.
grep -q "\[  PASSED  \] 1 test" "$log" && ! grep -q "SKIPPED" "$log" || status=1
exit $status
