#!/usr/bin/env bash
# Installs the Debian 12 packages DMG builds and tests with, but only those
# that are missing (no apt-get at all when everything is present).
#   install-deps.sh            everything to build, test and deploy
#   install-deps.sh --demo     only what building dmg needs (the demo preset,
#                              `deploy/quickstart.sh demo`): on a fresh Debian
#                              12 with g++ and cmake lacks 16 packages, 13 MB
#   install-deps.sh --runtime  only what an installed dmg needs on a host
#                              (`cmake --install`, `deploy/cluster FILE push`)
set -euo pipefail

# What building dmg needs: the compiler and build tools, and the -dev
# packages of the libraries it links (ldd tools/dmg) or includes (Boost.Asio).
BUILD_PACKAGES=(
  g++ cmake ninja-build pkg-config
  libabsl-dev libgflags-dev libgoogle-glog-dev
  libboost-dev libibverbs-dev librdmacm-dev
  libssl-dev  # HMAC-SHA-256 of the memory-node handshake (transport/auth.h)
  zlib1g-dev liblzma-dev
)

if [ "${1:-}" = --demo ]; then
  PACKAGES=("${BUILD_PACKAGES[@]}")
elif [ "${1:-}" = --runtime ]; then
  # The shared libraries dmg links (ldd), the rxe/mlx verbs providers and
  # the `rdma` tool (deploy/softroce-setup.sh).
  PACKAGES=(libabsl20220623 libgflags2.2 libgoogle-glog0v6 libibverbs1
            librdmacm1 ibverbs-providers libssl3 libstdc++6 zlib1g liblzma5 iproute2)
elif [ $# -gt 0 ]; then
  echo "usage: install-deps.sh [--demo|--runtime]" >&2; exit 2
else
PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  libgtest-dev libgmock-dev libbenchmark-dev
  xz-utils gzip
  clang  # checks the lock annotations (ThreadSafetyAnnotations test)
  # The sanitizer and fuzzer runtimes (asan, tsan, fuzz presets: ASan, UBSan,
  # TSan, libFuzzer) and llvm-symbolizer for their reports (docs/TESTING.md).
  libclang-rt-14-dev llvm-14
  python3-matplotlib  # plots of deploy/experiments/*.py
  iproute2 openssh-client openssh-server  # deploy/cluster (netns, ssh) and its tests
  slurm-wlm munge  # tests/cluster_slurm_test.sh: a one-host Slurm
)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
