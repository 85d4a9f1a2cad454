#!/usr/bin/env bash
# Installs the real vLLM Router (PyPI `vllm-router`, pinned) into a private venv.
#
# Usage: scripts/install-router.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/router-venv with `python3 -m venv`,
#   installs vllm-router==$SRT_ROUTER_VERSION (default 0.1.17) with its
#   dependencies pinned by scripts/router-constraints.txt, checks that the
#   package imports at that version and that `vllm-router --help` works, and
#   links <tools>/bin/vllm-router to the venv's console script.
#   Prints the path of that link on stdout (logs go to stderr).
#
#   Idempotent: when the venv already holds the pinned version it only re-checks
#   and prints the path (well under a second). A venv that is broken (e.g. its
#   interpreter vanished) or holds another version is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR        where tools go (default <repo>/.tools, git-ignored)
#   SRT_PYTHON           interpreter used to create the venv (default python3)
#   SRT_ROUTER_VERSION   vllm-router version (default 0.1.17; the project's
#                        behaviour notes and tests are written against it)
#
# The PyPI wheel ships the Rust router as a PyO3 extension plus the Python
# argparse CLI; there is no standalone binary and no `--version` flag, which is
# why the version check goes through `import vllm_router`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUTER_VERSION="${SRT_ROUTER_VERSION:-0.1.17}"
TOOLS="$(tools_dir)"
VENV="$TOOLS/router-venv"
LINK="$TOOLS/bin/vllm-router"
# Pins for the Router's own dependencies (aiohttp, fastapi, uvicorn, ...).
CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/router-constraints.txt"

# Echoes the version vllm_router reports inside the venv, or nothing.
installed_version() {
    [[ -x "$VENV/bin/python" ]] || return 0
    "$VENV/bin/python" -c 'import vllm_router; print(vllm_router.__version__)' 2>/dev/null || true
}

# `vllm-router --help` must exit 0 and list the flags the project passes.
help_works() {
    local out
    out="$("$VENV/bin/vllm-router" --help 2>&1)" || return 1
    grep -q -- '--worker-urls' <<<"$out" && grep -q -- '--vllm-pd-disaggregation' <<<"$out"
}

link_ok() {
    [[ -L "$LINK" && "$(readlink "$LINK")" == "$VENV/bin/vllm-router" ]]
}

make_link() {
    mkdir -p "$TOOLS/bin"
    ln -sfn "$VENV/bin/vllm-router" "$LINK"
}

main() {
    local start
    start="$(now)"
    if [[ "$(installed_version)" == "$ROUTER_VERSION" ]] && link_ok && [[ -x "$VENV/bin/vllm-router" ]]; then
        log "vllm-router $ROUTER_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    venv_install "$VENV" vllm-router "$ROUTER_VERSION" "$CONSTRAINTS" "$(installed_version)"

    local current
    current="$(installed_version)"
    [[ "$current" == "$ROUTER_VERSION" ]] ||
        die "import vllm_router reports version '${current}', expected $ROUTER_VERSION"
    help_works || die "'$VENV/bin/vllm-router --help' failed"
    make_link
    log "vllm-router $ROUTER_VERSION installed in $VENV ($(elapsed_since "$start") s)"
    printf '%s\n' "$LINK"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
