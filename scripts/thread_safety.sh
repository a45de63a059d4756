#!/usr/bin/env bash
# Checks the runtime's lock contracts with clang's thread-safety analysis: what the scheduler's
# lock guards (ABSL_GUARDED_BY) is touched only under it, and the functions that need it
# (ABSL_EXCLUSIVE_LOCKS_REQUIRED: the *Locked ones) are called only with it held. g++, which
# builds the presets, ignores the annotations; this compiles the runtime with clang, without
# generating code, in both of its forms (fibers, and the thread runtime of the tsan preset), and
# fails on any warning of the analysis. It first makes sure the analysis is on at all: a read of
# a guarded field without the lock must fail to compile, and so must a call that may suspend a
# fiber (Context::Err) made under the core lock.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety -DBOOST_ALL_NO_LIB
  -Iinclude -Isrc -isystem /usr/include/postgresql)

probe=$(mktemp --suffix=.cc)
suspends=$(mktemp --suffix=.cc)
trap 'rm -f "$probe" "$suspends"' EXIT
cat >"$probe" <<'PROBE'
#include "runtime/waiting.h"
struct Guarded {
  fairgate::internal::CoreMutex mutex;
  int value ABSL_GUARDED_BY(mutex) = 0;
  int ReadWithoutTheLock() { return value; }
};
PROBE
# A call that may suspend a fiber, under a core lock (issue 46): must not compile either.
cat >"$suspends" <<'PROBE'
#include "fairgate/context.h"
#include "runtime/waiting.h"
struct Suspends {
  fairgate::internal::CoreMutex mutex;
  fairgate::Status ErrUnderTheLock(const fairgate::Context& ctx) {
    mutex.Lock();
    fairgate::Status err = ctx.Err();
    mutex.Unlock();
    return err;
  }
};
PROBE

for threads in 0 1; do
  if clang++ "${flags[@]}" -DFAIRGATE_RUNTIME_THREADS="$threads" "$probe" 2>/dev/null; then
    echo "thread-safety analysis: a read without the lock compiled (FAIRGATE_RUNTIME_THREADS=$threads)"
    exit 1
  fi
  if clang++ "${flags[@]}" -DFAIRGATE_RUNTIME_THREADS="$threads" "$suspends" 2>/dev/null; then
    echo "thread-safety analysis: Context::Err under the core lock compiled (FAIRGATE_RUNTIME_THREADS=$threads)"
    exit 1
  fi

  echo "== thread-safety analysis, FAIRGATE_RUNTIME_THREADS=$threads"
  sources=()
  for source in src/runtime/*.cc; do
    # Built with fibers only (CMakeLists.txt).
    [[ $threads == 1 && $source == src/runtime/fiber_stack.cc ]] && continue
    sources+=("$source")
  done
  printf '%s\n' "${sources[@]}" |
    xargs -P "$(nproc)" -I{} clang++ "${flags[@]}" -DFAIRGATE_RUNTIME_THREADS="$threads" {}
done
