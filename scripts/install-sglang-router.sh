#!/usr/bin/env bash
# Installs the SGLang router (PyPI `sglang-router`, pinned) into a private venv.
#
# Usage: scripts/install-sglang-router.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/sglang-router-venv with
#   `python3 -m venv`, installs sglang-router==$SRT_SGLANG_ROUTER_VERSION
#   (default 0.3.2) with its dependencies pinned by
#   scripts/sglang-router-constraints.txt, checks that the package imports at
#   that version and that `sglang-router launch --help` works, and links
#   <tools>/bin/sglang-router to the venv's console script.
#   Prints the path of that link on stdout (logs go to stderr).
#
#   Idempotent: when the venv already holds the pinned version it only
#   re-checks and prints the path (well under a second). A venv that is broken
#   (e.g. its interpreter vanished) or holds another version is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR               where tools go (default <repo>/.tools)
#   SRT_PYTHON                  interpreter used to create the venv (default python3)
#   SRT_SGLANG_ROUTER_VERSION   sglang-router version (default 0.3.2)
#
# Starting it: the console scripts `sglang-router`, `smg` and `amg` are all
# `sglang_router.cli:main`, which has subcommands (`launch`, `server`).
# Start the router with `sglang-router launch <router args>` (the same as
# `python -m sglang_router.launch_router <router args>`). Checked with 0.3.2:
# without a subcommand (`sglang-router --host ...`) it prints the top-level
# usage and exits 1, because cli.main only accepts `launch`, `server`, `-h`,
# `--help`, `--version`, `-V` or `--version-verbose` as the first argument.
# `sglang-router --version` prints `sgl-model-gateway 0.3.2`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUTER_VERSION="${SRT_SGLANG_ROUTER_VERSION:-0.3.2}"
TOOLS="$(tools_dir)"
VENV="$TOOLS/sglang-router-venv"
LINK="$TOOLS/bin/sglang-router"
# Pins for the router's own dependencies.
CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/sglang-router-constraints.txt"

# Echoes the version sglang-router's metadata reports inside the venv, or nothing.
installed_version() {
    [[ -x "$VENV/bin/python" ]] || return 0
    "$VENV/bin/python" -c 'import importlib.metadata as m, sglang_router; print(m.version("sglang-router"))' 2>/dev/null || true
}

# `sglang-router launch --help` must exit 0 and list the flags the project passes.
help_works() {
    local out
    out="$("$VENV/bin/sglang-router" launch --help 2>&1)" || return 1
    grep -q -- '--worker-urls' <<<"$out" && grep -q -- '--pd-disaggregation' <<<"$out"
}

link_ok() {
    [[ -L "$LINK" && "$(readlink "$LINK")" == "$VENV/bin/sglang-router" ]]
}

main() {
    local start
    start="$(now)"
    if [[ "$(installed_version)" == "$ROUTER_VERSION" ]] && link_ok && [[ -x "$VENV/bin/sglang-router" ]]; then
        log "sglang-router $ROUTER_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    venv_install "$VENV" sglang-router "$ROUTER_VERSION" "$CONSTRAINTS" "$(installed_version)"

    local current
    current="$(installed_version)"
    [[ "$current" == "$ROUTER_VERSION" ]] ||
        die "sglang-router in $VENV reports version '${current}', expected $ROUTER_VERSION"
    help_works || die "'$VENV/bin/sglang-router launch --help' failed"
    mkdir -p "$TOOLS/bin"
    ln -sfn "$VENV/bin/sglang-router" "$LINK"
    log "sglang-router $ROUTER_VERSION installed in $VENV ($(elapsed_since "$start") s)"
    printf '%s\n' "$LINK"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
