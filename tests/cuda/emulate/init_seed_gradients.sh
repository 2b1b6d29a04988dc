#!/bin/sh
# `stringrun gradients --device cuda --init-seed S` draws the parameters of
# `train --init-seed S` on both sides: with S = 3 the GPU matches the CPU
# (stringrun exits 1 on a mismatch) and the loss differs from the default
# draw's, so the seed reached the parameters.
# usage: init_seed_gradients.sh STRINGRUN PACKAGE OUT_DIR
set -e
stringrun=$1 package=$2 out=$3
mkdir -p "$out"
# Prints the CPU side's loss of one run; prints nothing (caught below) when
# stringrun fails, a GPU/CPU mismatch included.
run() {
  if ! "$stringrun" gradients "$package" --device cuda --batch 4 --seed 5 "$@" \
      --out "$out/init-seed.safetensors" > "$out/log.txt" 2>&1; then
    cat "$out/log.txt" >&2
    return 0
  fi
  sed -n 's/.*loss \([-0-9.e]*\) (GPU) vs \([-0-9.e]*\) (CPU).*/\2/p' "$out/log.txt"
}
default=$(run)
seeded=$(run --init-seed 3)
again=$(run --init-seed 3)
echo "CPU loss: default draw $default, --init-seed 3 $seeded (again $again)"
if [ -z "$default" ] || [ -z "$seeded" ]; then
  echo "init_seed_gradients.sh: no loss line in stringrun's output" >&2
  exit 1
fi
if [ "$default" = "$seeded" ]; then
  echo "init_seed_gradients.sh: --init-seed 3 gave the default draw's loss" >&2
  exit 1
fi
if [ "$seeded" != "$again" ]; then
  echo "init_seed_gradients.sh: --init-seed 3 is not reproducible" >&2
  exit 1
fi
