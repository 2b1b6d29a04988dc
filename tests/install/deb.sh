#!/usr/bin/env bash
# Makes the Debian package of a whole build (`cpack -G DEB`,
# runtime/cmake/StringrtPackaging.cmake) and checks with `dpkg-deb -c` that it
# holds the tools, the runtime's shared library and its CMake package config
# (docs/install.md, "A Debian package"). Fails, naming what is missing, when
# cpack fails, writes no package, or the package lacks one of them.
#
# usage: deb.sh BUILD_DIR WORK_DIR
#   BUILD_DIR  a configured and built whole build (stringc, stringrun, the runtime)
#   WORK_DIR   emptied first; receives the .deb, cpack's staging and its log
set -euo pipefail
build=$1 work=$2
if [ ! -f "$build/CPackConfig.cmake" ]; then
  echo "deb.sh: $build has no CPackConfig.cmake (not a configured build directory)" >&2
  exit 1
fi
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

start=$SECONDS
if ! (cd "$build" && cpack -G DEB -B "$work") > "$work/cpack.log" 2>&1; then
  echo "deb.sh: cpack -G DEB failed in $build (log: $work/cpack.log):" >&2
  tail -n 20 "$work/cpack.log" >&2
  exit 1
fi
seconds=$((SECONDS - start))
debs=("$work"/*.deb)
if [ ! -f "${debs[0]}" ]; then
  echo "deb.sh: cpack -G DEB wrote no .deb into $work (log: $work/cpack.log)" >&2
  exit 1
fi
deb=${debs[0]}

# The paths in the package (field 6 of `dpkg-deb -c`; a link's target follows).
paths=$(dpkg-deb -c "$deb" | awk '{print $6}')
missing=()
check() { # check WHAT REGEX
  grep -Eq "$2" <<< "$paths" || missing+=("$1 ($2)")
}
check "bin/stringc" '^\./usr/bin/stringc$'
check "bin/stringrun" '^\./usr/bin/stringrun$'
check "the shared library" '^\./usr/lib/(.+/)?libstringrt\.so$'
check "the CMake package config" '^\./usr/lib/(.+/)?cmake/stringrt/stringrtConfig\.cmake$'
if [ ${#missing[@]} -ne 0 ]; then
  echo "deb.sh: $deb lacks:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "its contents:" >&2
  echo "$paths" >&2
  exit 1
fi
echo "deb.sh: $(basename "$deb") ($(du -h "$deb" | cut -f1), made in ${seconds} s) holds" \
  "bin/stringc, bin/stringrun, libstringrt.so and stringrtConfig.cmake;" \
  "Depends: $(dpkg-deb -f "$deb" Depends)"
