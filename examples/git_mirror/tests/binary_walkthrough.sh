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

# Starts the server (the command line given, on a free port) and sets pid and url.
start() {
  "$@" --port 0 --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 200); do
    grep -q "listening on" "$work/out" && break
    sleep 0.05
  done
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/out")
  [[ -n $url ]] || { echo "the server did not say where it listens"; cat "$work/err"; exit 1; }
}
start "$server"

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
  --hit-charge -1 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "--hit-charge -1 exited with $status"; exit 1; }
grep -q "the hit charge must be finite and >= 0 seconds" "$work/err"
status=0
"$server" --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  --state "$work/state.db" --database "host=$work dbname=mirror" 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "--state with --database exited with $status"; exit 1; }
grep -q "a state file and a database are exclusive" "$work/err"
status=0
prlimit --nofile=90:90 "$server" --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  --capacity 8 2>"$work/err" || status=$?
[[ $status -eq 2 ]] || { echo "an open-file limit below the reserve exited with $status"; exit 1; }
grep -q "open-file limit (90) leaves no descriptor for a connection" "$work/err"

# Under a low open-file limit, the connection limit is lowered to fit (and said); a connection
# past it gets 503 at once, not silence, and the server serves again once they close.
start prlimit --nofile=256:256 "$server" --capacity 8
port=${url##*:}
# 256 - (64 + 4 x 8 + 64 kept packs) = 96 descriptors, two per connection.
grep -q -- "--max-connections lowered from 4096 to 48: the open-file limit is 256" "$work/err" ||
  { echo "the lowered connection limit was not said"; cat "$work/err"; exit 1; }
held=()
for _ in $(seq 48); do
  exec {fd}<>"/dev/tcp/127.0.0.1/$port"
  held+=("$fd")
done
exec {over}<>"/dev/tcp/127.0.0.1/$port"
# The server may answer and close before the request is written: a write into the closed socket
# kills its writer with SIGPIPE, so the write is a subshell's (the answer is read either way).
(printf 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' >&"$over") 2>/dev/null || true
read -r -t 20 answer <&"$over"
[[ $answer == "HTTP/1.1 503"* ]] || { echo "over the limit: '$answer'"; exit 1; }
exec {over}>&-
for fd in "${held[@]}"; do exec {fd}>&-; done
git clone --quiet "$url/demo.git" "$work/clone2"
kill -TERM "$pid"
wait "$pid"
pid=

# One server at a time on a state file: a second is refused, naming the first's process, and
# starts once the first has stopped.
start "$server" --state "$work/state.db"
status=0
"$server" --port 0 --mirror-dir "$work/mirrors" --repo "demo.git=$work/upstream.git" \
  --state "$work/state.db" >/dev/null 2>"$work/err2" || status=$?
[[ $status -eq 2 ]] || { echo "a second server on the state file exited with $status"; exit 1; }
grep -q "another scheduler works its durable jobs (.*state.db-lock is held by process $pid)" \
  "$work/err2" || { echo "the refusal did not name the first server"; cat "$work/err2"; exit 1; }
kill -TERM "$pid"
wait "$pid"
start "$server" --state "$work/state.db"
kill -TERM "$pid"
wait "$pid"
pid=
echo "walk-through OK"
