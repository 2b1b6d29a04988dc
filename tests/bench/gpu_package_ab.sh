#!/bin/bash
# Side-by-side GPU training-step speed of the same models compiled in
# several ways (a compiler change against main, a kernel variant): for each
# round, each model and each variant in turn, `stringrun bench --device cuda`
# (CUDA graphs on); then the median images/s of every variant and its ratio
# to the first. Interleaving the variants keeps clock and thermal drift out
# of the ratios.
#
#   bash tests/bench/gpu_package_ab.sh STRINGRUN DATA "NAME=DIR ..." "MODEL:BATCH ..." [ROUNDS]
#
# DIR holds MODEL.pkg for every MODEL (as gpu/examples-bf16 does); DATA is
# the Fashion-MNIST directory, or - for stringrun's synthetic batches; ROUNDS
# defaults to 3, STEPS (environment) to 30. A failed bench prints its error
# and counts as 0 images/s. CTest runs it under the emulator
# (gpu-package-ab-emulated).
set -u
if [ $# -lt 4 ]; then
  echo "usage: gpu_package_ab.sh STRINGRUN DATA \"NAME=DIR ...\" \"MODEL:BATCH ...\" [ROUNDS]" >&2
  exit 2
fi
stringrun=$1 data=$2 variants=$3 steps_set=$4 rounds=${5:-3}
data_option=(--data "$data")
[ "$data" = - ] && data_option=()
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for step in $steps_set; do
    model=${step%:*} batch=${step#*:}
    for variant in $variants; do
      name=${variant%%=*} dir=${variant#*=}
      line=$(timeout 120 "$stringrun" bench "$dir/$model.pkg" --device cuda --batch "$batch" \
               --steps "${STEPS:-30}" "${data_option[@]}" 2>&1 | grep -E 'images/s|error' | tail -1)
      rate=$(echo "$line" | grep -oE '[0-9.]+ images/s' | grep -oE '^[0-9.]+')
      [ -n "$rate" ] || { echo "$name $model $batch: ${line:-no output}" >&2; rate=0; }
      echo "$model $batch $name $rate" >> "$results"
    done
  done
done
python3 - "$results" "$variants" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
names = [v.split("=", 1)[0] for v in sys.argv[2].split()]
print(f"{'model':<14}{'batch':>6}  " + "".join(f"{n:>22}" for n in names))
for model, batch in dict.fromkeys((r[0], r[1]) for r in rows):
    rates = {n: statistics.median(float(r[3]) for r in rows
                                  if (r[0], r[1], r[2]) == (model, batch, n)) for n in names}
    base = rates[names[0]]
    cells = [f"{rates[n]:>12,.0f} ({rates[n] / base if base else 0:4.2f}x)" for n in names]
    print(f"{model:<14}{batch:>6}  " + "".join(f"{c:>22}" for c in cells))
print("(median images/s over the rounds; the ratio is to the first variant)")
EOF
