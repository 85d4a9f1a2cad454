#!/usr/bin/env bash
# The main job, from a fresh machine with Rust and Python 3: a local deployment that
# answers a completion.
#
# Usage: scripts/demo.sh
#
#   1. installs the pinned vLLM Router into .tools/ (scripts/install-router.sh),
#   2. builds srt (`cargo build`),
#   3. applies examples/local-agg.yaml with --simulate (two simulated vLLM workers behind
#      the real Router, no GPU needed),
#   4. sends one completion through the Router's public port,
#   5. prints `srt status` and how to stop it.
#
#   Idempotent: run it again and apply finds nothing to change. State goes to
#   $SRT_STATE_DIR (default .srt/ in the repository).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(repo_root)"

scripts/install-router.sh >/dev/null
export PATH="$(tools_dir)/bin:$PATH"
log "building srt"
cargo build --quiet --bin srt --bin srt-vllm-sim
srt=target/debug/srt

"$srt" apply -f examples/local-agg.yaml --simulate --auto-approve

log "one completion through the Router on port 8000"
curl -sSf -w '\n' http://127.0.0.1:8000/v1/completions -H 'content-type: application/json' \
    -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 8}'

"$srt" status local-agg
cat >&2 <<EOF

It runs in the background. See the plan again (nothing to do):
  PATH="$(tools_dir)/bin:\$PATH" $srt plan -f examples/local-agg.yaml --simulate
Stop it and empty its state:
  $srt destroy local-agg --auto-approve
EOF
