#!/usr/bin/env bash
# Installs what the project's tests need on a fresh Debian bookworm machine.
#
# Usage: scripts/install-deps.sh [all | router | smg | aiperf | nginx | etcd | nats | insta | slurm | dynamo | vllm]...
#
#   router  vllm-router (pinned) in <tools>/router-venv, via install-router.sh,
#           and sglang-router (pinned) in <tools>/sglang-router-venv, via
#           install-sglang-router.sh
#   smg     the Shepherd Model Gateway (PyPI smg, pinned) in <tools>/smg-venv,
#           via install-smg.sh (a 154 MB venv, ~10 s cold)
#   aiperf  NVIDIA's aiperf (PyPI aiperf, pinned) in <tools>/aiperf-venv, via
#           install-aiperf.sh: the client of the `mooncake-router` benchmark
#           (a ~1.1 GB venv, ~1 minute cold)
#   nginx   Debian's nginx (the project can put nginx in front of several
#           Routers); installed only, never started here
#   etcd    Debian's etcd-server (bookworm: 3.4.23, v3 API), the discovery
#           store of the Dynamo frontend; installed only, never started here
#           (the package's service is held back like nginx's)
#   nats    Debian's nats-server (bookworm: 2.9.10, with JetStream), Dynamo's
#           NATS request/event plane; installed only, never started here
#   insta   cargo-insta $SRT_CARGO_INSTA_VERSION (default 1.49.0, the insta
#           version in Cargo.lock), via `cargo install --locked`
#   slurm   Debian's slurm-wlm + munge (+ iproute2, util-linux, libpmix2, libpmix-dev) for
#           scripts/slurm-cluster.sh; installed only, not started
#   all     every part above (the default)
#   dynamo  NVIDIA Dynamo (ai-dynamo + ai-dynamo-runtime, pinned) in
#           <tools>/dynamo-venv, via install-dynamo.sh; opt-in, not in `all`
#           yet: ~90 MB of wheels plus transformers/numpy/kubernetes, a
#           ~690 MB venv, ~2.5 minutes cold (a fraction of a second warm)
#   vllm    real vLLM, CPU build (pinned), in <tools>/vllm-venv, via
#           install-vllm.sh; opt-in, not in `all`: ~3.4 GB of downloads,
#           ~6 GB on disk, ~5 minutes
#
# Every part is idempotent: a part that is already present costs a few
# milliseconds. Needs root for the apt parts.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CARGO_INSTA_VERSION="${SRT_CARGO_INSTA_VERSION:-1.49.0}"

install_router() {
    bash "$(dirname "${BASH_SOURCE[0]}")/install-router.sh" >/dev/null
    bash "$(dirname "${BASH_SOURCE[0]}")/install-sglang-router.sh" >/dev/null
}

install_smg() {
    bash "$(dirname "${BASH_SOURCE[0]}")/install-smg.sh" >/dev/null
}

install_aiperf() {
    bash "$(dirname "${BASH_SOURCE[0]}")/install-aiperf.sh" >/dev/null
}

install_dynamo() {
    bash "$(dirname "${BASH_SOURCE[0]}")/install-dynamo.sh" >/dev/null
}

install_vllm() {
    bash "$(dirname "${BASH_SOURCE[0]}")/install-vllm.sh" >/dev/null
}

install_nginx() {
    if have nginx || [[ -x /usr/sbin/nginx ]]; then
        log "nginx present"
        return 0
    fi
    apt_install nginx
    log "nginx installed: $(/usr/sbin/nginx -v 2>&1)"
}

# The packages put etcd and nats-server in /usr/bin. apt_install holds back
# their services (policy-rc.d); srt starts its own instances with their own
# data directories and ports.
install_etcd() {
    if ! have etcd; then
        apt_install etcd-server
    fi
    log "etcd present: $(etcd --version 2>&1 | head -n1)"
}

install_nats() {
    if ! have nats-server; then
        apt_install nats-server
    fi
    log "nats-server present: $(nats-server --version 2>&1)"
}

install_insta() {
    local have_version=""
    if have cargo-insta; then
        have_version="$(cargo-insta --version 2>/dev/null | awk '{print $2}')"
    fi
    if [[ "$have_version" == "$CARGO_INSTA_VERSION" ]]; then
        log "cargo-insta $CARGO_INSTA_VERSION present"
        return 0
    fi
    have cargo || die "cargo not found; cargo-insta needs a Rust toolchain"
    log "cargo install --locked cargo-insta@$CARGO_INSTA_VERSION${have_version:+ (replacing $have_version)} (a few minutes on 2 cores)"
    cargo install --locked --quiet cargo-insta --version "=$CARGO_INSTA_VERSION" >&2
    log "cargo-insta installed: $(cargo-insta --version)"
}

install_slurm() {
    ensure_slurm_packages
    log "slurm present: $(slurmctld -V 2>&1), $(munged --version 2>&1 | head -n1)"
}

main() {
    local parts=("$@") part start
    ((${#parts[@]})) || parts=(all)
    for part in "${parts[@]}"; do
        start="$(now)"
        case "$part" in
        all)
            install_router
            install_smg
            install_aiperf
            install_nginx
            install_etcd
            install_nats
            install_insta
            install_slurm
            ;;
        router) install_router ;;
        smg) install_smg ;;
        aiperf) install_aiperf ;;
        nginx) install_nginx ;;
        etcd) install_etcd ;;
        nats | nats-server) install_nats ;;
        insta | cargo-insta) install_insta ;;
        slurm) install_slurm ;;
        dynamo) install_dynamo ;;
        vllm) install_vllm ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            return 0
            ;;
        *) die "unknown part '$part' (want: all router smg aiperf nginx etcd nats insta slurm dynamo vllm)" ;;
        esac
        log "$part done ($(elapsed_since "$start") s)"
    done
}

main "$@"
