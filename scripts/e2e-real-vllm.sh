#!/usr/bin/env bash
# End to end with the real engine: `srt apply` WITHOUT --simulate, real vLLM (its CPU
# build) behind the real vLLM Router, on a tiny random Llama generated locally.
#
# Usage: scripts/e2e-real-vllm.sh
#
#   Opt-in (not part of scripts/test.sh): it needs real vLLM, about 3.4 GB of
#   downloads and 6 GB on disk the first time (scripts/install-vllm.sh), about 6 GB of
#   memory while two engines run, and several minutes: each engine takes about a
#   minute to start on two cores. See docs/real-engines.md for what it measured.
#
#   For each of two recipes, an aggregate of 2 workers and a single-node DP2
#   endpoint (one API server, two engine cores, --intra-node-data-parallel-size 2 on
#   the Router), both behind one Router with its default policy (cache_aware):
#     1. srt apply (timed; every worker's start-up to /health timed on the side);
#     2. completions through the Router, and the workers' access logs show the
#        Router's render calls answered (200: srt gave them --enable-scale-out);
#     3. srt plan again: no changes;
#     4. an args change (max-num-seqs): the plan replaces that role's workers (and
#        updates the Router's membership, or restarts a Router whose command line
#        lists them) and nothing else; apply it (timed) and serve;
#     5. srt destroy: no process of the deployment left, and none of the process
#        groups state recorded (each API server forks its engine cores and workers
#        into its group).
#   It prints a summary of the timings at the end and exits non-zero on the first
#   failed check.
#
#   As root (with `ip`), everything runs in a private network namespace, so the fixed
#   ports (8000, 6100, ...) cannot collide with anything else on the machine.
#
# Environment:
#   SRT_TOOLS_DIR   where tools live (default <repo>/.tools): vllm-venv, router-venv
#   SRT_BIN         the srt binary (default: built with `cargo build --bin srt`)
#   SRT_REAL_KEEP   1 keeps the scratch directory (state, logs, the model)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(repo_root)"
TOOLS="$(tools_dir)"
export SRT_TOOLS_DIR="$TOOLS"

log "real vLLM: $("$ROOT/scripts/install-vllm.sh")"
"$ROOT/scripts/install-router.sh" >/dev/null
export PATH="$TOOLS/bin:$PATH"
have vllm-router || die "vllm-router is not on PATH ($TOOLS/bin)"

if [[ -z "${SRT_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --quiet --bin srt)
    SRT_BIN="$ROOT/target/debug/srt"
fi

WORK="$(mktemp -d -t srt-real-vllm.XXXXXX)"
NS=""
cleanup() {
    local rc=$?
    # A failed check leaves deployments behind: destroy them before anything else.
    for d in "$WORK"/.srt/*/; do
        [[ -d "$d" ]] || continue
        in_ns "$SRT_BIN" destroy "$(basename "$d")" --auto-approve >/dev/null 2>&1 || true
    done
    if [[ -n "$NS" ]]; then
        ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$NS" 2>/dev/null || true
    fi
    if [[ "${SRT_REAL_KEEP:-0}" == 1 ]]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT

if [[ "$(id -u)" -eq 0 ]] && have ip; then
    NS="srt-real-$$"
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    log "network namespace $NS"
fi

# Run a command in the scenario's namespace (if any), in the scratch directory.
in_ns() {
    if [[ -n "$NS" ]]; then
        (cd "$WORK" && ip netns exec "$NS" "$@")
    else
        (cd "$WORK" && "$@")
    fi
}

PY="$TOOLS/vllm-venv/bin/python"
MODEL="$WORK/tiny"
"$PY" "$ROOT/scripts/make-tiny-model.py" "$MODEL" >/dev/null
log "model: $MODEL ($(du -sh "$MODEL" | cut -f1))"

SUMMARY=()
note() {
    SUMMARY+=("$*")
    log "$*"
}

# recipe NAME SHAPE EXTRA_ARGS MAX_NUM_SEQS: an aggregate recipe for the CPU build
# (SHAPE: the role's nodes and workers lines; EXTRA_ARGS: more `args` lines).
recipe() {
    local name="$1" shape="$2" extra="$3" seqs="$4"
    cat <<EOF
name: $name
model:
  path: $MODEL
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  enable_multiple_frontends: false
roles:
  agg:
$shape
    args:
$extra
      enforce-eager: true
      dtype: float32
      max-model-len: 256
      max-num-seqs: $seqs
    env:
      HF_HUB_OFFLINE: "1"
      VLLM_CPU_KVCACHE_SPACE: "1"
health_check:
  timeout_seconds: 900
EOF
}

completion() {
    in_ns curl -sf --max-time 120 http://127.0.0.1:8000/v1/completions \
        -H 'content-type: application/json' \
        -d '{"model": "tiny", "prompt": "Hello there", "max_tokens": 4}'
}

# Completions back to back until file $1 exists; writes "served failed" to file $2.
load_loop() {
    local stop="$1" out="$2" ok=0 failed=0
    while [[ ! -e "$stop" ]]; do
        if completion 2>/dev/null | grep -q '"choices"'; then
            ok=$((ok + 1))
        else
            failed=$((failed + 1))
        fi
    done
    echo "$ok $failed" >"$out"
}

# Time from now until each worker URL answers /health, printed as "url seconds" lines,
# in the background (started alongside apply).
time_health() {
    local start
    start="$(now)"
    for url in "$@"; do
        (
            until in_ns curl -sf --max-time 2 -o /dev/null "$url/health"; do sleep 0.5; done
            printf '%s %s\n' "$url" "$(elapsed_since "$start")"
        ) &
    done
    wait
}

# The process groups the deployment's state records (running processes).
recorded_groups() {
    "$PY" - "$WORK/.srt/$1/state.json" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
for r in state["resources"].values():
    rt = r.get("runtime") or {}
    if r.get("status") == "running" and rt.get("pgid"):
        print(rt["pgid"])
PY
}

# The pid state records for router[0].
router_pid() {
    "$PY" - "$WORK/.srt/$1/state.json" <<'PY'
import json, sys
print(json.load(open(sys.argv[1]))["resources"]["router[0]"]["runtime"]["pid"])
PY
}

# Live (not zombie) members of process group $1.
group_members() {
    ps -eo pid=,pgid=,stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { printf "%s ", $1 }'
}

# Live processes carrying the deployment's marker (SRT_DEPLOYMENT=<name>).
marked() {
    local name="$1" pid
    for env in /proc/[0-9]*/environ; do
        pid="${env#/proc/}"
        pid="${pid%/environ}"
        if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qx "SRT_DEPLOYMENT=$name"; then
            printf '%s ' "$pid"
        fi
    done
}

scenario() {
    local name="$1" shape="$2" extra="$3"
    shift 3
    local urls=("$@")
    log "== $name"
    recipe "$name" "$shape" "$extra" 4 >"$WORK/$name.yaml"

    in_ns "$SRT_BIN" validate -f "$WORK/$name.yaml" >&2
    local t out health
    t="$(now)"
    time_health "${urls[@]}" >"$WORK/$name.health" &
    local poller=$!
    out="$(in_ns "$SRT_BIN" apply -f "$WORK/$name.yaml" --auto-approve 2>&1)" ||
        { printf '%s\n' "$out" >&2; die "$name: apply failed"; }
    note "$name: apply (create) $(elapsed_since "$t") s"
    wait "$poller" || true
    while read -r url secs; do
        note "$name: $url healthy after $secs s"
    done <"$WORK/$name.health"
    grep -q "smoke: passed" <<<"$out" || { printf '%s\n' "$out" >&2; die "$name: no smoke"; }

    for _ in 1 2 3 4; do
        completion | grep -q '"choices"' || die "$name: completion through the Router failed"
    done
    local logs="$WORK/.srt/$name/logs"
    for w in "$logs"/worker.*.log; do
        grep -q '"POST /v1/completions/render HTTP/1.1" 200' "$w" ||
            die "$name: $(basename "$w") answered no render call with 200"
        if grep -q '/render HTTP/1.1" 403' "$w"; then
            die "$name: $(basename "$w") refused the Router's render call (403)"
        fi
    done
    note "$name: completions through the Router; render calls answered 200"

    t="$(now)"
    out="$(in_ns "$SRT_BIN" plan -f "$WORK/$name.yaml" 2>&1)"
    grep -q "No changes." <<<"$out" || { printf '%s\n' "$out" >&2; die "$name: re-plan not a no-op"; }
    note "$name: re-plan (no changes) $(elapsed_since "$t") s"

    recipe "$name" "$shape" "$extra" 8 >"$WORK/$name-changed.yaml"
    out="$(in_ns "$SRT_BIN" plan -f "$WORK/$name-changed.yaml" 2>&1)"
    local replaced updated
    # (grep finds nothing for an empty list: not a failure here)
    replaced="$({ grep -E '^  # .* will be replaced' <<<"$out" || true; } | sed -E 's/^  # (.*) will be replaced.*/\1/' | sort | tr '\n' ' ')"
    updated="$({ grep -E '^  # .* will be updated in-place' <<<"$out" || true; } | sed -E 's/^  # (.*) will be updated.*/\1/' | sort | tr '\n' ' ')"
    grep -qE 'Plan: 0 to create, ([0-9]+ to update in-place, )?[0-9]+ to replace, 0 to destroy' <<<"$out" ||
        { printf '%s\n' "$out" >&2; die "$name: the args change plans more than replacements"; }
    [[ -n "$replaced" ]] || { printf '%s\n' "$out" >&2; die "$name: the args change replaces nothing"; }
    for r in $replaced $updated; do
        [[ "$r" == worker.agg* || "$r" == router* || "$r" == ports.worker.agg* ||
            "$r" == ports.router* || "$r" == members.router* ]] ||
            die "$name: the args change touches $r"
    done
    note "$name: args change replaces: $replaced${updated:+; updates in place: $updated}"
    local router_pid
    router_pid="$(router_pid "$name")"
    # A client sends completions through the Router during the whole apply.
    rm -f "$WORK/$name.stop"
    load_loop "$WORK/$name.stop" "$WORK/$name.load" &
    local loader=$!
    t="$(now)"
    out="$(in_ns "$SRT_BIN" apply -f "$WORK/$name-changed.yaml" --auto-approve 2>&1)" ||
        { printf '%s\n' "$out" >&2; die "$name: apply of the change failed"; }
    note "$name: apply (replace) $(elapsed_since "$t") s"
    touch "$WORK/$name.stop"
    wait "$loader" || true
    local served failed
    read -r served failed <"$WORK/$name.load"
    note "$name: during the change: $served completions served, $failed failed"
    # With two workers one always serves while the other rolls; a single endpoint has
    # nothing to serve while it restarts (srt does not surge: rollout.max_surge is 0).
    if [[ "$name" == real-agg && "$failed" != 0 ]]; then
        die "$name: $failed completions failed while the workers rolled"
    fi
    if [[ "$(router_pid "$name")" == "$router_pid" ]]; then
        note "$name: the Router kept running through the change (pid $router_pid)"
    else
        note "$name: the Router was restarted with the change"
    fi
    completion | grep -q '"choices"' || die "$name: completion after the change failed"
    "$PY" - "$WORK/.srt/$name/state.json" <<'PY' || die "$name: the workers do not run the new args"
import json, sys
state = json.load(open(sys.argv[1]))
for address, r in state["resources"].items():
    if address.startswith("worker."):
        argv = r["spec"]["argv"]
        at = argv.index("--max-num-seqs")
        assert argv[at + 1] == "8", (address, argv)
PY

    local groups
    groups="$(recorded_groups "$name" | tr '\n' ' ')"
    t="$(now)"
    in_ns "$SRT_BIN" destroy "$name" --auto-approve >/dev/null
    note "$name: destroy $(elapsed_since "$t") s"
    sleep 1
    local left
    left="$(marked "$name")"
    [[ -z "$left" ]] || die "$name: processes left after destroy: $left"
    for g in $groups; do
        [[ -z "$(group_members "$g")" ]] ||
            die "$name: process group $g still has members: $(group_members "$g")"
    done
    note "$name: nothing left (process groups $groups empty)"
}

AGG_SHAPE="    nodes: 1
    workers: 2"
DP_SHAPE="    nodes: 1
    workers: 1"

START="$(now)"
scenario real-agg "$AGG_SHAPE" "" http://127.0.0.1:6100 http://127.0.0.1:6132
scenario real-dp "$DP_SHAPE" "      data-parallel-size: 2" http://127.0.0.1:6100

printf '\nsummary (%s s in all):\n' "$(elapsed_since "$START")"
printf '  %s\n' "${SUMMARY[@]}"
