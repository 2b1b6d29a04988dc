#!/bin/sh
# Assembles the PTX of every example (and of tests/cuda/kernels.pe with every
# kernel the generator has) with ptxas for one architecture, so a broken
# kernel fails CI on a machine without a GPU (docs/cuda.md). kernels.pe is
# compiled with --gpu-precision=bf16 (every kernel, the tensor-core ones
# included), and vit_rope and gpt_rope_causal once more with it (`NAME-bf16`:
# their steps launch the tensor-core attention kernels).
#
#   ptxas_examples.sh STRINGC SOURCE_ROOT OUT_DIR [ARCH]   (ARCH: sm_90)
#
# A kernel's name identifies its code across packages (host_kernels.py checks
# it), so a kernel whose PTX was already assembled for an earlier model is not
# assembled again: 716 kernels are 216 distinct texts.
#
# Exit 0 when every kernel assembles, 1 on a failure, 77 (CTest's skip code)
# when there is no ptxas or libdevice to use.
set -u
stringc=$1 root=$2 out=$3 arch=${4:-sm_90}
cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
ptxas=$cuda/bin/ptxas
[ -x "$ptxas" ] || ptxas=$(command -v ptxas) || { echo "SKIP: no ptxas (CUDA_HOME=$cuda)"; exit 77; }
[ -f "$cuda/nvvm/libdevice/libdevice.10.bc" ] || { echo "SKIP: no libdevice under $cuda"; exit 77; }
mkdir -p "$out" || exit 1
status=0 kernels=0 distinct=0
seen=$out/assembled.md5
: > "$seen" || exit 1
for model in "$root"/examples/*.pe "$root"/tests/cuda/kernels.pe \
             "$root"/examples/vit_rope.pe@bf16 "$root"/examples/gpt_rope_causal.pe@bf16; do
  extra=
  case $model in
    *@bf16) model=${model%@bf16} name=$(basename "$model" .pe)-bf16 extra=--gpu-precision=bf16 ;;
    *) name=$(basename "$model" .pe) ;;
  esac
  [ "$name" = kernels ] && extra="--gpu-all-kernels --gpu-precision=bf16"
  if ! "$stringc" "$model" --emit=ptx --gpu-arch="$arch" $extra -o "$out/$name.ptx"; then
    echo "FAIL: $name: stringc --emit=ptx failed"; status=1; continue
  fi
  rm -rf "$out/$name" && mkdir "$out/$name"
  # One file per kernel: the text after each "// kernel: NAME" line.
  awk -v dir="$out/$name" '/^\/\/ kernel: /{f = dir "/" $3 ".ptx"; next} f {print > f}' "$out/$name.ptx"
  count=0
  for ptx in "$out/$name"/*.ptx; do
    [ -f "$ptx" ] || continue
    count=$((count + 1))
    sum=$(md5sum < "$ptx" | cut -d' ' -f1)
    grep -qx "$sum" "$seen" && continue
    distinct=$((distinct + 1))
    if ! "$ptxas" -arch="$arch" "$ptx" -o "${ptx%.ptx}.cubin"; then
      echo "FAIL: $name: ptxas -arch=$arch rejects kernel $(basename "$ptx" .ptx)"; status=1
    else
      echo "$sum" >> "$seen"
    fi
  done
  [ "$count" -gt 0 ] || { echo "FAIL: $name: no kernels in the PTX"; status=1; }
  kernels=$((kernels + count))
  echo "$name: $count kernels assembled for $arch"
done
echo "total: $kernels kernels, $distinct distinct ones assembled"
exit $status
