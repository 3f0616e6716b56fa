#!/usr/bin/env bash
# Installs every Debian 12 package Strata needs (idempotent), then builds.
# Usage: scripts/setup.sh [--no-build] [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev
  libssl-dev libcpp-httplib-dev libicu-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  openssl chromium python3
  clang libclang-rt-14-dev
)
# clang and its compiler-rt (libFuzzer, sanitizer runtimes) build the fuzz harnesses (scripts/fuzz.sh).
# The server tests drive Strata with the official openai npm client and a headless browser.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

[ "${1:-}" = "--no-build" ] && exit 0
BUILD_DIR=${1:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j"$(nproc)"
