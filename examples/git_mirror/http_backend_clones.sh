#!/usr/bin/env bash
# The workload of identical_clones.sh against git's own HTTP server instead of the mirror: git
# http-backend behind nginx and fcgiwrap, the way most people serve git over HTTP, with fcgiwrap's
# CAPACITY workers (as many git requests at once as the mirror's --capacity). Client A keeps
# CONCURRENCY identical clones of one repository in flight, client B clones a small one every
# 2 s. Prints A's clones per second, B's clone times, and the busy seconds of the servers' core
# (fcgiwrap's workers do not reap the git processes they start, so no process's counters hold
# git's time: the core's do). On loopback only.
#
# Needs nginx and fcgiwrap: bash scripts/setup.sh --peers (as root). The servers run on core 0
# and the load on core 1 (taskset), so that the load cannot starve them of CPU.
#
#   bash examples/git_mirror/http_backend_clones.sh [BUILD_DIR]     (default build/release)
# Knobs (environment): DURATION (s, default 30), CAPACITY (8), CONCURRENCY (1000), HEAVY_MIB (16).
set -euo pipefail
build=${1:-build/release}
source "$(dirname "$0")/load_setup.sh"
for tool in nginx fcgiwrap; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] ||
    { echo "needs $tool: bash scripts/setup.sh --peers" >&2; exit 2; }
done
export PATH=$PATH:/usr/sbin
duration=${DURATION:-30}
capacity=${CAPACITY:-8}
concurrency=${CONCURRENCY:-1000}
heavy_mib=${HEAVY_MIB:-16}

mkdir -p "$work/src" "$work/repos" "$work/nginx"
make_repositories "$work/src" "$heavy_mib"
git clone --quiet --bare "$work/src/heavy.git" "$work/repos/heavy.git"
git clone --quiet --bare "$work/src/light.git" "$work/repos/light.git"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/nginx/nginx.conf" <<CONF
user $(id -un);
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  fastcgi_temp_path $work/nginx/fastcgi;
  proxy_temp_path $work/nginx/proxy;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  server {
    listen 127.0.0.1:$port;
    client_max_body_size 0;
    location / {
      include /etc/nginx/fastcgi_params;
      fastcgi_pass unix:$work/nginx/fcgiwrap.sock;
      fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;
      fastcgi_param GIT_PROJECT_ROOT $work/repos;
      fastcgi_param GIT_HTTP_EXPORT_ALL "";
      fastcgi_param PATH_INFO \$uri;
    }
  }
}
CONF

stop_servers() {
  [[ -f $work/nginx/nginx.pid ]] && kill -TERM "$(cat "$work/nginx/nginx.pid")" 2>/dev/null || true
  # Its workers first, then itself: only this script's fcgiwrap, not any other on the machine.
  [[ -n ${fcgi:-} ]] && { pkill -TERM -P "$fcgi" 2>/dev/null; kill -TERM "$fcgi" 2>/dev/null; } || true
}
trap 'stop_servers; cleanup' EXIT

taskset -c "$server_cpu" fcgiwrap -c "$capacity" -s "unix:$work/nginx/fcgiwrap.sock" &
fcgi=$!
taskset -c "$server_cpu" nginx -c "$work/nginx/nginx.conf" -g 'daemon on;' -e "$work/nginx/error.log"
for _ in $(seq 100); do [[ -S $work/nginx/fcgiwrap.sock ]] && break; sleep 0.05; done
git clone --quiet "http://127.0.0.1:$port/heavy.git" "$work/warm" && rm -rf "$work/warm"
busy_before=$(core_busy_seconds "$server_cpu")
echo "== git http-backend (nginx, fcgiwrap -c $capacity), A at $concurrency identical clones in flight"
taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
  --heavy-concurrency "$concurrency" --duration "$duration" --light-interval 2 --warmup 5 \
  --client-header X-Client --work-dir "$work/clones" | tee "$work/report" || true
busy_after=$(core_busy_seconds "$server_cpu")
echo "server core busy seconds (nginx, fcgiwrap and git): $(awk -v a="$busy_before" -v b="$busy_after" 'BEGIN { printf "%.1f", b - a }')"
