#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (the pinned
# vllm-router in .tools/, nginx, cargo-insta), then runs formatting, lints, and every
# test with golden files checked (stale or unreferenced snapshots fail), then fuzzes the
# recipe loader for a bounded time ($SRT_FUZZ_SECONDS, default 60; 0 skips it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh router nginx insta
export SRT_TOOLS_DIR="${SRT_TOOLS_DIR:-$PWD/.tools}"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --all-targets -- -D warnings
# CI=true makes insta refuse to write snapshots; --check fails on any mismatch.
CI=true cargo insta test --check --unreferenced=reject --all-targets
if [[ "${SRT_FUZZ_SECONDS:-60}" != 0 ]]; then
    scripts/fuzz.sh "${SRT_FUZZ_SECONDS:-60}"
fi
