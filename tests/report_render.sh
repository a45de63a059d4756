#!/usr/bin/env bash
# `fairgate sim --report` rendered by headless Chromium to PNG, each PNG checked for being a
# picture rather than a blank page: the noisy-neighbour example, and a trace of capacity 1,000
# (a client that starts 400 clones beside 99 others), whose page must stay as short as the
# report's bound says (sim/report.h: the slots that ran, 40 rows at most, 20 keys) and so fit the
# window.
#
#   report_render.sh FAIRGATE CHECK TRACE [SHOTS_DIR]
#
# With SHOTS_DIR, the two screenshots are kept there (report-noisy-neighbour.png,
# report-capacity-1000.png): how docs/'s pictures are made.
set -euo pipefail
fairgate=$1 check=$2 trace=$3 shots=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

wide=$work/generated/capacity-1000.json
mkdir -p "$work/generated"
{
  printf '{"mode": "default", "capacity": 1000, "types": {'
  printf '"clone": {"priority": 1000, "max_concurrency": 250, "default_cost": 5}, '
  printf '"fetch": {"priority": 1000, "max_concurrency": 1000, "default_cost": 2}, '
  printf '"repack": {"priority": 1000, "max_concurrency": 20, "default_cost": 10}}, "jobs": ['
  # One heavy client starts 400 clones in 4 s; 99 others a fetch and a repack each.
  for i in $(seq 0 399); do
    (( i > 0 )) && printf ', '
    printf '{"type": "clone", "id": "r%d", "key": "heavy", "arrival": %d.%02d, "duration": %d}' \
      $((i % 37)) $((i / 100)) $((i % 100)) $((3 + i % 5))
  done
  for c in $(seq 1 99); do
    printf ', {"type": "fetch", "id": "r%d", "key": "client-%d", "arrival": %d.%d, "duration": 1}' \
      $((c % 37)) "$c" $((c % 6)) $((c % 10))
    printf ', {"type": "repack", "id": "s%d", "key": "client-%d", "arrival": %d.5, "duration": 2}' \
      "$c" "$c" $((c % 6))
  done
  printf ']}\n'
} >"$wide"

# Renders report $1 (from trace $2) in a window of 1040 x $3 and checks the picture, whose
# content must end above row $4.
render() {
  local name=$1 input=$2 height=$3 max=$4
  # Run where the trace is copied, so that the page's title is the trace's name alone.
  cp "$input" "$work/$name.json"
  (cd "$work" && "$fairgate" sim "$name.json" --report "$name" >/dev/null)
  shoot "$name" "$height"
  local verdict
  verdict=$("$check" "$work/$name.png" "$max") || { echo "$name: $verdict"; exit 1; }
  echo "$name: $verdict"
  if [[ -n $shots ]]; then  # again, in a window as tall as the content
    local content=${verdict##*content ends at row }
    shoot "$name" $((content + 24))
    cp "$work/$name.png" "$shots/report-$name.png"
  fi
}

# Screenshots page $1 in a window of 1040 x $2 into $work/$1.png.
shoot() {
  rm -f "$work/$1.png"
  # As root Chromium needs --no-sandbox; its own profile directory keeps runs apart.
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/profile-$1" --window-size=1040,"$2" \
    --screenshot="$work/$1.png" "file://$work/$1/index.html" >/dev/null 2>&1 || true
  [[ -s $work/$1.png ]] || { echo "$1: chromium wrote no screenshot"; exit 1; }
}
render noisy-neighbour "$trace" 1500 1500
# The bound: the head and the tables (20 keys, 3 types) under 900 px, the timeline at most
# 10 + 40 x 22 + 40 px and the waits 10 + 20 x 22 + 40, each with its heading and note: less
# than 2,600 in all.
render capacity-1000 "$wide" 3200 2600
