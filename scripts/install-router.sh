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

pick_python() {
    local py="${SRT_PYTHON:-python3}"
    if ! have "$py"; then
        if [[ -x /root/.pyenv/shims/python3 ]]; then
            py=/root/.pyenv/shims/python3
        else
            die "no python3 found (set SRT_PYTHON)"
        fi
    fi
    "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' ||
        die "$py is older than 3.8, which vllm-router needs"
    if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
        # Debian's own interpreter ships venv/ensurepip separately.
        if [[ "$(command -v "$py")" == /usr/bin/* ]]; then
            apt_install python3-venv
        else
            die "$py lacks the venv/ensurepip modules"
        fi
    fi
    printf '%s\n' "$py"
}

main() {
    local start
    start="$(now)"
    if [[ "$(installed_version)" == "$ROUTER_VERSION" ]] && link_ok && [[ -x "$VENV/bin/vllm-router" ]]; then
        log "vllm-router $ROUTER_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    local py current
    current="$(installed_version)"
    if [[ -d "$VENV" && -z "$current" ]]; then
        log "removing broken venv $VENV"
        rm -rf "$VENV"
    fi
    if [[ ! -d "$VENV" ]]; then
        py="$(pick_python)"
        log "creating venv $VENV with $py ($("$py" --version 2>&1))"
        mkdir -p "$TOOLS"
        "$py" -m venv "$VENV"
    fi
    if [[ "$current" != "$ROUTER_VERSION" ]]; then
        log "installing vllm-router==$ROUTER_VERSION${current:+ (replacing $current)}"
        PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install \
            --quiet --no-input --constraint "$CONSTRAINTS" "vllm-router==$ROUTER_VERSION" >&2
    fi

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
