#!/usr/bin/env bash
# The main job: install what is missing, build, and compile the ViT-RoPE example
# to the pe dialect (training it with stringrun arrives with the CPU backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
mkdir -p build/examples
build/bin/stringc examples/vit_rope.pe --emit=mlir -o build/examples/vit_rope.mlir
build/bin/string-opt build/examples/vit_rope.mlir > /dev/null   # parses and verifies again
echo "main: examples/vit_rope.pe -> build/examples/vit_rope.mlir ($(grep -c '^ *%' build/examples/vit_rope.mlir) ops in @forward, $(grep -c 'pe.parameter' build/examples/vit_rope.mlir) parameters)"
