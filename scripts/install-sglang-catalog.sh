#!/usr/bin/env bash
# Installs SGLang (PyPI `sglang`, pinned) into a private venv with just what
# importing its server options takes, so that scripts/flag-catalogs.sh can
# dump the flag catalog of `python3 -m sglang.launch_server` from SGLang's own
# parser (ServerArgs.add_cli_args). The venv cannot serve a model: SGLang's
# GPU kernels and most of its dependencies are left out.
#
# Usage: scripts/install-sglang-catalog.sh
#
#   Creates ${SRT_TOOLS_DIR:-<repo>/.tools}/sglang-catalog-venv and installs,
#   in order:
#     1. torch==$SRT_SGLANG_TORCH_VERSION (default 2.14.1, what sglang pins)
#        from PyPI, with its own dependencies;
#     2. sglang==$SRT_SGLANG_VERSION (default 0.5.23) with --no-deps;
#     3. the packages that importing sglang.srt.server_args and running
#        prepare_server_args loads (found by listing the modules loaded from
#        site-packages after doing so): numpy, pydantic, starlette, orjson,
#        msgspec, pyzmq, psutil, requests, pillow, pybase64, packaging,
#        aiohttp, tqdm, ipython; an older release imports more at the top of
#        server_args (its `case` arm below lists what, with the transformers
#        and torchvision it takes);
#   all of it pinned by scripts/sglang[-<version>]-constraints.txt (a pip freeze of such
#   an install, minus sglang). Then it checks that prepare_server_args builds
#   the parser (with --disaggregation-mode and --dist-init-addr). Prints the
#   venv's path on stdout (logs go to stderr).
#
#   Opt-in: about 3.5 GB of downloads, ~6 GB on disk, a few minutes. It is
#   not one of install-deps.sh's parts: only `scripts/flag-catalogs.sh sglang`
#   needs it.
#
#   Idempotent: when the venv already holds the pinned versions it only
#   re-checks package metadata (no torch import; well under a second) and
#   prints the path. A venv whose interpreter is gone is rebuilt.
#
# Environment:
#   SRT_TOOLS_DIR             where tools go (default <repo>/.tools, git-ignored)
#   SRT_PYTHON                interpreter for the venv (default python3; 3.11-3.13)
#   SRT_SGLANG_VERSION        sglang version: 0.5.23 (the default), 0.5.13.post1,
#                             0.5.12, 0.5.11, 0.5.8 or 0.5.7; the venv is
#                             sglang-catalog-venv for 0.5.23, else
#                             sglang-<version>-catalog-venv
#   SRT_SGLANG_TORCH_VERSION  torch version (default: what that sglang pins:
#                             2.14.1 for 0.5.23, 2.11.0 for 0.5.11 to
#                             0.5.13.post1, 2.9.1 for 0.5.7 and 0.5.8)
#
# Why the detours:
#   - sglang declares ~80 requirements (flashinfer, sgl-kernel, deep-gemm,
#     transformers, ...), several of them CUDA-only builds; its option
#     parser needs none of them.
#   - PyPI's torch for Linux x86_64 is a CUDA build (a 555 MB wheel) that
#     refuses to import without the nvidia-* and cuda-toolkit wheels it
#     declares (torch/__init__.py preloads libcublas, libcudnn, libnccl, ...;
#     with --no-deps: "ValueError: libcublasLt.so.*[0-9] not found"), and
#     the CPU build lives on the PyTorch index, not on PyPI. So torch comes
#     with its dependencies (~3.2 GB of nvidia libraries, triton 0.9 GB);
#     sglang.srt.utils.common imports triton at the top, so triton stays.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SGLANG_VERSION="${SRT_SGLANG_VERSION:-0.5.23}"
TOOLS="$(tools_dir)"
VENV="$(sglang_catalog_venv "$SGLANG_VERSION")"
# What importing ServerArgs and parsing with prepare_server_args loads, per release
# (an older one imports more of SGLang at the top of server_args), with the torch
# it pins and its constraints file.
IMPORT_DEPS=(numpy pydantic starlette orjson msgspec pyzmq psutil requests pillow pybase64 packaging aiohttp tqdm ipython)
case "$SGLANG_VERSION" in
0.5.23)
    TORCH_VERSION=2.14.1
    CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/sglang-constraints.txt"
    ;;
0.5.8)
    TORCH_VERSION=2.9.1
    IMPORT_DEPS+=(safetensors openai partial_json_parser huggingface_hub dill sentencepiece
        "transformers==4.57.1" "torchvision==0.24.1")
    CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/sglang-0.5.8-constraints.txt"
    ;;
0.5.7)
    TORCH_VERSION=2.9.1
    IMPORT_DEPS+=(safetensors fastapi openai partial_json_parser huggingface_hub dill sentencepiece
        "transformers==4.57.1" "torchvision==0.24.1")
    CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/sglang-0.5.7-constraints.txt"
    ;;
0.5.11 | 0.5.12)
    TORCH_VERSION=2.11.0
    IMPORT_DEPS+=(openai partial_json_parser dill sentencepiece "transformers==5.6.0" "torchvision==0.26.0")
    CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/sglang-$SGLANG_VERSION-constraints.txt"
    ;;
0.5.13.post1)
    TORCH_VERSION=2.11.0
    IMPORT_DEPS+=(openai partial_json_parser dill sentencepiece "transformers==5.8.1" "torchvision==0.26.0")
    CONSTRAINTS="$(dirname "${BASH_SOURCE[0]}")/sglang-0.5.13.post1-constraints.txt"
    ;;
*) die "no recipe for sglang $SGLANG_VERSION's option parser here" \
    "(known: 0.5.23, 0.5.13.post1, 0.5.12, 0.5.11, 0.5.8, 0.5.7)" ;;
esac
TORCH_VERSION="${SRT_SGLANG_TORCH_VERSION:-$TORCH_VERSION}"
PIP=(env PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install --quiet --no-input)

complete() {
    [[ "$(venv_versions "$VENV/bin/python" sglang torch)" == "$SGLANG_VERSION $TORCH_VERSION" ]]
}

# prepare_server_args must build its parser; exits non-zero otherwise.
parser_works() {
    "$VENV/bin/python" -B - <<'PY' >&2
import argparse
import sys

captured = []
original = argparse.ArgumentParser.parse_args


def spy(self, *args, **kwargs):
    captured.append(self)
    raise SystemExit(0)


argparse.ArgumentParser.parse_args = spy
from sglang.srt.server_args import prepare_server_args

try:
    prepare_server_args([])
except SystemExit:
    pass
flags = {f for a in captured[0]._actions for f in a.option_strings} if captured else set()
missing = {"--disaggregation-mode", "--dist-init-addr", "--model-path"} - flags
if missing:
    sys.exit(f"prepare_server_args' parser lacks {sorted(missing)}")
print(f"prepare_server_args' parser has {len(flags)} option strings")
PY
}

main() {
    local start
    start="$(now)"
    if complete; then
        log "sglang $SGLANG_VERSION already installed ($(elapsed_since "$start") s)"
        printf '%s\n' "$VENV"
        return 0
    fi

    if [[ -d "$VENV" && ! -x "$VENV/bin/python" ]]; then
        log "removing broken venv $VENV"
        rm -rf "$VENV"
    fi
    if [[ ! -d "$VENV" ]]; then
        local py
        py="$(pick_python 3.11 3.14 sglang)"
        log "creating venv $VENV with $py ($("$py" --version 2>&1))"
        mkdir -p "$TOOLS"
        "$py" -m venv "$VENV"
    fi

    local -a cons
    mapfile -t cons < <(constraint_args "$CONSTRAINTS")
    log "installing torch==$TORCH_VERSION (with its nvidia-* wheels and triton: ~3.5 GB, a few minutes)"
    "${PIP[@]}" "${cons[@]}" "torch==$TORCH_VERSION" >&2
    log "installing sglang==$SGLANG_VERSION without dependencies"
    "${PIP[@]}" "${cons[@]}" --no-deps "sglang==$SGLANG_VERSION" >&2
    # pip then reports sglang's other requirements as missing, and `pip check`
    # keeps doing so: expected, they are left out on purpose.
    log "installing the ${#IMPORT_DEPS[@]} packages its option parser imports"
    "${PIP[@]}" "${cons[@]}" "${IMPORT_DEPS[@]}" "torch==$TORCH_VERSION" >&2

    complete || die "installed versions are '$(venv_versions "$VENV/bin/python" sglang torch)'," \
        "expected '$SGLANG_VERSION $TORCH_VERSION'"
    parser_works || die "sglang's prepare_server_args does not build its parser in $VENV"
    log "sglang $SGLANG_VERSION installed in $VENV ($(du -sh "$VENV" | cut -f1), $(elapsed_since "$start") s)"
    printf '%s\n' "$VENV"
}

case "${1:-}" in
"") main ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown argument '$1' (usage: $0 [--help])" ;;
esac
