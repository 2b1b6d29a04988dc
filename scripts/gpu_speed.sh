#!/bin/bash
# ONE short device call that shows where a GPU training step's time goes
# (docs/cuda.md, "Verifying on a GPU"): sized for a 15-minute device budget,
# where scripts/gpu_verify.sh's full run does not fit.
#
#   1. builds the runtime and runs every CUDA test and every example's
#      CPU-vs-GPU gradients (scripts/gpu_verify.sh with SKIP_TRAIN=1 SKIP_BENCH=1);
#   2. stringrun bench --device cuda (CUDA graphs on): images/s of vit_rope and
#      at batch 128, 256, 1024, vit_cayley at 128, 1024 (fp32) and vit_s_rope
#      at 256 (fp32 and bf16) by default (BENCH_SET);
#      then the host's batch work on all its cores (tests/bench/host_batch.py);
#   3. stringrun bench --profile (GPU time by op kind) beside the launch
#      report's prediction for vit_rope 1024 and vit_s_rope 256 bf16;
#   4. ncu per-kernel GPU time of one step (when ncu can read the counters),
#      and with NCU_DETAIL its detailed sections for single kernels;
#      BF16_ERROR=1: PyTorch's bf16 autocast error (bf16_gradient_error.py);
#   5. with PEERS=1, tests/bench/gpu_train_step.py against PyTorch eager and
#      torch.compile(mode="reduce-overhead") on PEER_SETS.
#
# Packages and reports come from scripts/gpu_packages.sh (carry gpu/). Every
# step has a time limit (STEP_LIMIT seconds, default 120) so that the call
# ends inside its budget; logs go to $OUT (tarred as logs.tgz at the end).
#
# Records: every step time of 2. and every ncu table of 4. is also written as
# a measurement record (tests/perf/records/README.md) to
# $OUT/records/DATE-CARD.json, the raw ncu logs beside it under ncu/; copy
# $OUT/records/ into tests/perf/records/ and commit them (COMMIT names the
# packages' commit when the copy here has no .git).
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-speed-logs}
mkdir -p "$out/logs"
logs=$out/logs
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
limit=${STEP_LIMIT:-120}
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }
data=gpu/fashion-mnist
build=build-gpu-runtime
stringrun=$build/stringrun/stringrun
# Measurement records (tests/perf/perf_records.py): the card, the day, the commit.
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case $card in *H200*) card_short=H200 ;; *H100*) card_short=H100 ;; *) card_short= ;; esac
day=$(date -u +%F)
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
records=$out/records/$day-$(echo "$card_short" | tr 'A-Z' 'a-z').json
record() {  # add-step|add-kernels MODEL BATCH PRECISION COMMAND [more options]
  [ -n "$card_short" ] || return 0
  what=$1 model=$2 batch=$3 precision=$4 command=$5; shift 5
  python3 tests/perf/perf_records.py "$what" "$records" --card "$card_short" --card-detail "$card" \
    --date "$day" --commit "$commit" --model "$model" --batch "$batch" --precision "$precision" \
    --command "$command" --source "scripts/gpu_speed.sh (\$OUT/summary.txt of that call)" "$@" \
    >> "$logs/records.log" 2>&1 || note "record $what $model $batch $precision: failed (records.log)"
}
# The package of example $1 in precision $2 (fp32 or bf16).
packageOf() { if [ "$2" = bf16 ]; then echo "gpu/examples-bf16/$1.pkg"; else echo "gpu/examples/$1.pkg"; fi; }

# 1. Build, CUDA tests, gradients.
OUT=$logs/verify SKIP_TRAIN=1 SKIP_BENCH=1 SKIP_TESTS=${SKIP_TESTS:-0} \
  timeout 300 bash scripts/gpu_verify.sh gpu/kernels.pkg "$build" > "$logs/verify.log" 2>&1
note "verify: exit $? ($(elapsed))"
grep -E 'PASSED|FAILED|SKIPPED|gradients|exit' "$logs/verify/summary.txt" 2>/dev/null | tee -a "$summary"
# What failed, in the summary itself (the logs may not come back).
grep -h -E 'MISMATCH|^FAIL|^\[  FAILED' "$logs"/verify/*.log 2>/dev/null | head -40 | tee -a "$summary"
[ -x "$stringrun" ] || { note "no stringrun: build failed"; tail -30 "$logs/verify.log"; exit 1; }

# 2. images/s with CUDA graphs.
bench() {  # model precision batch [extra options]
  name=$1 precision=$2 batch=$3; shift 3
  pkg=$(packageOf "$name" "$precision")
  line=$(timeout "$limit" "$stringrun" bench "$pkg" --device cuda --batch "$batch" --steps "${STEPS:-30}" \
           --data "$data" "$@" 2>&1 | grep -E 'images/s|error' | tail -1)
  report=gpu/reports/$name-$batch-$precision.txt  # scripts/gpu_packages.sh's (an H100's)
  predicted=$([ -f "$report" ] && sed -n 's/^step: .* predicted \([0-9.]*\) us.*/\1/p' "$report")
  note "bench $(basename "$(dirname "$pkg")")/$(basename "$pkg" .pkg) batch $batch $*: $line${predicted:+ (launch report: $predicted us a step on an H100)}"
  ips=$(echo "$line" | sed -n 's/.* \([0-9.][0-9.]*\) images\/s.*/\1/p')
  [ -n "$ips" ] && [ $# -eq 0 ] && record add-step "$name" "$batch" "$precision" \
    "stringrun bench $pkg --device cuda --batch $batch --steps ${STEPS:-30} (CUDA graphs on)" \
    --images-per-second "$ips"
}
for step in ${BENCH_SET:-vit_rope:128 vit_rope:256 vit_rope:1024 vit_cayley:128 vit_cayley:1024 vit_s_rope:256}; do
  name=${step%:*} batch=${step#*:}
  bench "$name" fp32 "$batch"
  case $name in vit_rope|vit_s_rope) bench "$name" bf16 "$batch" ;; esac
done
note "bench done ($(elapsed))"

# 2b. The host's batch work on this machine's cores (what a GPU step may wait
# for: tests/bench/host_batch.py), beside PyTorch's gather.
if [ -x "$build/tests/stringrt_host_batch_bench" ]; then
  timeout "$limit" python3 tests/bench/host_batch.py \
    --bench "$build/tests/stringrt_host_batch_bench" --threads "$(nproc)" > "$logs/host-batch.log" 2>&1
  note "host batch work, exit $?:"; tee -a "$summary" < "$logs/host-batch.log"
fi

# 3. GPU time by op kind beside the prediction.
for step in ${PROFILE_SET:-vit_rope:1024:fp32 vit_s_rope:256:bf16}; do
  name=${step%%:*} rest=${step#*:} batch=${rest%%:*} precision=${rest#*:}
  pkg=$(packageOf "$name" "$precision")
  log=$logs/profile-$name-$batch-$precision.log
  timeout "$limit" "$stringrun" bench "$pkg" --device cuda --batch "$batch" --steps 10 --profile \
    --data "$data" > "$log" 2>&1
  note "measured ($name, batch $batch, $precision), exit $?:"; tee -a "$summary" < "$log"
  report=gpu/reports/$name-$batch-$precision.txt
  [ -f "$report" ] && { note "predicted:"; sed -n '/^by op kind/,$p' "$report" | tee -a "$summary"; }
done
note "profiles done ($(elapsed))"

# 4. Per-kernel GPU time (two steps: the warm-up and the timed one).
if command -v ncu > /dev/null 2>&1; then
  # vit_generators: its step measured 30x the launch report's prediction
  # (H200, 2026-11-27), the largest gap of any example, not yet profiled.
  for step in ${NCU_SET:-vit_rope:1024:fp32 vit_s_rope:256:bf16 vit_generators:128:fp32}; do
    name=${step%%:*} rest=${step#*:} batch=${rest%%:*} precision=${rest#*:}
    pkg=$(packageOf "$name" "$precision")
    log=$logs/ncu-$name-$batch-$precision.txt
    timeout "$limit" ncu --print-summary per-kernel --metrics gpu__time_duration.sum \
      "$stringrun" bench "$pkg" --device cuda --batch "$batch" --steps 1 --no-graphs --data "$data" > "$log" 2>&1
    status=$?
    note "ncu $name $batch $precision: exit $status ($(elapsed))"
    python3 scripts/ncu_table.py "$log" 2>&1 | head -25 | tee -a "$summary"
    [ "$status" = 0 ] && record add-kernels "$name" "$batch" "$precision" \
      "ncu --print-summary per-kernel --metrics gpu__time_duration.sum stringrun bench $pkg --device cuda --batch $batch --steps 1 --no-graphs" \
      --ncu "$log" --steps 2
  done
fi

# 4b. Nsight Compute's detailed sections for single kernels:
# NCU_DETAIL="KERNEL_REGEX:PACKAGE:BATCH ...".
for item in ${NCU_DETAIL:-}; do
  regex=${item%%:*} rest=${item#*:} pkg=${rest%%:*} batch=${rest#*:}
  log=$logs/ncu-detail-$(echo "$regex" | tr -c 'A-Za-z0-9_\n' '_').txt
  timeout "$limit" ncu --set detailed -k "regex:$regex" --launch-count 1 \
    "$stringrun" bench "$pkg" --device cuda --batch "$batch" --steps 1 --no-graphs --data "$data" > "$log" 2>&1
  note "ncu detail $regex ($pkg, batch $batch): exit $? ($(elapsed))"
  grep -E 'Duration|Throughput|Achieved Occupancy|Registers Per|Shared Memory Configuration Size|Block Limit|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A' "$log" | head -24 | tee -a "$summary"
done

# 4c. PyTorch's own bf16 autocast error against f32 (the yardstick of
# stringrun's bf16 gradient tolerance), when asked for.
if [ "${BF16_ERROR:-0}" = 1 ]; then
  timeout "$limit" python3 tests/bench/bf16_gradient_error.py --model vit_s_rope --batch 16 --seeds 2 \
    > "$logs/bf16-error.log" 2>&1
  note "bf16 autocast error: exit $?"; tail -3 "$logs/bf16-error.log" | tee -a "$summary"
fi

# 5. The peer, when asked for.
if [ "${PEERS:-0}" = 1 ]; then
  for set in ${PEER_SETS:-fp32:vit_rope:128,1024 bf16:vit_s_rope:256}; do
    precision=${set%%:*} rest=${set#*:} models=${rest%%:*} batches=${rest#*:}
    packages=gpu/examples; [ "$precision" = bf16 ] && packages=gpu/examples-bf16
    PYTHONUNBUFFERED=1 timeout "${PEER_LIMIT:-240}" python3 tests/bench/gpu_train_step.py --packages "$packages" \
      --bin "$(dirname "$stringrun")" --precision "$precision" --models "$models" --batches "$batches" \
      --modes "${PEER_MODES:-reduce-overhead}" --steps 30 --reports gpu/reports --data "$data" \
      > "$logs/peer-$precision-$models.log" 2>&1
    note "peer $precision $models $batches: exit $? ($(elapsed))"; tee -a "$summary" < "$logs/peer-$precision-$models.log"
  done
fi
[ -f "$records" ] && { note "records: $records"; python3 tests/perf/perf_records.py check "$out/records" | tee -a "$summary"; }
note "gpu_speed: done in $(elapsed)"
find "$logs" -name '*.safetensors' -delete
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
