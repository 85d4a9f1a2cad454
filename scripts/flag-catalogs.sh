#!/usr/bin/env bash
# Writes the flag catalogs of the pinned real programs, read from each
# program's own argparse parser by scripts/flag-catalog.py, or, for the Go
# programs etcd and nats-server, probed from the program by
# scripts/go-flag-catalog.py, or, for aiperf (a cyclopts application), read
# from its argument collection by scripts/aiperf-catalog.py.
#
# Usage: scripts/flag-catalogs.sh [--check] [PROGRAM...]
#
#   PROGRAM is vllm, vllm-router, sglang-router, smg, sglang, sglang-run-eval,
#   aiperf, dynamo-frontend, dynamo-mocker, dynamo-vllm, dynamo-sglang, dynamo-trtllm,
#   etcd or nats-server (default: all of them).
#   Each runs with the interpreter of that program's venv under
#   ${SRT_TOOLS_DIR:-<repo>/.tools}:
#     vllm           vllm-venv           (scripts/install-vllm.sh)
#                    -> crates/srt/src/engine/vllm/catalog/vllm-<version>.json
#     vllm-router    router-venv         (scripts/install-router.sh)
#                    -> crates/srt/src/frontend/vllm_router/catalog/vllm-router-<version>.json
#     sglang-router  sglang-router-venv  (scripts/install-sglang-router.sh)
#                    -> crates/srt/src/frontend/sglang_router/catalog/sglang-router-<version>.json
#     smg            smg-venv            (scripts/install-smg.sh)
#                    -> crates/srt/src/frontend/smg/catalog/smg-<version>.json
#     sglang         sglang-catalog-venv, or for SRT_SGLANG_VERSION=V
#                    sglang-V-catalog-venv (scripts/install-sglang-catalog.sh)
#                    -> crates/srt/src/engine/sglang/catalog/sglang-<version>.json
#                    (`python3 -m sglang.launch_server`: ServerArgs' options)
#     sglang-run-eval  sglang-catalog-venv (the same install)
#                    -> crates/srt/src/bench/catalog/sglang-run-eval-<version>.json
#                    (`python3 -m sglang.test.run_eval`, SGLang's accuracy
#                    harness: srtctl's gsm8k and gpqa benchmarks)
#     aiperf         aiperf-venv         (scripts/install-aiperf.sh)
#                    -> crates/srt/src/bench/catalog/aiperf-<version>.json
#                    (`aiperf profile`: srtctl's mooncake-router benchmark)
#     dynamo-frontend, dynamo-mocker, dynamo-vllm, dynamo-sglang, dynamo-trtllm
#                    dynamo-venv         (scripts/install-dynamo.sh)
#                    -> crates/srt/src/frontend/dynamo/catalog/<program>-<version>.json
#                    (`python3 -m dynamo.frontend`, `python3 -m dynamo.mocker`
#                    and the Dynamo-own options of `python3 -m dynamo.vllm`,
#                    `python3 -m dynamo.sglang` and `python3 -m dynamo.trtllm`;
#                    <version> is ai-dynamo's; see scripts/real_parsers.py).
#                    SRT_DYNAMO_VENV names another venv: the frontend's catalogs
#                    of older releases (0.8.0 to 1.3.1) come from one per release,
#                    `python3 -m venv V && V/bin/pip install ai-dynamo==X
#                    ai-dynamo-runtime==X`, then
#                    `SRT_DYNAMO_VENV=V scripts/flag-catalogs.sh dynamo-frontend`.
#                    dynamo-sglang imports SGLang from sglang-catalog-venv when
#                    it is installed, else stand-ins (the same catalog either
#                    way); dynamo-trtllm runs with stand-ins for the TensorRT-LLM
#                    names it imports (TensorRT-LLM is not installed).
#     etcd, nats-server  Debian's etcd-server and nats-server
#                    (scripts/install-deps.sh etcd nats), run with the
#                    system python3 -> crates/srt/src/frontend/dynamo/catalog/
#                    <program>-<version>.json ("syntax": "go-flag")
#   <version> is the installed release, so a catalog records the program that
#   produced it. Spot checks (abbreviations, underscores, a few key options)
#   are printed on stderr. A program whose venv is missing is an error.
#
#   --check  writes nothing; exits 1 if a committed catalog differs from
#            what the installed program gives (catalogs are deterministic).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(repo_root)"
TOOLS="$(tools_dir)"
ALL_PROGRAMS=(vllm vllm-router sglang-router smg sglang sglang-run-eval aiperf dynamo-frontend dynamo-mocker dynamo-vllm dynamo-sglang dynamo-trtllm etcd nats-server)

venv_of() {
    case "$1" in
    vllm) printf '%s\n' "$TOOLS/vllm-venv" ;;
    vllm-router) printf '%s\n' "$TOOLS/router-venv" ;;
    sglang-router) printf '%s\n' "$TOOLS/sglang-router-venv" ;;
    smg) printf '%s\n' "$TOOLS/smg-venv" ;;
    aiperf) printf '%s\n' "$TOOLS/aiperf-venv" ;;
    sglang | sglang-run-eval) sglang_catalog_venv "${SRT_SGLANG_VERSION:-0.5.23}" ;;
    dynamo-frontend | dynamo-mocker | dynamo-vllm | dynamo-sglang | dynamo-trtllm) printf '%s\n' "${SRT_DYNAMO_VENV:-$TOOLS/dynamo-venv}" ;;
    *) die "unknown program '$1' (want: ${ALL_PROGRAMS[*]})" ;;
    esac
}

out_dir_of() {
    case "$1" in
    vllm) printf '%s\n' "$ROOT/crates/srt/src/engine/vllm/catalog" ;;
    vllm-router) printf '%s\n' "$ROOT/crates/srt/src/frontend/vllm_router/catalog" ;;
    sglang-router) printf '%s\n' "$ROOT/crates/srt/src/frontend/sglang_router/catalog" ;;
    smg) printf '%s\n' "$ROOT/crates/srt/src/frontend/smg/catalog" ;;
    sglang) printf '%s\n' "$ROOT/crates/srt/src/engine/sglang/catalog" ;;
    sglang-run-eval | aiperf) printf '%s\n' "$ROOT/crates/srt/src/bench/catalog" ;;
    dynamo-* | etcd | nats-server) printf '%s\n' "$ROOT/crates/srt/src/frontend/dynamo/catalog" ;;
    esac
}

main() {
    local check="" programs=() program
    for program in "$@"; do
        case "$program" in
        --check) check=1 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            return 0
            ;;
        *) programs+=("$program") ;;
        esac
    done
    ((${#programs[@]})) || programs=("${ALL_PROGRAMS[@]}")

    local failed=0 venv py script tmp version out start sglang_site
    for program in "${programs[@]}"; do
        start="$(now)"
        tmp="$(mktemp)"
        if [[ "$program" == etcd || "$program" == nats-server ]]; then
            have "$program" || die "$program: not installed (run scripts/install-deps.sh ${program%-server})"
            py=python3
            script=go-flag-catalog.py
        else
            venv="$(venv_of "$program")"
            [[ -x "$venv/bin/python" ]] || die "$program: no venv at $venv (run its install script)"
            py="$venv/bin/python"
            script=flag-catalog.py
            [[ "$program" == aiperf ]] && script=aiperf-catalog.py
        fi
        # dynamo.sglang imports SGLang, which lives in its catalog venv.
        sglang_site=""
        if [[ "$program" == dynamo-sglang ]]; then
            sglang_site="$(compgen -G "$TOOLS/sglang-catalog-venv/lib/python3*/site-packages" | head -n1 || true)"
        fi
        # -B: no __pycache__ in the work tree.
        if ! SRT_SGLANG_SITE_PACKAGES="$sglang_site" "$py" -B "$ROOT/scripts/$script" "$program" >"$tmp"; then
            rm -f "$tmp"
            die "$program: $script failed"
        fi
        version="$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$tmp")"
        out="$(out_dir_of "$program")/$program-$version.json"
        if [[ -n "$check" ]]; then
            if cmp -s "$tmp" "$out"; then
                log "$program $version: ${out#"$ROOT"/} is up to date"
            else
                warn "$program $version: ${out#"$ROOT"/} differs from the installed program's parser"
                diff -u "$out" "$tmp" >&2 || true
                failed=1
            fi
            rm -f "$tmp"
        else
            mkdir -p "$(dirname "$out")"
            mv "$tmp" "$out"
            chmod 644 "$out"
            log "$program $version: wrote ${out#"$ROOT"/} ($(elapsed_since "$start") s)"
        fi
    done
    return "$failed"
}

main "$@"
