#!/usr/bin/env bash
# The README's walk-through with the real binary: start it on a free port, clone through it with
# plain git, compare, stop it with SIGTERM (exit status 0). Then a bad command line (status 2).
set -euo pipefail
server=$1
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org

git init --quiet --initial-branch=main "$work/upstream.git"
echo hello > "$work/upstream.git/README"
git -C "$work/upstream.git" add README
git -C "$work/upstream.git" commit --quiet -m first

"$server" --port 0 --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 200); do
  grep -q "listening on" "$work/out" && break
  sleep 0.05
done
url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/out")
[[ -n $url ]] || { echo "the server did not say where it listens"; cat "$work/err"; exit 1; }

git clone --quiet "$url/demo.git" "$work/clone"
[[ $(git -C "$work/clone" rev-parse HEAD) == $(git -C "$work/upstream.git" rev-parse HEAD) ]]
[[ $(cat "$work/clone/README") == hello ]]

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[[ $status -eq 0 ]] || { echo "the server exited with $status on SIGTERM"; exit 1; }

status=0
"$server" --mirror-dir "$work/mirrors" 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "a command line without repositories exited with $status"; exit 1; }
grep -q "no repository to serve" "$work/err"
status=0
"$server" --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  --trusted-proxy not-an-address 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "a bad --trusted-proxy exited with $status"; exit 1; }
grep -q "trusted proxy 'not-an-address'" "$work/err"
status=0
"$server" --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  --header-timeout 0 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "--header-timeout 0 exited with $status"; exit 1; }
grep -q -- "--header-timeout must be > 0" "$work/err"
status=0
"$server" --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  --state "$work/state.db" --database "host=$work dbname=mirror" 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "--state with --database exited with $status"; exit 1; }
grep -q "a state file and a database are exclusive" "$work/err"
echo "walk-through OK"
