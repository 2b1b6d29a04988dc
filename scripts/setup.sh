#!/usr/bin/env bash
# Installs the Debian packages stringc needs. Idempotent: when everything is
# present it only checks (a second or two) and installs nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools liblld-19-dev
  libfmt-dev libgtest-dev zlib1g-dev libzstd-dev
  python3-torch python3-matplotlib libopenblas-dev libopenblas0-pthread
  dataset-fashion-mnist
  clang-19 libclang-rt-19-dev
  ccache
  dpkg-dev
  pybind11-dev python3-pybind11 python3-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may still be running its own apt (provisioning, unattended
# upgrades): wait up to 10 minutes for the package lock rather than failing.
wait_for_lock=(-o DPkg::Lock::Timeout=600)
$SUDO apt-get "${wait_for_lock[@]}" update -qq
$SUDO apt-get "${wait_for_lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
