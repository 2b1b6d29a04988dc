#!/usr/bin/env bash
# The main job: install what is missing, build what it uses (stringc,
# stringrun and their libraries; on a fresh build directory without the CUDA
# target, which it never uses; scripts/test.sh builds everything), compile
# the ViT-RoPE example, train it on Fashion-MNIST on the CPU (18 epochs at
# batch 128 with the example's recipe, label smoothing and horizontal flips:
# about 90% test accuracy in about 10 minutes on a 2-core machine) and draw
# its curves (build/examples/vit_rope.png).
#
#   bash scripts/main.sh [EPOCHS]
#
# EPOCHS (default 18) shortens the run: 3 epochs, about 87% in under 2
# minutes, for a first look.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-18}
if ! [[ "$epochs" =~ ^[1-9][0-9]{0,3}$ ]]; then
  echo "usage: bash scripts/main.sh [EPOCHS]: EPOCHS a whole number from 1 to 9999, not '$epochs'" >&2
  exit 2
fi
bash scripts/build.sh --without-cuda stringc stringrun
mkdir -p build/examples
build/bin/stringc examples/vit_rope.pe --target=cpu -o build/examples/vit_rope.pkg
build/bin/stringrun train build/examples/vit_rope.pkg --epochs "$epochs" --batch 128 \
  --log build/examples/vit_rope.csv --checkpoint build/examples/vit_rope.ckpt
# Debian's python3, where python3-matplotlib (scripts/setup.sh) is installed.
/usr/bin/python3 scripts/plot_curves.py build/examples/vit_rope.csv -o build/examples/vit_rope.png
echo "curves: build/examples/vit_rope.png"
