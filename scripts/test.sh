#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GoogleTest + lit via CTest).
# Also builds the runtime on its own, as the GPU machine (CUDA, no MLIR) does.
# Then the systematic defences (docs/fuzzing.md): the frontend, the runtime and
# their unit tests built with ASan + UBSan and run with the fuzz regression
# inputs, and every fuzz target for a fixed minute.
#
# Runs these as named stages and ends with each stage's wall time; when a
# stage fails, the summary says which one and the script exits with its
# status (the stages after it do not run).
set -euo pipefail
cd "$(dirname "$0")/.."

stage_names=()
stage_times=()
stage_status=()

summary() {
  echo
  echo "== scripts/test.sh: stage times =="
  local total=0 i
  for i in "${!stage_names[@]}"; do
    printf '  %-14s %6ss  %s\n' "${stage_names[$i]}" "${stage_times[$i]}" "${stage_status[$i]}"
    total=$((total + stage_times[i]))
  done
  printf '  %-14s %6ss\n' "total" "$total"
}

# stage NAME COMMAND...: runs the command, records its wall time; on failure
# prints the summary and exits with the command's status.
stage() {
  local name=$1
  shift
  echo "== scripts/test.sh: stage $name: $*"
  local start=$SECONDS rc=0
  "$@" || rc=$?
  stage_names+=("$name")
  stage_times+=($((SECONDS - start)))
  if [ "$rc" -ne 0 ]; then
    stage_status+=("FAILED (exit $rc)")
    summary
    echo "scripts/test.sh: stage '$name' failed (exit $rc)" >&2
    exit "$rc"
  fi
  stage_status+=("ok")
}

# (set -e does not act inside a command of `cmd || ...`, so chain with &&.)
runtime_alone() {
  cmake -S runtime -B build/runtime-alone -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTRINGRT_BUILD_TESTS=OFF &&
    cmake --build build/runtime-alone
}

stage build bash scripts/build.sh
stage runtime-alone runtime_alone
# Its install, consumed by examples/cpp out of the tree (docs/install.md).
stage install-consume bash tests/install/consume.sh build/runtime-alone \
  build/runtime-alone-consume "$PWD" build/bin/stringc
# The whole build as a Debian package, its contents checked (docs/install.md).
stage install-deb bash tests/install/deb.sh build build/deb
stage ctest ctest --test-dir build --output-on-failure -j2
stage sanitizers bash scripts/sanitize.sh
stage fuzzing env FUZZ_JOBS=2 bash scripts/fuzz.sh 60
summary
