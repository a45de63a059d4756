#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL server (Debian's postgresql-15) in a directory of its own,
# listening only on a Unix socket in that directory: for the tests of the PostgreSQL store.
#
#   scripts/pg_temp.sh start DIR   # initdb DIR/data, start it; prints the libpq connection string
#   scripts/pg_temp.sh stop DIR    # stops it at once, as a crash would
#   scripts/pg_temp.sh start-again DIR   # starts the stopped server on its data
#
# The server refuses to run as root; as root, it runs as the `postgres` user (which owns DIR).
# FAIRGATE_PG_CPUS (e.g. "1") pins the server to those CPUs with taskset, so that a benchmark
# pinned elsewhere does not compete with it. FAIRGATE_PG_TEMPLATE (a directory, e.g. in the build
# tree) keeps one freshly initialised data directory per server version there, made on first use,
# and `start` copies it instead of running initdb: the tests start a server each, and initdb is
# most of a start's time. FAIRGATE_PG_FSYNC=on starts the server with fsync on (PostgreSQL's
# default; off otherwise, as the tests want: their figures are not a disk's).
set -euo pipefail
command=${1:?start or stop}
dir=$(realpath "${2:?directory}")
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_server() {
  local pin=()
  if [[ -n ${FAIRGATE_PG_CPUS:-} ]]; then pin=(taskset -c "$FAIRGATE_PG_CPUS"); fi
  if [[ $(id -u) -eq 0 ]]; then "${pin[@]}" runuser -u postgres -- "$@"; else "${pin[@]}" "$@"; fi
}
case "$command" in
  start)
    if [[ $(id -u) -eq 0 ]]; then chown postgres: "$dir"; fi
    if [[ -n ${FAIRGATE_PG_TEMPLATE:-} ]]; then
      template="$FAIRGATE_PG_TEMPLATE/$(basename "$(dirname "$bin")")"
      if [[ ! -d $template ]]; then
        mkdir -p "$FAIRGATE_PG_TEMPLATE"
        fresh=$(mktemp -d "$template.XXXXXX")
        if [[ $(id -u) -eq 0 ]]; then chown postgres: "$fresh"; fi
        as_server "$bin/initdb" -D "$fresh/data" -A trust -U fairgate --no-sync \
          >"$dir/initdb.log" 2>&1
        # A concurrent start may have made it first: then this rename fails and that one is used.
        mv -T "$fresh/data" "$template" 2>/dev/null || true
        rm -rf "$fresh"
      fi
      cp -a "$template" "$dir/data"
    else
      as_server "$bin/initdb" -D "$dir/data" -A trust -U fairgate --no-sync >"$dir/initdb.log" 2>&1
    fi
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-k $dir -c listen_addresses= -c fsync=${FAIRGATE_PG_FSYNC:-off}" start >/dev/null
    echo "host=$dir dbname=postgres user=fairgate"
    ;;
  start-again)
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-k $dir -c listen_addresses= -c fsync=${FAIRGATE_PG_FSYNC:-off}" start >/dev/null
    ;;
  stop)
    as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    ;;
  *)
    echo "pg_temp.sh: unknown command '$command'" >&2
    exit 2
    ;;
esac
