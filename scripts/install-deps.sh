#!/usr/bin/env bash
# Installs everything ggufd needs to build and test, from Debian 12's packages only.
# Idempotent: when every package is already present it returns without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libboost-program-options1.81-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang lld libclang-rt-14-dev clang-format
  libicu-dev
  libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev
  libsndfile1-dev libsamplerate0-dev
  wamerican
  curl python3 python3-jsonschema python3-jinja2
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
