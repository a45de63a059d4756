#!/usr/bin/env bash
# fairgate's Debian packages, as a Debian user meets them: built by scripts/package.sh (a shared
# build, in batches, the git mirror and the worker pool left out for time), checked (names,
# dependencies, SONAME, what each holds, only the public API exported), installed on this machine
# with dpkg, used by a consumer built against /usr with CMake and with pkg-config, and removed
# again.
#
#   deb.sh SOURCE_DIR WORK_DIR
#
# It needs root (dpkg -i); without it (and without password-less sudo) it is skipped (77). It
# refuses to run while a fairgate package is installed, which it would otherwise remove.
set -euo pipefail
source_dir=$1 work=$2
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    echo "deb.sh: installing packages needs root; skipped"
    exit 77
  fi
fi
packages=(fairgate-tools fairgate-dev fairgate)
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "deb.sh: $p is installed already; remove it first (this test would remove it)" >&2
    exit 1
  fi
done
rm -rf "$work"
mkdir -p "$work"
cleanup() { "${as_root[@]}" dpkg --purge "${packages[@]}" >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() { echo "deb.sh: $*" >&2; exit 1; }

# Nice: the test runs beside the rest of the suite, which keeps the cores it needs; the build
# takes what the suite leaves idle (its tests wait on servers, clients and timers). In batches:
# what is checked here (the packages' files, dependencies, SONAMEs, exports and consumers) does
# not depend on how the sources were grouped, and the release preset's build and the Build.*
# probes still compile each of the library's sources alone.
nice -n 10 "$source_dir/scripts/package.sh" "$work/debs" --without-git-mirror \
  --without-worker-pool --in-batches >/dev/null
version=$(sed -n 's/^project(fairgate VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
lib=$work/debs/fairgate_${version}_${arch}.deb
dev=$work/debs/fairgate-dev_${version}_${arch}.deb
tools=$work/debs/fairgate-tools_${version}_${arch}.deb
for deb in "$lib" "$dev" "$tools"; do [[ -s $deb ]] || fail "no $(basename "$deb")"; done

# What each package holds and needs.
soname_minor=${version%.*}
contents() { dpkg-deb -c "$1" | awk '{print $6}'; }
contents "$lib" | grep -qx "./usr/lib/$multiarch/libfairgate.so.$version" ||
  fail "fairgate lacks libfairgate.so.$version"
for l in fairgate_core fairgate_sqlite fairgate_postgres; do
  contents "$lib" | grep -qx "./usr/lib/$multiarch/lib$l.so.$version" || fail "fairgate lacks lib$l"
done
if contents "$lib" | grep -q "include/\|\.a$\|/bin/"; then fail "fairgate holds more than libraries"; fi
contents "$dev" | grep -qx "./usr/include/fairgate/scheduler.h" || fail "fairgate-dev lacks headers"
contents "$dev" | grep -qx "./usr/lib/$multiarch/cmake/fairgate/fairgateConfig.cmake" ||
  fail "fairgate-dev lacks the CMake package"
contents "$dev" | grep -qx "./usr/lib/$multiarch/pkgconfig/fairgate.pc" ||
  fail "fairgate-dev lacks the pkg-config files"
contents "$tools" | grep -qx "./usr/bin/fairgate" || fail "fairgate-tools lacks the fairgate program"
contents "$tools" | grep -qx "./usr/bin/fairgate-quickstart" || fail "fairgate-tools lacks the quickstart"
dpkg-deb -f "$lib" Depends | grep -q "libboost-fiber" || fail "fairgate does not depend on Boost.Fiber"
dpkg-deb -f "$dev" Depends | grep -q "fairgate (= $version)" || fail "fairgate-dev does not depend on fairgate"
dpkg-deb -f "$tools" Depends | grep -q "fairgate (= $version)" || fail "fairgate-tools does not depend on fairgate"

# The libraries: a SONAME of major.minor, and the public API alone exported.
mkdir "$work/unpacked"
dpkg-deb -x "$lib" "$work/unpacked"
so=$work/unpacked/usr/lib/$multiarch/libfairgate.so.$version
readelf -d "$so" | grep -q "SONAME.*\[libfairgate.so.$soname_minor\]" || fail "libfairgate's SONAME is not libfairgate.so.$soname_minor"
exported=$(nm -D --defined-only -C "$so")
grep -q "fairgate::Scheduler::Create" <<<"$exported" || fail "libfairgate does not export Scheduler::Create"
grep -q "fairgate::ValidateJobType" <<<"$exported" || fail "libfairgate does not export ValidateJobType"
if grep -q "fairgate::core::\|fairgate::internal::" <<<"$exported"; then
  fail "libfairgate exports internals: $(grep -m3 "fairgate::core::\|fairgate::internal::" <<<"$exported")"
fi
echo "libfairgate.so.$version: $(grep -c " T " <<<"$exported") functions exported, $(stat -c %s "$so") bytes"
# The C interface (fairgate/c.h): its own SONAME, and its C functions alone exported.
c_so=$work/unpacked/usr/lib/$multiarch/libfairgate_c.so.$version
[[ -f $c_so ]] || fail "fairgate lacks libfairgate_c.so.$version"
readelf -d "$c_so" | grep -q "SONAME.*\[libfairgate_c.so.0\]" || fail "libfairgate_c's SONAME is not libfairgate_c.so.0"
c_functions=$(nm -D --defined-only "$c_so" | awk '$2 == "T" {print $3}')
grep -qx "fairgate_scheduler_create" <<<"$c_functions" || fail "libfairgate_c does not export fairgate_scheduler_create"
if grep -v "^fairgate_" <<<"$c_functions" | grep -q .; then
  fail "libfairgate_c exports more than fairgate_*: $(grep -v "^fairgate_" <<<"$c_functions" | head -3)"
fi
contents "$dev" | grep -qx "./usr/include/fairgate/c.h" || fail "fairgate-dev lacks fairgate/c.h"
contents "$dev" | grep -qx "./usr/lib/$multiarch/pkgconfig/fairgate-c.pc" ||
  fail "fairgate-dev lacks fairgate-c.pc"
contents "$dev" | grep -qx "./usr/lib/$multiarch/cmake/fairgate/fairgateCTargets.cmake" ||
  fail "fairgate-dev lacks fairgate::c's CMake targets"

# Installed on the machine, and used.
"${as_root[@]}" dpkg -i "$lib" "$dev" "$tools" >/dev/null
[[ $(/usr/bin/fairgate --version) == *"$version"* ]] || fail "fairgate --version does not say $version"
/usr/bin/fairgate-quickstart >/dev/null || fail "fairgate-quickstart failed"
cmake -S "$source_dir/tests/install_consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
for program in core_only runsync_only with_stores c_only; do
  out=$("$work/consumer/$program") || fail "the consumer $program failed"
  [[ $out == ok* ]] || fail "the consumer $program said: $out"
done
# (/lib is /usr/lib on Debian 12, and ld.so's cache may name either.)
linked=$(ldd "$work/consumer/runsync_only" 2>&1) || true
grep -Eq "libfairgate.so.$soname_minor => (/usr)?/lib/$multiarch/" <<<"$linked" ||
  fail "runsync_only does not run on the installed libfairgate.so.$soname_minor: ldd says: $(grep -i fairgate <<<"$linked" || echo "$linked")"
c++ -std=c++20 "$source_dir/tests/install_consumer/with_stores.cc" -o "$work/with_stores_pc" \
  $(pkg-config --cflags --libs fairgate-sqlite fairgate-postgres fairgate-asio)
out=$("$work/with_stores_pc") || fail "the pkg-config consumer failed"
[[ $out == ok* ]] || fail "the pkg-config consumer said: $out"
cc -std=c99 -Wall -Werror "$source_dir/tests/install_consumer/c_only.c" -o "$work/c_only_pc" \
  $(pkg-config --cflags --libs fairgate-c)
out=$("$work/c_only_pc") || fail "the pkg-config C consumer failed"
[[ $out == ok* ]] || fail "the pkg-config C consumer said: $out"
echo "ok: the three packages installed, CMake and pkg-config consumers (C++ and C) built and run"
