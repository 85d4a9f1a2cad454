#!/usr/bin/env bash
# Runs every ```sh block of a Markdown page, in order, from the repository root, in one
# bash session with `set -euo pipefail`, so a page of instructions cannot go stale.
# State goes to a temporary directory (SRT_STATE_DIR), removed afterwards.
#
# Usage: scripts/doc-test.sh docs/getting-started.md
set -euo pipefail
page="${1:?usage: scripts/doc-test.sh PAGE.md}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
state="$(mktemp -d)"
script="$(mktemp)"
trap 'rm -rf "$state" "$script"' EXIT
{
    echo 'set -euo pipefail'
    echo "export SRT_STATE_DIR='$state'"
    echo 'export SRT_SIM_STARTUP_DELAY_MS=200'
    awk '/^```sh$/ {on=1; next} /^```$/ {on=0; next} on {print}' "$page"
} > "$script"
echo "[doc-test] running $(grep -c '' "$script") lines from $page" >&2
bash "$script"
echo "[doc-test] $page: every command succeeded" >&2
