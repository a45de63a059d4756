#!/usr/bin/env bash
# Installs everything fairgate needs to build, test and benchmark, from Debian 12 packages only.
# Idempotent: packages already present are left alone, and apt is asked only when one is missing.
#
#   bash scripts/setup.sh            what the build, the tests and the benchmarks need
#   bash scripts/setup.sh --peers    and the servers the side-by-side benchmarks run fairgate's
#                                    examples against (nginx and fcgiwrap, for git's own http-backend)
set -euo pipefail

packages=(
  build-essential dpkg-dev cmake ninja-build pkg-config clang-format
  libboost-fiber-dev libboost-context-dev libboost-container-dev libboost-dev
  libabsl-dev doctest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  zlib1g-dev libsqlite3-dev libpq-dev libutfcpp-dev postgresql-15 iproute2 git prometheus chromium
  libpng-dev clang libclang-rt-14-dev
  golang-go
)
if [[ ${1:-} == --peers ]]; then
  packages+=(nginx-light fcgiwrap)
elif [[ -n ${1:-} ]]; then
  echo "setup: unknown argument '$1' (the only one is --peers)" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
