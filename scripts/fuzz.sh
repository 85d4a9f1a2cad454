#!/usr/bin/env bash
# Fuzz the recipe loader and renderer (fuzz/fuzz_targets/recipe.rs) for a bounded time.
#
# Usage: scripts/fuzz.sh [SECONDS]   (default 60)
#
# Seeds the corpus with every example and every invalid recipe, builds the fuzz target
# and runs libFuzzer for SECONDS. Prints the run count, the execution rate and the
# coverage libFuzzer reached. A crash fails the script and leaves the input in
# fuzz/artifacts/recipe/: turn it into a regression test (a file in tests/invalid/, a
# case in tests/invalid_limits.rs, or a unit test beside the fix).
#
# No cargo-fuzz: the target is built by cargo itself with the coverage instrumentation
# cargo-fuzz would pass (stable rustc flags; no sanitizer: the code under test is safe
# Rust, and libFuzzer still catches panics, stack overflows, timeouts and memory
# blow-ups), in fuzz/Cargo.toml's `fuzz` profile, into fuzz/target/. A warm run reuses
# that build (cargo rebuilds only what changed); a cold one compiles the dependencies
# once (about 4 minutes on 2 cores).
#
# The alias-bomb recipe is not a seed: refusing it costs about half a second per run in
# this build (the parser's alias budget), and its mutations held a minute of fuzzing to
# about 30 runs/s instead of about 800. tests/invalid_limits.rs covers it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SECONDS_BUDGET="${1:-60}"
cd "$(repo_root)"

corpus=fuzz/corpus/recipe
mkdir -p "$corpus"
rm -f "$corpus/seed-invalid-alias-bomb.yaml" # left by an earlier version of this script
while IFS= read -r -d '' f; do
    cp "$f" "$corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done < <(find examples tests/invalid -name '*.yaml' ! -name alias-bomb.yaml -print0)

triple="$(rustc -vV | sed -n 's/^host: //p')"
# The flags cargo-fuzz passes for `--sanitizer none`. `--target` keeps them off build
# scripts and proc macros.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares"
log "building the fuzz target (profile fuzz, target $triple)"
started=$SECONDS
cargo build --manifest-path fuzz/Cargo.toml --profile fuzz --target "$triple" --bin recipe >&2
log "built in $((SECONDS - started)) s"
log "fuzzing for ${SECONDS_BUDGET}s"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
mkdir -p fuzz/artifacts/recipe
status=0
"fuzz/target/$triple/fuzz/recipe" -artifact_prefix=fuzz/artifacts/recipe/ \
    -max_total_time="$SECONDS_BUDGET" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$corpus" >"$out" 2>&1 || status=$?
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
