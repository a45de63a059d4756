# Sourced by the load comparisons (compare.sh, identical_clones.sh) after they set `build`: the
# binaries, the cores (server on core 0, load on core 1, so that the load cannot starve the
# server of CPU; git processes the server starts inherit core 0), a scratch directory removed on
# exit with the server (`pid`) it started, and a commit identity for the repositories they make.
server=$build/examples/git_mirror/fairgate-git-mirror
load=$build/examples/git_mirror/fairgate-git-mirror-load
[[ -x $server && -x $load ]] || { echo "build first: bash scripts/build.sh release" >&2; exit 2; }
server_cpu=0
load_cpu=$(( $(nproc) > 1 ? 1 : 0 ))

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org

# Seconds core $1 spent busy (user, nice, system, irq, softirq, steal) since boot, from
# /proc/stat: what the server's core did, whoever did it (git processes a server does not reap,
# as fcgiwrap's, are counted here and nowhere else).
core_busy_seconds() {
  awk -v cpu="cpu$1" -v hz="$(getconf CLK_TCK)" \
    '$1 == cpu { printf "%.1f", ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat
}

# Makes two one-commit repositories: $1/heavy.git (a file of $2 MiB of random bytes, so that its
# pack cannot be compressed) and $1/light.git (a line of text).
make_repositories() {
  git init --quiet --initial-branch=main "$1/heavy.git"
  head -c $(($2 * 1024 * 1024)) /dev/urandom > "$1/heavy.git/blob"
  git -C "$1/heavy.git" add . && git -C "$1/heavy.git" commit --quiet -m one
  git init --quiet --initial-branch=main "$1/light.git"
  echo light > "$1/light.git/README"
  git -C "$1/light.git" add . && git -C "$1/light.git" commit --quiet -m one
}

# Starts the mirror on core $server_cpu serving those two, with the flags given, its event log in
# $work/events; sets `pid` and `port` once it listens, and warms the heavy repository's mirror
# with one clone.
start_mirror() {
  rm -rf "$work/mirrors" "$work/out" "$work/events"
  taskset -c "$server_cpu" "$server" --port 0 --fetch-interval 0 --mirror-dir "$work/mirrors" \
    --event-log "$work/events" --repo "heavy.git=$work/heavy.git" \
    --repo "light.git=$work/light.git" "$@" >"$work/out" &
  pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
  port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\).*/\1/p' "$work/out")
  git clone --quiet "http://127.0.0.1:$port/heavy.git" "$work/warm" && rm -rf "$work/warm"
}

# How many git upload-pack runs for clones the mirror's event log holds so far.
clone_starts() {
  grep '"event":"start"' "$work/events" | grep -c '"type":"clone"' || true
}
