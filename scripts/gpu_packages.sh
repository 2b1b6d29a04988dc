#!/bin/sh
# Prepares, on the machine with MLIR, what scripts/gpu_verify.sh needs on a
# GPU machine (docs/cuda.md): under gpu/ (git-ignored),
#   kernels.pkg            tests/cuda/kernels.pe with every kernel, the
#                          tensor-core (bf16) ones included (the kernel tests)
#   examples/NAME.pkg      every example compiled with --target=cuda
#   examples-bf16/NAME.pkg vit_rope, vit_cayley, vit_s_rope and gpt_rope_causal
#                          with --gpu-precision=bf16 (tensor-core attention, bf16 GEMMs)
#   reports/MODEL-BATCH-PRECISION.txt
#                          the launch report (stringc --launch-report) of the
#                          benchmarked steps: the prediction gpu_train_step.py
#                          prints beside the measured step
#   fashion-mnist/         a copy of the dataset when it is installed here
#                          (the GPU machine may have no network)
#
#   bash scripts/gpu_packages.sh [STRINGC] [ARCH]   (defaults: build/bin/stringc, sm_90)
#
# An example whose kernels cannot be generated is reported and skipped.
set -eu
cd "$(dirname "$0")/.."
stringc=${1:-build/bin/stringc}
arch=${2:-sm_90}
mkdir -p gpu/examples gpu/examples-bf16 gpu/reports
variants=$(grep -v '^#' tests/cuda/kernels.variants | sed '/^ *$/d; s/^/--gpu-kernel=/')
# shellcheck disable=SC2086 # one option a line of kernels.variants
"$stringc" tests/cuda/kernels.pe --target=cuda --gpu-all-kernels --gpu-precision=bf16 \
  $variants --gpu-arch="$arch" -o gpu/kernels.pkg
echo "gpu/kernels.pkg"
for model in examples/*.pe; do
  name=$(basename "$model" .pe)
  if "$stringc" "$model" --target=cuda --gpu-arch="$arch" -o "gpu/examples/$name.pkg"; then
    echo "gpu/examples/$name.pkg"
  else
    echo "gpu_packages: $name: stringc --target=cuda failed (skipped)" >&2
  fi
done
for name in vit_rope vit_cayley vit_s_rope gpt_rope_causal; do
  if "$stringc" "examples/$name.pe" --target=cuda --gpu-precision=bf16 --gpu-arch="$arch" \
       -o "gpu/examples-bf16/$name.pkg"; then
    echo "gpu/examples-bf16/$name.pkg"
  else
    echo "gpu_packages: $name: stringc --target=cuda --gpu-precision=bf16 failed (skipped)" >&2
  fi
done
for precision in fp32 bf16; do
  for step in vit_rope:128 vit_rope:256 vit_rope:1024 vit_cayley:128 vit_cayley:256 \
              vit_cayley:1024 vit_s_rope:128 vit_s_rope:256; do
    name=${step%:*} batch=${step#*:}
    "$stringc" "examples/$name.pe" --target=cuda --gpu-precision="$precision" --launch-report \
      --batch="$batch" -o "gpu/reports/$name-$batch-$precision.txt"
  done
done
echo "gpu/reports"
# Variants of vit_rope for the device trainer's tests, as
# tests/cuda/CMakeLists.txt writes them: gpu/NAME.pkg from the example with
# the line FROM replaced by TO (skipped when the example no longer has FROM).
vit_variant() {
  local name=$1 from=$2 to=$3
  if grep -qF "$from" examples/vit_rope.pe; then
    python3 -c 'import sys; t = open(sys.argv[1]).read(); open(sys.argv[2], "w").write(t.replace(sys.argv[3], sys.argv[4]))' \
      examples/vit_rope.pe "gpu/$name.pe" "$from" "$to"
    "$stringc" "gpu/$name.pe" --target=cuda --gpu-arch="$arch" -o "gpu/$name.pkg" &&
      echo "gpu/$name.pkg"
  else
    echo "gpu_packages: examples/vit_rope.pe no longer says '$from': no gpu/$name.pkg" >&2
  fi
}
adamw="optimizer adamw(lr = 3e-3, weight_decay = 0.05, clip = 1.0)"
vit_variant vit_rope_sgd "$adamw" \
  "optimizer sgd(lr = 0.05, momentum = 0.9, weight_decay = 0.01, clip = 1.0)"
vit_variant vit_rope_ema "$adamw" \
  "optimizer adamw(lr = 3e-3, weight_decay = 0.05, clip = 1.0, ema = 0.9)"
vit_variant vit_rope_dropout "return x + linear(gelu(linear(h, w1, b1)), w2, b2)" \
  "return x + drop_path(linear(dropout(gelu(linear(h, w1, b1)), p = 0.3), w2, b2), p = 0.25)"
data=/usr/share/datasets/fashion-mnist
if [ -d "$data" ] && [ ! -d gpu/fashion-mnist ]; then
  cp -r "$data" gpu/fashion-mnist
  echo "gpu/fashion-mnist"
fi
