#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (the pinned
# vllm-router in .tools/, aiperf, nginx, cargo-insta, SLURM, etcd, nats-server, ai-dynamo), then runs formatting, lints, and
# every test with golden files checked (stale or unreferenced snapshots fail), then
# runs the documented walkthroughs and the README's demo, and fuzzes the recipe loader
# for a bounded time ($SRT_FUZZ_SECONDS, default 60; 0 skips it).
#
# The SLURM tests (tests/e2e_slurm.rs) run on a real four-node cluster on this machine
# (scripts/slurm-cluster.sh, needs root): started before the tests (a healthy one is
# reused) and stopped on exit, unless SRT_SLURM_KEEP=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh router smg aiperf nginx insta slurm etcd nats dynamo
export SRT_TOOLS_DIR="${SRT_TOOLS_DIR:-$PWD/.tools}"
# One build from a clean clone gains nothing from incremental compilation, whose cache
# is ~2.3 GB next to the ~2.6 GB of test binaries (CI's disk has run out mid-link).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --all-targets -- -D warnings
if [[ -z "${SRT_SLURM_KEEP:-}" ]]; then
    trap 'scripts/slurm-cluster.sh stop' EXIT
fi
# Four nodes: a deployment's allocations grow onto nodes the others do not hold.
export SRT_SLURM_NODE_COUNT="${SRT_SLURM_NODE_COUNT:-4}"
slurm_env="$(scripts/slurm-cluster.sh start)"
eval "$slurm_env"
export SRT_SLURM_REQUIRED=1
# CI=true makes insta refuse to write snapshots; --check fails on any mismatch.
# --all-targets also runs benches/ once as a smoke check (small sizes, no timed
# assertions): run without `--bench`, a benchmark only checks that it still works.
CI=true cargo insta test --check --unreferenced=reject --all-targets
# The getting-started page, run command by command on the built binaries.
scripts/doc-test.sh docs/getting-started.md
# The SLURM walkthrough, on the test cluster.
scripts/doc-test.sh docs/slurm.md
# The README's first command, as a newcomer runs it; then stopped.
demo_state="$(mktemp -d)"
SRT_STATE_DIR="$demo_state" scripts/demo.sh
target/debug/srt destroy local-agg --auto-approve --state-dir "$demo_state"
rm -rf "$demo_state"
if [[ "${SRT_FUZZ_SECONDS:-60}" != 0 ]]; then
    scripts/fuzz.sh "${SRT_FUZZ_SECONDS:-60}"
fi
