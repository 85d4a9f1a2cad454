#!/usr/bin/env bash
# Installs the Shepherd Model Gateway (PyPI `smg`, pinned) into a private venv.
#
# Usage: scripts/install-smg.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/smg-venv with `python3 -m venv`,
#   installs smg==$SRT_SMG_VERSION (default 1.13.0) with its dependencies
#   pinned by scripts/smg-constraints.txt, checks that the package reports that
#   version and that `smg launch --help` works, and links <tools>/bin/smg to
#   the venv's console script.
#   Prints the path of that link on stdout (logs go to stderr).
#
#   Idempotent: when the venv already holds the pinned version it only
#   re-checks and prints the path (well under a second). A venv that is broken
#   (e.g. its interpreter vanished) or holds another version is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR   where tools go (default <repo>/.tools)
#   SRT_PYTHON      interpreter used to create the venv (default python3)
#   SRT_SMG_VERSION smg version (default 1.13.0)
#
# Starting it: `smg launch <gateway args>` runs the gateway alone (the same as
# `python -m smg.launch_router <gateway args>`); `smg serve` would start
# workers too, which srt does itself.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SMG_VERSION="${SRT_SMG_VERSION:-1.13.0}"
TOOLS="$(tools_dir)"
VENV="$TOOLS/smg-venv"
LINK="$TOOLS/bin/smg"
# Pins for the gateway's own dependencies.
CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/smg-constraints.txt"

# Echoes the version smg's metadata reports inside the venv, or nothing.
installed_version() {
    [[ -x "$VENV/bin/python" ]] || return 0
    "$VENV/bin/python" -c 'import importlib.metadata as m, smg; print(m.version("smg"))' 2>/dev/null || true
}

# `smg launch --help` must exit 0 and list the flags the project passes.
help_works() {
    local out
    out="$("$VENV/bin/smg" launch --help 2>&1)" || return 1
    grep -q -- '--pd-disaggregation' <<<"$out" && grep -q -- '--prometheus-port' <<<"$out"
}

link_ok() {
    [[ -L "$LINK" && "$(readlink "$LINK")" == "$VENV/bin/smg" ]]
}

main() {
    local start
    start="$(now)"
    if [[ "$(installed_version)" == "$SMG_VERSION" ]] && link_ok && [[ -x "$VENV/bin/smg" ]]; then
        log "smg $SMG_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    venv_install "$VENV" smg "$SMG_VERSION" "$CONSTRAINTS" "$(installed_version)"

    local current
    current="$(installed_version)"
    [[ "$current" == "$SMG_VERSION" ]] ||
        die "smg in $VENV reports version '${current}', expected $SMG_VERSION"
    help_works || die "'$VENV/bin/smg launch --help' failed"
    mkdir -p "$TOOLS/bin"
    ln -sfn "$VENV/bin/smg" "$LINK"
    log "smg $SMG_VERSION installed in $VENV ($(elapsed_since "$start") s)"
    printf '%s\n' "$LINK"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
