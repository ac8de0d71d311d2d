#!/usr/bin/env bash
# Prints the Debian packages that provide the shared libraries the given executables load, one per
# line, so the image's runtime stage installs exactly those (and follows the binaries when the
# code gains or drops a dependency). Packages every Debian image already has (libc6, libstdc++6,
# libgcc-s1) are left out. Fails, naming the library, when one cannot be found or owned.
# Usage: runtime-packages.sh BINARY...
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi

declare -A packages=()
for binary in "$@"; do
  if ! out=$(ldd "$binary" 2>&1); then
    echo "runtime-packages: ldd failed on $binary: $out" >&2
    exit 1
  fi
  if grep -q "not found" <<<"$out"; then
    echo "runtime-packages: $binary has unresolved libraries:" >&2
    grep "not found" <<<"$out" >&2
    exit 1
  fi
  # Lines look like "libfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x...)".
  while read -r lib; do
    [ -n "$lib" ] || continue
    owner=""
    # Debian 12 merges /lib into /usr/lib, but dpkg knows each file under the path its package
    # ships, so try the path ldd printed, its /usr twin and the resolved symlink target.
    real=$(readlink -f "$lib")
    for candidate in "$lib" "/usr$lib" "${lib#/usr}" "$real" "/usr$real" "${real#/usr}"; do
      if owner=$(dpkg-query -S "$candidate" 2>/dev/null); then break; fi
      owner=""
    done
    if [ -z "$owner" ]; then
      echo "runtime-packages: no Debian package owns $lib (needed by $binary)" >&2
      exit 1
    fi
    pkg=${owner%%:*}
    case "$pkg" in
      libc6 | libstdc++6 | libgcc-s1) ;;
      *) packages[$pkg]=1 ;;
    esac
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$out")
done

if [ ${#packages[@]} -gt 0 ]; then
  printf '%s\n' "${!packages[@]}" | sort
fi
