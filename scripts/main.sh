#!/usr/bin/env bash
# The main job: install what is missing, build what it uses (stringc,
# stringrun and their libraries; scripts/test.sh builds everything), compile
# the ViT-RoPE example, train it on Fashion-MNIST on the CPU (3 epochs, batch
# 128: about 87% test accuracy in about 2 minutes on a 2-core machine)
# and draw its curves (build/examples/vit_rope.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh stringc stringrun
mkdir -p build/examples
build/bin/stringc examples/vit_rope.pe --target=cpu -o build/examples/vit_rope.pkg
build/bin/stringrun train build/examples/vit_rope.pkg --epochs 3 --batch 128 \
  --log build/examples/vit_rope.csv --checkpoint build/examples/vit_rope.ckpt
# Debian's python3, where python3-matplotlib (scripts/setup.sh) is installed.
/usr/bin/python3 scripts/plot_curves.py build/examples/vit_rope.csv -o build/examples/vit_rope.png
echo "curves: build/examples/vit_rope.png"
