#!/bin/sh
# `stringrun train --device cuda --augment SPEC` augments in a kernel on the
# device (the start line says "(on the device)"), and `--host-augment` on the
# host: the two runs log the same losses, learning rates and gradient norms
# bit for bit (the log's columns 1-6; the 7th, images/s, is a timing), and
# they differ from a run without augmentation.
# usage: augment_on_device.sh STRINGRUN PACKAGE OUT_DIR
set -e
stringrun=$1 package=$2 out=$3
mkdir -p "$out"
train() {
  name=$1
  shift
  if ! "$stringrun" train "$package" --device cuda --steps 3 --batch 4 --seed 7 --no-eval \
      --log "$out/$name.csv" "$@" > "$out/$name.txt" 2>&1; then
    cat "$out/$name.txt" >&2
    exit 1
  fi
  cut -d, -f1-6 "$out/$name.csv" > "$out/$name.values"
}
train device --augment crop=3,flip=0.5,erase=0.5
train host --augment crop=3,flip=0.5,erase=0.5 --host-augment
train plain --augment none
grep -q "augment crop 3, flip 0.5, erase 0.5 (on the device)" "$out/device.txt" || {
  echo "augment_on_device.sh: the device run does not say it augments on the device:" >&2
  cat "$out/device.txt" >&2
  exit 1
}
if grep -q "(on the device)" "$out/host.txt"; then
  echo "augment_on_device.sh: --host-augment still augments on the device" >&2
  exit 1
fi
if ! cmp -s "$out/device.values" "$out/host.values"; then
  echo "augment_on_device.sh: the device's augmentation changed the run:" >&2
  diff "$out/device.values" "$out/host.values" >&2 || true
  exit 1
fi
if cmp -s "$out/device.values" "$out/plain.values"; then
  echo "augment_on_device.sh: the augmented run logs the plain run's losses" >&2
  exit 1
fi
echo "augment_on_device.sh: device and host augmentation log the same $(grep -c '^train' "$out/device.values") steps"
