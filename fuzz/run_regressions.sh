#!/usr/bin/env bash
# run_regressions.sh FUZZER PATH...: runs FUZZER once on every file given and
# every file under the directories given (crash reproducers, seeds) and fails if any input crashes, leaks, hits
# undefined behaviour or takes longer than 60 s. With no files it passes: a
# fuzzer given no inputs would start fuzzing instead.
set -euo pipefail
fuzzer=$1
shift
inputs=()
for path in "$@"; do
  if [ -d "$path" ]; then
    while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find "$path" -type f ! -name '.*' -print0 | sort -z)
  elif [ -f "$path" ]; then
    inputs+=("$path")
  fi
done
if [ ${#inputs[@]} -eq 0 ]; then
  echo "no inputs under $*"
  exit 0
fi
echo "running $(basename "$fuzzer") on ${#inputs[@]} inputs"
exec "$fuzzer" -timeout=60 -rss_limit_mb=4096 "${inputs[@]}"
