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

# venv_versions PYTHON NAME...: the installed version of each distribution NAME
# in the environment of interpreter PYTHON, space-separated, `-` for one that is
# missing; read from package metadata only (nothing is imported). Prints
# nothing when PYTHON is not there.
venv_versions() {
    local python="$1"
    shift
    [[ -x "$python" ]] || return 0
    "$python" - "$@" <<'PY' 2>/dev/null || true
import sys
from importlib.metadata import version, PackageNotFoundError
out = []
for name in sys.argv[1:]:
    try:
        out.append(version(name))
    except PackageNotFoundError:
        out.append("-")
print(" ".join(out))
PY
}

# sglang_catalog_venv VERSION: the venv install-sglang-catalog.sh puts SGLang
# VERSION's option parser in (the default release's keeps its old name).
sglang_catalog_venv() {
    if [[ "$1" == 0.5.23 ]]; then
        printf '%s\n' "$(tools_dir)/sglang-catalog-venv"
    else
        printf '%s\n' "$(tools_dir)/sglang-$1-catalog-venv"
    fi
}

# constraint_args FILE: pip's `--constraint FILE`, one word a line, when FILE
# exists (a first install writes it with `pip freeze`).
constraint_args() {
    if [[ -f "$1" ]]; then
        printf '%s\n' --constraint "$1"
    fi
}

# wheel_requirements PYTHON DIST SKIP...: DIST's Requires-Dist lines, one a
# line with their markers (pip evaluates them), without optional extras and
# without the requirements named SKIP (installed another way).
wheel_requirements() {
    local python="$1" dist="$2"
    shift 2
    "$python" - "$dist" "$@" <<'PY'
import re
import sys
from importlib.metadata import requires
dist, skip = sys.argv[1], set(sys.argv[2:])
for req in requires(dist) or []:
    name = re.match(r"\s*([A-Za-z0-9._-]+)", req).group(1).lower().replace("_", "-")
    if name in skip or re.search(r"""\bextra\s*==""", req):
        continue
    print(req)
PY
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
    # PMIx: slurm's mpi_pmix plugin dlopens the unversioned `libpmix.so` (which only
    # libpmix-dev installs) at run time, for the steps of an MPI-launched worker
    # (`srun --mpi=pmix`, TensorRT-LLM's endpoints).
    if have slurmctld && have slurmd && have sbatch && have munged && have ip && have nsenter \
        && ldconfig -p | grep -q 'libpmix\.so '; then
        return 0
    fi
    apt_install slurm-wlm munge iproute2 util-linux libpmix2 libpmix-dev
}

# pick_python MIN [MAX_EXCL] WHAT: prints an interpreter (SRT_PYTHON, else
# python3, else pyenv's shim) whose version is >= MIN (and < MAX_EXCL when
# given) and that can create venvs; WHAT names the tool needing it in errors.
pick_python() {
    local min="$1" max="$2" what="$3"
    local py="${SRT_PYTHON:-python3}"
    if ! have "$py"; then
        if [[ -x /root/.pyenv/shims/python3 ]]; then
            py=/root/.pyenv/shims/python3
        else
            die "no python3 found (set SRT_PYTHON)"
        fi
    fi
    "$py" - "$min" "$max" <<'PY' || die "$py ($("$py" --version 2>&1)) is outside [$min, ${max:-any}), which $what needs"
import sys
lo = tuple(int(x) for x in sys.argv[1].split("."))
hi = tuple(int(x) for x in sys.argv[2].split(".")) if sys.argv[2] else None
v = sys.version_info[:2]
sys.exit(0 if v >= lo and (hi is None or v < hi) else 1)
PY
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

# Installs PACKAGE==VERSION into the venv VENV (created with a Python >= 3.8 when
# missing; removed first when it exists but CURRENT, the version it reports, is empty,
# i.e. the venv is broken), pinning its dependencies with CONSTRAINTS when that file
# exists. Does nothing when CURRENT is already VERSION.
#   venv_install VENV PACKAGE VERSION CONSTRAINTS CURRENT
venv_install() {
    local venv="$1" package="$2" version="$3" constraints="$4" current="$5" py
    if [[ -d "$venv" && -z "$current" ]]; then
        log "removing broken venv $venv"
        rm -rf "$venv"
    fi
    if [[ ! -d "$venv" ]]; then
        py="$(pick_python 3.8 "" "$package")"
        log "creating venv $venv with $py ($("$py" --version 2>&1))"
        mkdir -p "$(dirname "$venv")"
        "$py" -m venv "$venv"
    fi
    if [[ "$current" != "$version" ]]; then
        local -a cons=()
        [[ -f "$constraints" ]] && cons=(--constraint "$constraints")
        log "installing $package==$version${current:+ (replacing $current)}"
        PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install \
            --quiet --no-input "${cons[@]}" "$package==$version" >&2
    fi
}
