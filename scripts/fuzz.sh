#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]: builds the libFuzzer
# targets (fuzz/, clang 19, ASan + UBSan) into build/fuzz, runs every
# committed crash reproducer (fuzz/regressions/<target>), then fuzzes each
# target for SECONDS_PER_TARGET (default 60). Targets: frontend package
# checkpoint idx text arrays (default: all). docs/fuzzing.md has the details.
#
# Corpora grow in fuzz/corpus/<target> (git-ignored) and are reused by later
# runs; new crashes are written to fuzz/regressions/<target>/ and make the
# script exit 1. FUZZ_JOBS=N runs N targets at a time (default 1; each
# fuzzer uses one core). Logs: build/fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(frontend package checkpoint idx text arrays)
seconds=${1:-60}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...] (targets: ${all_targets[*]})" >&2
  exit 2
fi
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  if [[ " ${all_targets[*]} " != *" $t "* ]]; then
    echo "fuzz.sh: unknown target '$t' (targets: ${all_targets[*]})" >&2
    exit 2
  fi
done
jobs=${FUZZ_JOBS:-1}

bash scripts/setup.sh
cmake -S fuzz -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
cmake --build build/fuzz --target "${targets[@]/#/fuzz_}"

# Seeds beyond the committed ones: every .pe file of the tree and, when a
# build of the whole project is there, packages and checkpoints made by it.
python3 fuzz/make_seeds.py fuzz/corpus/generated-seeds

mkdir -p build/fuzz/logs
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/regressions/$t"
  fuzz/run_regressions.sh "build/fuzz/bin/fuzz_$t" "fuzz/regressions/$t" "fuzz/seeds/$t" \
    > "build/fuzz/logs/$t.regressions.log" 2>&1 || {
    cat "build/fuzz/logs/$t.regressions.log"
    echo "fuzz.sh: $t: a committed regression input or seed fails" >&2
    exit 1
  }
done

export UBSAN_OPTIONS=print_stacktrace=1
# Reproducers newer than this are this run's.
touch build/fuzz/logs/.started
run_target() {
  local t=$1
  local extra=()
  if [ -f "fuzz/dicts/$t.dict" ]; then extra+=("-dict=fuzz/dicts/$t.dict"); fi
  # The corpus grows in the first folder; the seed folders that exist follow
  # (the frontend has no committed seeds: its are the tree's .pe files).
  local corpora=("fuzz/corpus/$t")
  for d in "fuzz/seeds/$t" "fuzz/corpus/generated-seeds/$t"; do
    if [ -d "$d" ]; then corpora+=("$d"); fi
  done
  "build/fuzz/bin/fuzz_$t" "${corpora[@]}" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="fuzz/regressions/$t/" "${extra[@]}" \
    > "build/fuzz/logs/$t.log" 2>&1
}

declare -A status
running=()
for t in "${targets[@]}"; do
  echo "fuzz.sh: fuzzing $t for ${seconds}s"
  run_target "$t" &
  running+=("$!:$t")
  while [ ${#running[@]} -ge "$jobs" ]; do
    entry=${running[0]}
    running=("${running[@]:1}")
    if wait "${entry%%:*}"; then status[${entry#*:}]=0; else status[${entry#*:}]=$?; fi
  done
done
for entry in "${running[@]}"; do
  if wait "${entry%%:*}"; then status[${entry#*:}]=0; else status[${entry#*:}]=$?; fi
done

failed=0
printf '%-11s %12s %8s %8s  %s\n' target executions seconds corpus result
for t in "${targets[@]}"; do
  log="build/fuzz/logs/$t.log"
  # libFuzzer ends with "Done 123456 runs in 60 second(s)".
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  time=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -1)
  corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
  if [ "${status[$t]}" -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit ${status[$t]}; see $log)"
    failed=1
  fi
  printf '%-11s %12s %8s %8s  %s\n' "$t" "${runs:-?}" "${time:-?}" "$corpus" "$result"
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz.sh: crash reproducers (commit them with a fix and a test):" >&2
  find fuzz/regressions -type f -newer build/fuzz/logs/.started >&2 || true
  for t in "${targets[@]}"; do
    if [ "${status[$t]}" -ne 0 ]; then tail -40 "build/fuzz/logs/$t.log" >&2; fi
  done
  exit 1
fi
