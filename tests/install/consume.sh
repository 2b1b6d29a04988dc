#!/usr/bin/env bash
# Installs a build of stringc (or of the runtime alone) into a fresh prefix,
# moves the prefix elsewhere (the install must be relocatable), then builds
# examples/cpp as a project outside the tree against it twice, with CMake
# (find_package(stringrt)) and with pkg-config (stringrt.pc), and runs both
# builds' programs on the tiny classifier (docs/install.md).
#
# usage: consume.sh BUILD_DIR WORK_DIR SOURCE_DIR [STRINGC]
#   STRINGC compiles the package when the install has no stringc (the
#   runtime-only build); otherwise the installed stringc does.
set -euo pipefail
build=$1 work=$2 src=$3 stringc_fallback=${4:-}
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

cmake --install "$build" --prefix "$work/staged" > "$work/install.log"
# Relocatable: nothing may point at the prefix it was installed into.
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
libdir=$(dirname "$(find "$prefix" -name stringrt.pc -path '*pkgconfig*' | head -n 1)")
libdir=$(dirname "$libdir")
echo "installed into a prefix, moved to $prefix; libraries in ${libdir#$prefix/}:"
(cd "$libdir" && ls libstringrt*)

# The package: the installed stringc when there is one.
stringc=$prefix/bin/stringc
[ -x "$stringc" ] || stringc=$stringc_fallback
"$stringc" "$src/tests/lit/stringc/Inputs/tiny_mlp.pe" --target=cpu -o "$work/tiny.pkg"
python3 "$src/tests/lit/stringc/Inputs/make_tiny_idx.py" "$work/data"

# 1. CMake: find_package(stringrt CONFIG REQUIRED), stringrt::stringrt.
cmake -S "$src/examples/cpp" -B "$work/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/cmake.log"
cmake --build "$work/cmake" > "$work/cmake-build.log"

# 2. pkg-config: the flags of stringrt.pc, nothing else but the run path.
export PKG_CONFIG_PATH=$libdir/pkgconfig
echo "pkg-config --cflags --libs stringrt: $(pkg-config --cflags --libs stringrt)"
mkdir -p "$work/pkgconfig"
c++ -std=c++17 -O1 "$src/examples/cpp/train_example.cpp" $(pkg-config --cflags --libs stringrt) \
  -Wl,-rpath,"$libdir" -o "$work/pkgconfig/train_example"
cc -std=c99 -O1 "$src/examples/cpp/c_example.c" $(pkg-config --cflags --libs stringrt) \
  -Wl,-rpath,"$libdir" -o "$work/pkgconfig/c_example"

for how in cmake pkgconfig; do
  # Each program must load the installed libstringrt.so, not a build tree's.
  # ldd's output is captured first: `ldd | grep -q` under pipefail fails
  # whenever grep exits on its match before ldd has written everything.
  loaded=$(ldd "$work/$how/c_example")
  grep -q "$libdir/libstringrt.so" <<< "$loaded" || {
    echo "consume.sh: $how's c_example does not load $libdir/libstringrt.so:" >&2
    echo "$loaded" >&2
    exit 1
  }
  "$work/$how/c_example" "$work/tiny.pkg" "$work/$how.ckpt" > "$work/$how-c.out"
  grep -q '^step 3: loss' "$work/$how-c.out"
  grep -q "^checkpoint $work/$how.ckpt" "$work/$how-c.out"
  cp "$work/tiny.pkg" "$work/$how.pkg"
  "$work/$how/train_example" "$work/$how.pkg" "$work/data" 4 > "$work/$how-cpp.out"
  grep -q '^step 4/4: loss' "$work/$how-cpp.out"
  echo "$how: c_example and train_example ran ($(grep '^step 4/4' "$work/$how-cpp.out"))"
done
# Both builds ran the same code on the same data: the same losses.
cmp "$work/cmake-cpp.out" <(sed "s|$work/pkgconfig.pkg|$work/cmake.pkg|" "$work/pkgconfig-cpp.out")
echo "consume.sh: the installed runtime links and runs with CMake and with pkg-config"
