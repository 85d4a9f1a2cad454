#!/usr/bin/env bash
# Writes the option catalogs of the installed SLURM clients (srun, sbatch),
# read from each program's own option parser by scripts/slurm-option-catalog.py.
#
# Usage: scripts/slurm-option-catalogs.sh [--check] [PROGRAM...]
#
#   PROGRAM is srun or sbatch (default: both), from Debian's slurm-wlm
#   (scripts/install-deps.sh slurm). Each is written to
#     crates/srt/src/exec/catalog/<program>-<debian-version>.json
#   where <debian-version> is the installed package's (22.05.8-4+deb12u3),
#   so a catalog records the SLURM that produced it. No controller is needed:
#   the programs run against a throwaway slurm.conf and every probe ends in a
#   parse error. About 15 s per program.
#
#   --check  writes nothing; exits 1 if a committed catalog differs from
#            what the installed programs give (catalogs are deterministic).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(repo_root)"
OUT_DIR="$ROOT/crates/srt/src/exec/catalog"
CONF_DIR=""

# The Debian version of the package that holds PROGRAM.
package_version() {
    local package
    package="$(dpkg-query -S "$(command -v "$1")" | cut -d: -f1)"
    dpkg-query -W -f='${Version}' "$package"
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
        srun | sbatch) programs+=("$program") ;;
        *) die "unknown program '$program' (want: srun sbatch)" ;;
        esac
    done
    ((${#programs[@]})) || programs=(srun sbatch)

    local conf failed=0 tmp version out start
    CONF_DIR="$(mktemp -d)"
    trap 'rm -rf "$CONF_DIR"' EXIT
    conf="$CONF_DIR"
    printf 'ClusterName=srt-catalog\nSlurmctldHost=localhost\n' >"$conf/slurm.conf"
    for program in "${programs[@]}"; do
        start="$(now)"
        have "$program" || die "$program is not installed (scripts/install-deps.sh slurm)"
        version="$(package_version "$program")"
        out="$OUT_DIR/$program-$version.json"
        tmp="$conf/$program.json"
        SLURM_CONF="$conf/slurm.conf" python3 -B "$ROOT/scripts/slurm-option-catalog.py" \
            "$program" "$version" >"$tmp" || die "$program: slurm-option-catalog.py failed"
        if [[ -n "$check" ]]; then
            if cmp -s "$tmp" "$out"; then
                log "$program $version: ${out#"$ROOT"/} is up to date"
            else
                warn "$program $version: ${out#"$ROOT"/} differs from the installed program's parser"
                diff -u "$out" "$tmp" >&2 || true
                failed=1
            fi
        else
            mkdir -p "$OUT_DIR"
            cp "$tmp" "$out"
            chmod 644 "$out"
            log "$program $version: wrote ${out#"$ROOT"/} ($(elapsed_since "$start") s)"
        fi
    done
    return "$failed"
}

main "$@"
