#!/usr/bin/env bash
# The main job: builds fairgate and replays the bundled scenarios through `fairgate sim`,
# printing per scenario a table of each fairness key's jobs and its mean and worst wait.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >/dev/null
exec build/release/fairgate sim tests/data/scenarios/*.json "$@"
