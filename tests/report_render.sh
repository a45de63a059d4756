#!/usr/bin/env bash
# `fairgate sim --report` on the noisy-neighbour example, rendered by headless Chromium to PNG,
# and the PNG checked for being a picture rather than a blank page.
set -euo pipefail
fairgate=$1 check=$2 trace=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fairgate" sim "$trace" --report "$work/report" >/dev/null
# As root Chromium needs --no-sandbox; its own profile directory keeps runs apart.
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1040,900 \
  --screenshot="$work/shot.png" "file://$work/report/index.html" >/dev/null 2>&1 || true
[[ -s $work/shot.png ]] || { echo "chromium wrote no screenshot"; exit 1; }
"$check" "$work/shot.png"
