#!/bin/sh
# Runs a GoogleTest binary and fails when any test was skipped: under the
# emulator every GPU test must run (a skip would hide a missing device,
# package or host kernel build). usage: run_no_skips.sh BINARY [ARGS...]
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=$?
# The binary's status (the pipeline's is tee's).
if grep -q '^\[  FAILED  \]' "$log"; then
  exit 1
fi
if ! grep -q '^\[  PASSED  \]' "$log"; then
  echo "run_no_skips.sh: $1 did not finish (status $status)" >&2
  exit 1
fi
if grep -q '^\[  SKIPPED \]' "$log"; then
  echo "run_no_skips.sh: tests were skipped under the emulator (listed above)" >&2
  exit 1
fi
exit 0
