#!/usr/bin/env bash
# The noisy-neighbour comparison of README.md, on this machine: client A clones a heavy
# repository 40 at a time in a loop, client B clones a light one now and then; B's clone times
# with --policy fairgate, with --policy fifo, and with A not running at all.
#
#   bash examples/git_mirror/compare.sh [BUILD_DIR]     (default build/release)
set -euo pipefail
build=${1:-build/release}
server=$build/examples/git_mirror/fairgate-git-mirror
load=$build/examples/git_mirror/fairgate-git-mirror-load
[[ -x $server && -x $load ]] || { echo "build first: bash scripts/build.sh release" >&2; exit 2; }
capacity=${CAPACITY:-4}
parallel=${PARALLEL:-40}
light_clones=${LIGHT_CLONES:-10}

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org

# heavy.git: 24 MB of incompressible files over 8 commits; light.git: one small file.
git init --quiet --initial-branch=main "$work/heavy.git"
for i in $(seq 8); do
  head -c 3000000 /dev/urandom > "$work/heavy.git/blob$i"
  git -C "$work/heavy.git" add . && git -C "$work/heavy.git" commit --quiet -m "c$i"
done
git init --quiet --initial-branch=main "$work/light.git"
echo light > "$work/light.git/README"
git -C "$work/light.git" add . && git -C "$work/light.git" commit --quiet -m c1

run() {  # run POLICY [--alone]
  local policy=$1; shift
  rm -rf "$work/mirrors" "$work/out"
  "$server" --port 0 --policy "$policy" --capacity "$capacity" --client-header X-Client \
    --fetch-interval 0 --mirror-dir "$work/mirrors" \
    --repo "heavy.git=$work/heavy.git" --repo "light.git=$work/light.git" >"$work/out" &
  pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
  local url
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/out")
  # Make both mirrors (and let fairgate learn each clone's cost) before measuring.
  git clone --quiet "$url/heavy.git" "$work/warm-heavy" && rm -rf "$work/warm-heavy"
  git clone --quiet "$url/light.git" "$work/warm-light" && rm -rf "$work/warm-light"
  "$load" --url "$url" --heavy heavy.git --light light.git --heavy-parallel "$parallel" \
    --light-clones "$light_clones" --light-interval 0.5 --warmup 3 --client-header X-Client \
    --work-dir "$work/clones" "$@"
  kill -TERM "$pid"; wait "$pid" || true; pid=
}

echo "== B alone"; run fairgate --alone
echo "== --policy fairgate"; run fairgate
echo "== --policy fifo"; run fifo
