#!/usr/bin/env bash
# Builds fairgate's Debian packages (cmake/packaging.cmake) from a shared build of this checkout:
# fairgate (the shared libraries), fairgate-dev (headers, CMake and pkg-config files) and
# fairgate-tools (the fairgate program and the examples' programs), written to OUT_DIR.
#
#   scripts/package.sh OUT_DIR [--without-git-mirror] [--without-worker-pool] [--in-batches]
#
# Each --without-* leaves an example's programs out of fairgate-tools: --without-git-mirror the git
# mirror's two (their build, Beast's templates, is most of the time), --without-worker-pool the
# worker pool's three. --in-batches compiles each target's sources in batches (CMake's unity
# build): the same sources, files and public API in about half the CPU time, but not the bytes a
# release ships (the compiler inlines differently), which compiles each source alone. The test of
# the packages (tests/install_consumer/deb.sh) passes all three, for time; the quickstart stays.
# FAIRGATE_PACKAGE_JOBS bounds the build's parallel jobs (default: the cores).
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/package.sh OUT_DIR [--without-git-mirror] [--without-worker-pool]"
usage+=" [--in-batches]"
if [[ $# -lt 1 ]]; then echo "$usage" >&2; exit 2; fi
out=$1
shift
git_mirror=ON worker_pool=ON unity=OFF
for argument in "$@"; do
  case $argument in
    --without-git-mirror) git_mirror=OFF ;;
    --without-worker-pool) worker_pool=OFF ;;
    --in-batches) unity=ON ;;
    *) echo "package.sh: unknown argument '$argument' ($usage)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
# /usr as the prefix, so that the libraries go where Debian puts them (lib/<multiarch>).
cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=ON -DFAIRGATE_BUILD_TESTS=OFF -DFAIRGATE_BUILD_BENCHMARKS=OFF \
  -DFAIRGATE_BUILD_GIT_MIRROR="$git_mirror" -DFAIRGATE_BUILD_WORKER_POOL="$worker_pool" \
  -DCMAKE_UNITY_BUILD="$unity" >/dev/null
cmake --build "$build" -j "${FAIRGATE_PACKAGE_JOBS:-$(nproc)}"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
ls "$out"/*.deb
