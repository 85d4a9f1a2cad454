#!/usr/bin/env bash
# Installs NVIDIA Dynamo (PyPI `ai-dynamo` and `ai-dynamo-runtime`, pinned)
# into a private venv, from PyPI alone.
#
# Usage: scripts/install-dynamo.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/dynamo-venv and installs, in order:
#     1. ai-dynamo-runtime==$SRT_DYNAMO_VERSION (default 1.6.1; the Rust
#        runtime, a 75 MB abi3 wheel) with its dependencies;
#     2. ai-dynamo==$SRT_DYNAMO_VERSION (pure Python) with --no-deps;
#     3. the Requires-Dist lines of that wheel's own METADATA, minus
#        `aisimulate` and the engine extras ([vllm], [sglang], [trtllm]);
#   all of it pinned by scripts/dynamo-constraints.txt (a pip freeze of such
#   an install). Then it checks that `python -m dynamo.frontend --help` and
#   `python -m dynamo.mocker --help` work and writes the launcher
#   <tools>/bin/dynamo-python, which runs the venv's interpreter (see below).
#   Prints the launcher's path on stdout (logs go to stderr).
#
#   Idempotent: when the venv already holds the pinned versions it only
#   re-checks package metadata (no import of the runtime; well under a second)
#   and prints the path. A venv whose interpreter is gone is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR        where tools go (default <repo>/.tools, git-ignored)
#   SRT_PYTHON           interpreter for the venv (default python3; >= 3.10)
#   SRT_DYNAMO_VERSION   ai-dynamo and ai-dynamo-runtime version (default 1.6.1)
#
# Why the detour: on Python 3.11-3.13 ai-dynamo requires `aisimulate==0.13.0`,
# a placeholder sdist whose build downloads the real wheel from another index;
# here that build fails ("metadata-generation-failed"). Only the planner's
# simulation estimators import it; the frontend, the mocker and the engine
# wrappers run without it. So ai-dynamo goes in with --no-deps and its other
# requirements are installed from its own metadata, aisimulate left out: pip
# never builds or downloads it. pip's resolver then prints an ERROR line that
# "ai-dynamo 1.6.1 requires aisimulate==0.13.0, which is not installed", and
# `pip check` says the same: expected.
#
# Cost (2 cores, no pip cache): ~2.3 minutes cold, about 90 MB of wheels
# (ai-dynamo-runtime 75 MB, ai-dynamo 4 MB, transformers, numpy, kubernetes,
# ...), a ~690 MB venv (249 MB of it the dynamo package itself, 129 MB
# transformers); ~0.3 s when already installed.
#
# How srt starts it: the Dynamo programs are Python modules, not console
# scripts (`python3 -m dynamo.frontend`, `python3 -m dynamo.mocker`,
# `python3 -m dynamo.vllm`; srtctl runs them so). srt's launch plan shows that
# real command with one launcher for every Dynamo program:
# `dynamo-python -m dynamo.frontend --http-port ...`, found on PATH like
# `vllm-router` (<tools>/bin). <tools>/bin/dynamo-python is a two-line shell
# script, `exec <venv>/bin/python "$@"`, not a symlink: a venv's interpreter
# finds its site-packages through the pyvenv.cfg next to the path it was
# started by, so a symlink to it from another directory starts the base
# Python without the venv (checked: sys.prefix is then the base install).
# exec keeps the pid, so the process srt started is the Python process itself
# (its /proc cmdline shows <venv>/bin/python -m dynamo.frontend ...). The venv
# holds no engine (`dynamo.vllm` needs vLLM next to it: a later choice).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DYNAMO_VERSION="${SRT_DYNAMO_VERSION:-1.6.1}"
TOOLS="$(tools_dir)"
VENV="$TOOLS/dynamo-venv"
LINK="$TOOLS/bin/dynamo-python"
CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/dynamo-constraints.txt"
# pip's default index (PyPI), as in the other install scripts; no extra index.
PIP=(env PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install --quiet --no-input)

# Prints "<ai-dynamo version> <ai-dynamo-runtime version>", or nothing.
installed_versions() {
    venv_versions "$VENV/bin/python" ai-dynamo ai-dynamo-runtime
}

# The launcher's text: the venv's interpreter, same pid, same arguments.
launcher_text() {
    printf '#!/bin/sh\n# Written by scripts/install-dynamo.sh: runs the Dynamo venv'"'"'s Python.\nexec %q "$@"\n' "$VENV/bin/python"
}

launcher_ok() {
    [[ -f "$LINK" && -x "$LINK" && ! -L "$LINK" && "$(cat "$LINK")" == "$(launcher_text)" ]]
}

write_launcher() {
    mkdir -p "$TOOLS/bin"
    local tmp="$LINK.tmp.$$"
    launcher_text >"$tmp"
    chmod 755 "$tmp"
    mv -f "$tmp" "$LINK"
}

complete() {
    [[ "$(installed_versions)" == "$DYNAMO_VERSION $DYNAMO_VERSION" ]] && launcher_ok && model_ok
}

# The tiny model's tokenizer and config (no weights), which the Dynamo mocker
# reads to tokenize and describe the model: <tools>/models/tiny.
MODEL="$TOOLS/models/tiny"
model_ok() {
    [[ -f "$MODEL/tokenizer.json" && -f "$MODEL/config.json" ]]
}
write_model() {
    "$VENV/bin/python" "$(dirname "${BASH_SOURCE[0]}")/make-tiny-model.py" --config-only "$MODEL" >&2 ||
        die "writing the tiny model's tokenizer into $MODEL failed"
}

# ai-dynamo's requirements but aisimulate (never installed: its build fetches
# from another index) and ai-dynamo-runtime (installed first).
dynamo_requirements() {
    wheel_requirements "$VENV/bin/python" ai-dynamo aisimulate ai-dynamo-runtime
}

# `python -m dynamo.<module> --help` must exit 0 and list FLAG.
help_works() {
    local module="$1" flag="$2" out
    out="$("$VENV/bin/python" -m "dynamo.$module" --help 2>&1)" || {
        tail -n 20 <<<"$out" >&2
        return 1
    }
    grep -q -- "$flag" <<<"$out"
}

main() {
    local start
    start="$(now)"
    if [[ "$(installed_versions)" == "$DYNAMO_VERSION $DYNAMO_VERSION" ]] && launcher_ok && ! model_ok; then
        write_model
    fi
    if complete; then
        log "ai-dynamo $DYNAMO_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    if [[ -d "$VENV" && ! -x "$VENV/bin/python" ]]; then
        log "removing broken venv $VENV"
        rm -rf "$VENV"
    fi
    if [[ ! -d "$VENV" ]]; then
        local py
        py="$(pick_python 3.10 "" ai-dynamo)"
        log "creating venv $VENV with $py ($("$py" --version 2>&1))"
        mkdir -p "$TOOLS"
        "$py" -m venv "$VENV"
    fi

    local -a cons
    mapfile -t cons < <(constraint_args "$CONSTRAINTS")
    log "installing ai-dynamo-runtime==$DYNAMO_VERSION"
    "${PIP[@]}" "${cons[@]}" "ai-dynamo-runtime==$DYNAMO_VERSION" >&2
    log "installing ai-dynamo==$DYNAMO_VERSION without dependencies"
    "${PIP[@]}" "${cons[@]}" --no-deps "ai-dynamo==$DYNAMO_VERSION" >&2

    local -a reqs
    mapfile -t reqs < <(dynamo_requirements)
    ((${#reqs[@]})) || die "ai-dynamo $DYNAMO_VERSION declares no requirements (metadata unreadable?)"
    log "installing ai-dynamo's ${#reqs[@]} declared requirements (aisimulate left out)"
    "${PIP[@]}" "${cons[@]}" "${reqs[@]}" "ai-dynamo-runtime==$DYNAMO_VERSION" >&2

    local v
    v="$(installed_versions)"
    [[ "$v" == "$DYNAMO_VERSION $DYNAMO_VERSION" ]] ||
        die "installed versions are '$v', expected '$DYNAMO_VERSION $DYNAMO_VERSION'"
    help_works frontend --http-port || die "'$VENV/bin/python -m dynamo.frontend --help' failed"
    help_works mocker --model-path || die "'$VENV/bin/python -m dynamo.mocker --help' failed"
    write_launcher
    write_model
    "$LINK" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' ||
        die "$LINK does not start the venv's interpreter"
    log "ai-dynamo $DYNAMO_VERSION installed in $VENV ($(du -sh "$VENV" | cut -f1), $(elapsed_since "$start") s)"
    printf '%s\n' "$LINK"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
