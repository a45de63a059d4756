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
