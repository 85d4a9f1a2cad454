#!/usr/bin/env bash
# The benchmarks (docs/performance.md): plan and state at 8 to 4096 nodes, then apply
# overhead with 2, 16 and 64 simulated workers behind the real vllm-router, then with
# 4 and 16 Dynamo mockers behind the real Dynamo frontend (benches/apply_dynamo.rs),
# then a prefill/decode roll of 8 simulated decodes behind the real smg
# (benches/apply_smg.rs).
#
# Usage: scripts/bench.sh [--smoke] [benchmark options]
#
#   --smoke   small sizes, one run each: checks that the benchmarks still run (CI);
#             its figures mean nothing
#
# Other options go to every benchmark (see benches/plan.rs and benches/apply.rs), e.g.
# `--reps 9`. The apply benchmarks start processes on this machine's ports (6100+,
# 18000, 18100, 18200, 29000); run them when no other deployment uses them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh router etcd dynamo smg
export SRT_TOOLS_DIR="${SRT_TOOLS_DIR:-$PWD/.tools}"
cargo bench --bench plan -- "$@"
echo
cargo bench --bench apply -- "$@"
echo
cargo bench --bench apply_dynamo -- "$@"
echo
cargo bench --bench apply_smg -- "$@"
