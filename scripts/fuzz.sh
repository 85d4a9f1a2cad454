#!/usr/bin/env bash
# Fuzz the recipe loader and renderer (fuzz/fuzz_targets/recipe.rs) for a bounded time.
#
# Usage: scripts/fuzz.sh [SECONDS]   (default 60)
#
# Installs cargo-fuzz (pinned) when missing, seeds the corpus with every example and
# every invalid recipe, and runs libFuzzer for SECONDS. Prints the run count, the
# execution rate and the coverage libFuzzer reached. A crash fails the script and
# leaves the input in fuzz/artifacts/recipe/: turn it into a regression test (a file in
# tests/invalid/, or a case in tests/invalid_limits.rs) with the fix.
#
# Runs on the stable toolchain (RUSTC_BOOTSTRAP lets cargo-fuzz pass its flags), without
# a sanitizer: the code under test is safe Rust, and libFuzzer still catches panics,
# stack overflows, timeouts and memory blow-ups.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SECONDS_BUDGET="${1:-60}"
CARGO_FUZZ_VERSION="${SRT_CARGO_FUZZ_VERSION:-0.13.2}"

cd "$(repo_root)"

if [[ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]]; then
    log "cargo install --locked cargo-fuzz@$CARGO_FUZZ_VERSION (a few minutes on 2 cores)"
    cargo install --locked --quiet cargo-fuzz --version "=$CARGO_FUZZ_VERSION" >&2
fi

corpus=fuzz/corpus/recipe
mkdir -p "$corpus"
while IFS= read -r -d '' f; do
    cp "$f" "$corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done < <(find examples tests/invalid -name '*.yaml' -print0)

export RUSTC_BOOTSTRAP=1
log "building the fuzz target"
cargo fuzz build --sanitizer none recipe >&2
log "fuzzing for ${SECONDS_BUDGET}s"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
cargo fuzz run --sanitizer none recipe "$corpus" -- \
    -max_total_time="$SECONDS_BUDGET" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 >"$out" 2>&1 || status=$?
if ((status != 0)); then
    # The panic message, then libFuzzer's report (the backtrace between them is long).
    grep -A3 'panicked at' "$out" >&2 || true
    grep -A12 -E '^==[0-9]+== ERROR|^SUMMARY' "$out" >&2 || tail -n 40 "$out" >&2
    die "the fuzzer found a crash (exit $status); the input is in fuzz/artifacts/recipe/"
fi
runs="$(grep -o 'Done [0-9]* runs in [0-9]* second' "$out" | tail -n1)"
stats="$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$out" | tr '\n' ' ')"
cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$out" | tail -n1)"
log "fuzz: ${runs:-no run count}; ${cov:-no coverage line}; ${stats}"
printf 'fuzz recipe: %s; %s\n' "${runs:-?}" "${cov:-?}"
