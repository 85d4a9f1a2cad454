#!/usr/bin/env bash
# Shared helpers for the project's install and test-infrastructure scripts.
# Source it; do not run it. Every script that sources it runs with
# `set -euo pipefail`. Logs go to stderr so that stdout stays machine-readable
# (paths, `export` lines).

# shellcheck disable=SC2034  # some variables are used by the sourcing scripts

if [[ -n "${SRT_LIB_SH_LOADED:-}" ]]; then
    return 0
fi
SRT_LIB_SH_LOADED=1

set -euo pipefail

SRT_LOG_TAG="${SRT_LOG_TAG:-$(basename "${BASH_SOURCE[1]:-$0}" .sh)}"

log() { printf '[%s] %s\n' "$SRT_LOG_TAG" "$*" >&2; }
warn() { printf '[%s] warning: %s\n' "$SRT_LOG_TAG" "$*" >&2; }
die() {
    printf '[%s] error: %s\n' "$SRT_LOG_TAG" "$*" >&2
    exit 1
}

have() { command -v "$1" >/dev/null 2>&1; }

need_root() {
    [[ "$(id -u)" -eq 0 ]] || die "must run as root (it installs packages / manages system daemons)"
}

# Absolute path of the repository this script lives in (the parent of scripts/).
repo_root() {
    local here
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
    dirname "$here"
}

# Where locally installed tools live (git-ignored): $SRT_TOOLS_DIR or <repo>/.tools.
tools_dir() {
    printf '%s\n' "${SRT_TOOLS_DIR:-$(repo_root)/.tools}"
}

# Seconds since the epoch with sub-second precision, for timing reports.
now() { date +%s.%N; }
elapsed_since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }

# wait_until TIMEOUT_SECS INTERVAL_SECS CMD...: polls CMD until it succeeds.
# Returns 1 if it has not succeeded within TIMEOUT_SECS.
wait_until() {
    local timeout="$1" interval="$2"
    shift 2
    local deadline=$((SECONDS + timeout))
    while true; do
        if "$@"; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            return 1
        fi
        sleep "$interval"
    done
}

# apt_install PKG...: installs the Debian packages that are not installed yet,
# non-interactively. Runs `apt-get update` once per process (package lists on a
# fresh machine are empty or stale). Services are not started by the packages'
# maintainer scripts: the project's scripts start what they need themselves.
SRT_APT_UPDATED=""
apt_install() {
    need_root
    local missing=() pkg
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    ((${#missing[@]})) || return 0
    export DEBIAN_FRONTEND=noninteractive
    if [[ -z "$SRT_APT_UPDATED" ]]; then
        log "apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        SRT_APT_UPDATED=1
    fi
    local policy=/usr/sbin/policy-rc.d made_policy=""
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
    fi
    log "apt-get install ${missing[*]}"
    local rc=0 out
    out="$(mktemp)"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$out" 2>&1 || rc=$?
    if [[ -n "$made_policy" ]]; then
        rm -f "$policy"
    fi
    if ((rc != 0)); then
        tail -n 40 "$out" >&2
        rm -f "$out"
        die "apt-get install ${missing[*]} failed (rc=$rc)"
    fi
    rm -f "$out"
}

# Debian packages behind the local SLURM test cluster (scripts/slurm-cluster.sh):
# slurm-wlm gives slurmctld, slurmd and the clients (sbatch, srun, squeue,
# scontrol, scancel, sinfo); munge is its authentication daemon; iproute2 and
# util-linux give ip, nsenter and unshare.
ensure_slurm_packages() {
    if have slurmctld && have slurmd && have sbatch && have munged && have ip && have nsenter; then
        return 0
    fi
    apt_install slurm-wlm munge iproute2 util-linux
}
