#!/usr/bin/env bash
# Installs NVIDIA's aiperf (PyPI `aiperf`, pinned) into a private venv: the
# benchmark client srtctl's `mooncake-router` benchmark runs, which srt runs the
# same way (tests/e2e_bench.rs runs it for real against the simulated workers).
#
# Usage: scripts/install-aiperf.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/aiperf-venv with `python3 -m venv`,
#   installs aiperf==$SRT_AIPERF_VERSION (default 0.8.0) with its dependencies
#   pinned by scripts/aiperf-constraints.txt, checks that the package reports
#   that version and that `aiperf profile --help` lists the flags srt passes,
#   and links <tools>/bin/aiperf to the venv's console script.
#   Prints the path of that link on stdout (logs go to stderr).
#
#   Why 0.8.0: aiperf 0.9.0 to 0.13.0 cannot load a tokenizer from a local
#   directory in the worker processes that build a trace's prompts (they force
#   Hugging Face's offline mode and then look the path up as a Hub id), so a
#   trace replay with a model on disk fails before its first request.
#
#   Idempotent: when the venv already holds the pinned version it only
#   re-checks and prints the path. A venv that is broken or holds another
#   version is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR       where tools go (default <repo>/.tools)
#   SRT_PYTHON          interpreter used to create the venv (default python3)
#   SRT_AIPERF_VERSION  aiperf version (default 0.8.0)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

AIPERF_VERSION="${SRT_AIPERF_VERSION:-0.8.0}"
TOOLS="$(tools_dir)"
VENV="$TOOLS/aiperf-venv"
LINK="$TOOLS/bin/aiperf"
CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/aiperf-constraints.txt"

# Echoes the version aiperf's metadata reports inside the venv, or nothing.
installed_version() {
    [[ -x "$VENV/bin/python" ]] || return 0
    "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("aiperf"))' 2>/dev/null || true
}

# `aiperf profile --help` must exit 0 and list the flags srt passes.
help_works() {
    local out
    out="$("$VENV/bin/aiperf" profile --help 2>&1)" || return 1
    grep -q -- '--custom-dataset-type' <<<"$out" && grep -q -- '--fixed-schedule' <<<"$out" &&
        grep -q -- '--goodput' <<<"$out"
}

link_ok() {
    [[ -L "$LINK" && "$(readlink "$LINK")" == "$VENV/bin/aiperf" ]]
}

main() {
    local start
    start="$(now)"
    if [[ "$(installed_version)" == "$AIPERF_VERSION" ]] && link_ok && [[ -x "$VENV/bin/aiperf" ]]; then
        log "aiperf $AIPERF_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    venv_install "$VENV" aiperf "$AIPERF_VERSION" "$CONSTRAINTS" "$(installed_version)"

    local current
    current="$(installed_version)"
    [[ "$current" == "$AIPERF_VERSION" ]] ||
        die "aiperf in $VENV reports version '${current}', expected $AIPERF_VERSION"
    help_works || die "'$VENV/bin/aiperf profile --help' failed or lacks srt's flags"
    mkdir -p "$TOOLS/bin"
    ln -sfn "$VENV/bin/aiperf" "$LINK"
    log "aiperf $AIPERF_VERSION installed in $VENV ($(elapsed_since "$start") s)"
    printf '%s\n' "$LINK"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
