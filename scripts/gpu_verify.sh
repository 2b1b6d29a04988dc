#!/bin/sh
# ONE command on a machine with an NVIDIA GPU and the CUDA toolkit (no MLIR
# needed) that verifies the CUDA backend (docs/cuda.md, "Verifying on a GPU"):
#
#   1. builds the runtime alone (cmake + ninja): stringrt_cuda_tests, stringrun;
#   2. runs every CUDA test (the kernels against the reference kernels,
#      GEMMs, the device executor against the CPU on vit_rope);
#   3. for every example package, one step's loss and gradients on the GPU
#      against the CPU (stringrun gradients --device cuda; packages with ops
#      that have no GPU steps are listed as not covered, not failed);
#   4. trains vit_rope_wide (its declared recipe: label smoothing, crop, flip,
#      erasing) on Fashion-MNIST on the GPU (goal: 92% test accuracy; 92.24%
#      and 92.03% in 64 epochs, 94 s each on an H200, docs/results.md);
#   5. tests/bench/gpu_attention.py: the fused attention kernel's TFLOP/s
#      against SDPA + RoPE; tests/bench/gpu_train_step.py: images/s against
#      PyTorch eager and torch.compile (default and reduce-overhead), with
#      the launch report's prediction beside them, for each precision of
#      BENCH_PRECISIONS (default "fp32 tf32 bf16"): vit_rope and vit_cayley
#      at batch 128, 256, 1024, vit_s_rope at 128 and 256; before them,
#      `stringrun bench --device cuda --profile` (GPU time by op kind) beside
#      the launch report's prediction for vit_rope (128, 1024) and vit_s_rope
#      (bf16, 128) (SKIP_BENCH=1 skips step 5).
#
# The packages come from the MLIR machine: `bash scripts/gpu_packages.sh`
# writes gpu/kernels.pkg, gpu/examples/*.pkg and gpu/fashion-mnist/.
#
#   bash scripts/gpu_verify.sh [gpu/kernels.pkg] [build dir]
#
# Environment: OUT (log directory; default gpu-verify-logs), JOBS (ninja -j),
# FASHION_MNIST (the IDX directory; default gpu/fashion-mnist, else
# /usr/share/datasets/fashion-mnist), VIT_MODEL (step 4's example; default
# vit_rope_wide), VIT_EPOCHS (default 64), VIT_BATCH (default 128), VIT_AUGMENT
# (step 4's --augment; default: the model's declared augmentation), SKIP_TESTS=1 (skip steps 2 and 3), SKIP_TRAIN=1 (skip step 4),
# SKIP_BENCH=1 (skip step 5), BENCH_PRECISIONS (step 5's precisions). Each step is meant to fit a 10-minute device call
# (never timed: VIT_EPOCHS shortens step 4): run them as separate calls where the
# device tool limits a call's time.
#
# Exit status: 0 when everything that ran passed; 1 on a failure; 3 when no
# GPU can be used here (nothing would have been verified).
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
out=${OUT:-gpu-verify-logs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
fashion=${FASHION_MNIST:-}
if [ -z "$fashion" ]; then
  for candidate in gpu/fashion-mnist /usr/share/datasets/fashion-mnist; do
    [ -d "$candidate" ] && fashion=$candidate && break
  done
fi
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt" || true
cmake -S runtime -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
ninja -C "$build" -j"$jobs" stringrt_cuda_tests stringrun stringrt_attention_bench \
  stringrt_host_batch_bench > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
stringrun=$build/stringrun/stringrun

if [ -n "$package" ]; then
  STRINGRT_CUDA_TEST_PACKAGE=$(cd "$(dirname "$package")" && pwd)/$(basename "$package")
  export STRINGRT_CUDA_TEST_PACKAGE
  note "kernel package: $STRINGRT_CUDA_TEST_PACKAGE"
else
  note "no kernel package: the GPU kernel tests will be skipped"
fi
if [ -f gpu/examples/vit_rope.pkg ]; then
  STRINGRT_CUDA_VIT_PACKAGE=$(pwd)/gpu/examples/vit_rope.pkg
  export STRINGRT_CUDA_VIT_PACKAGE
fi
if [ -f gpu/vit_rope_sgd.pkg ]; then
  STRINGRT_CUDA_VIT_SGD_PACKAGE=$(pwd)/gpu/vit_rope_sgd.pkg
  export STRINGRT_CUDA_VIT_SGD_PACKAGE
fi
if [ -f gpu/vit_rope_ema.pkg ]; then
  STRINGRT_CUDA_VIT_EMA_PACKAGE=$(pwd)/gpu/vit_rope_ema.pkg
  export STRINGRT_CUDA_VIT_EMA_PACKAGE
fi
if [ -f gpu/vit_rope_dropout.pkg ]; then
  STRINGRT_CUDA_VIT_DROPOUT_PACKAGE=$(pwd)/gpu/vit_rope_dropout.pkg
  export STRINGRT_CUDA_VIT_DROPOUT_PACKAGE
fi

status=0
# 2. Every CUDA test (SKIP_TESTS=1 skips steps 2 and 3).
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  "$build/tests/stringrt_cuda_tests" --gtest_color=no > "$out/stringrt_cuda_tests.log" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|^\[  FAILED  \]|tests ran' "$out/stringrt_cuda_tests.log" | tee -a "$summary" || true
fi
# Fail loudly when the device was not usable: a skipped run proves nothing.
if "$build/tests/stringrt_cuda_tests" --gtest_filter='CudaDevice.ArenaRoundTripAndBounds' 2>&1 | grep -q '\[  SKIPPED \]'; then
  note "gpu_verify: no usable CUDA device here; nothing was verified"
  exit 3
fi

# 3. CPU-vs-GPU gradients of every example package (and of the bf16 ones,
#    with stringrun's bf16 tolerance).
for pkg in gpu/examples/*.pkg gpu/examples-bf16/*.pkg; do
  [ -f "$pkg" ] && [ "${SKIP_TESTS:-0}" != 1 ] || continue
  name=$(basename "$pkg" .pkg)
  case $pkg in *-bf16/*) name=$name-bf16 ;; esac
  data=
  case $name in vit_*) [ -n "$fashion" ] && data="--data $fashion" ;; esac
  log=$out/gradients-$name.log
  # shellcheck disable=SC2086
  if "$stringrun" gradients "$pkg" --device cuda --batch 16 $data --out "$out/gradients-$name.safetensors" > "$log" 2>&1; then
    note "gradients $name: PASS"
  elif grep -q "have no GPU steps" "$log"; then
    note "gradients $name: not covered ($(grep -o 'have no GPU steps: .*' "$log" | cut -c1-300))"
  else
    note "gradients $name: FAIL (see $log)"
    status=1
  fi
done

# 4. vit_rope_wide (or VIT_MODEL) on Fashion-MNIST on the GPU, with the
#    model's declared augmentation (in the device's kernel, docs/data.md,
#    "Augmentation") unless VIT_AUGMENT replaces it.
vit=${VIT_MODEL:-vit_rope_wide}
if [ "${SKIP_TRAIN:-0}" != 1 ] && [ -f "gpu/examples/$vit.pkg" ]; then
  if [ -z "$fashion" ]; then
    note "train $vit: skipped (no Fashion-MNIST; set FASHION_MNIST)"
  else
    log=$out/train-$vit.log
    epochs=${VIT_EPOCHS:-64} batch=${VIT_BATCH:-128}
    augment=; [ -n "${VIT_AUGMENT:-}" ] && augment="--augment $VIT_AUGMENT"
    # shellcheck disable=SC2086
    if "$stringrun" train "gpu/examples/$vit.pkg" --device cuda --data "$fashion" --epochs "$epochs" --batch "$batch" $augment > "$log" 2>&1; then
      accuracy=$(grep -o 'accuracy [0-9.]*%' "$log" | tail -1)
      note "train $vit ($epochs epochs, batch $batch): $accuracy (goal 92%); $(grep -o 'augment .*' "$log" | head -1); $(grep 'epoch 1/' "$log" | grep done | head -1)"
    elif grep -q "have no GPU steps" "$log"; then
      note "train $vit: not covered ($(grep -o 'have no GPU steps: .*' "$log" | cut -c1-300))"
    else
      note "train $vit: FAIL (see $log)"
      status=1
    fi
  fi
fi
# 5. The training step against PyTorch eager and torch.compile (issue 5's
#    benchmark), when this machine's python3 has torch with CUDA.
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -f gpu/examples/vit_rope.pkg ] &&
   python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  log=$out/bench-attention.log
  if [ -n "$package" ] && python3 tests/bench/gpu_attention.py --kernels "$STRINGRT_CUDA_TEST_PACKAGE" --bench "$build/tests/stringrt_attention_bench" > "$log" 2>&1; then
    note "bench (attention kernel):"; tee -a "$summary" < "$log"
  else
    note "bench (attention kernel): FAIL (see $log)"
    status=1
  fi
  data=; [ -n "$fashion" ] && data="--data $fashion"
  # Measured GPU time by op kind beside the launch report's prediction (the
  # model's calibration: docs/cuda.md, "Launch report").
  for step in vit_rope:128:fp32 vit_rope:1024:fp32 vit_s_rope:128:bf16; do
    name=${step%%:*} rest=${step#*:} batch=${rest%%:*} precision=${rest#*:}
    pkg=gpu/examples/$name.pkg; [ $precision = bf16 ] && pkg=gpu/examples-bf16/$name.pkg
    log=$out/profile-$name-$batch-$precision.log
    # shellcheck disable=SC2086
    if [ -f "$pkg" ] && "$stringrun" bench "$pkg" --device cuda --batch "$batch" --steps 10 \
         --profile $data > "$log" 2>&1; then
      note "measured ($name, batch $batch, $precision):"; tee -a "$summary" < "$log"
      report=gpu/reports/$name-$batch-$precision.txt
      [ -f "$report" ] && { note "predicted:"; sed -n '/^by op kind/,$p' "$report" | tee -a "$summary"; }
    else
      note "profile ($name, batch $batch, $precision): FAIL (see $log)"
      status=1
    fi
  done
  for precision in ${BENCH_PRECISIONS:-fp32 tf32 bf16}; do
    packages=gpu/examples; [ $precision = bf16 ] && packages=gpu/examples-bf16
    for set in "vit_rope,vit_cayley 128,256,1024" "vit_s_rope 128,256"; do
      models=${set% *} batches=${set#* }
      log=$out/bench-$precision-${models%%,*}.log
      # shellcheck disable=SC2086
      if python3 tests/bench/gpu_train_step.py --packages "$packages" --bin "$(dirname "$stringrun")" \
           --precision $precision --models "$models" --batches "$batches" --reports gpu/reports $data \
           > "$log" 2>&1; then
        note "bench ($precision, $models):"; tee -a "$summary" < "$log"
      else
        note "bench ($precision, $models): FAIL (see $log)"
        status=1
      fi
    done
  done
else
  note "bench: skipped (SKIP_BENCH=1, no vit_rope package, or no torch with CUDA)"
fi
note "gpu_verify: exit $status (logs in $out)"
exit $status
