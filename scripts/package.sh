#!/usr/bin/env bash
# Builds fairgate's Debian packages (cmake/packaging.cmake) from a shared build of this checkout:
# fairgate (the shared libraries), fairgate-dev (headers, CMake and pkg-config files) and
# fairgate-tools (the fairgate program and the examples' programs), written to OUT_DIR.
#
#   scripts/package.sh OUT_DIR [--without-git-mirror]
#
# --without-git-mirror leaves the git mirror's two programs out of fairgate-tools (their build,
# Beast's templates, is most of the time: the test of the packages, tests/install_consumer/deb.sh,
# builds them so). FAIRGATE_PACKAGE_JOBS bounds the build's parallel jobs (default: the cores).
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/package.sh OUT_DIR [--without-git-mirror]}
git_mirror=ON
case ${2:-} in
  "") ;;
  --without-git-mirror) git_mirror=OFF ;;
  *) echo "package.sh: unknown argument '$2' (the only one is --without-git-mirror)" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
# /usr as the prefix, so that the libraries go where Debian puts them (lib/<multiarch>).
cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=ON -DFAIRGATE_BUILD_TESTS=OFF -DFAIRGATE_BUILD_BENCHMARKS=OFF \
  -DFAIRGATE_BUILD_GIT_MIRROR="$git_mirror" >/dev/null
cmake --build "$build" -j "${FAIRGATE_PACKAGE_JOBS:-$(nproc)}"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
ls "$out"/*.deb
