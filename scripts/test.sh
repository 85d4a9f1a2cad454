#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (the pinned
# vllm-router in .tools/, nginx, cargo-insta), then runs formatting, lints, and every
# test with golden files checked (stale or unreferenced snapshots fail).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh router nginx insta
export SRT_TOOLS_DIR="${SRT_TOOLS_DIR:-$PWD/.tools}"
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
# CI=true makes insta refuse to write snapshots; --check fails on any mismatch.
# --all-targets also runs benches/ once as a smoke check (small sizes, no timed
# assertions): run without `--bench`, a benchmark only checks that it still works.
CI=true cargo insta test --check --unreferenced=reject --all-targets
