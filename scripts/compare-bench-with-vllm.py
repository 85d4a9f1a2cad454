#!/usr/bin/env python3
"""Runs `vllm bench serve` and srt's benchmark with the same parameters against the
same simulated deployment, and compares TTFT, ITL, TPOT and throughput per level.

Opt-in (not part of the test command): it needs the real vLLM venv
(scripts/install-vllm.sh; `vllm bench serve` is vLLM's own client), the pinned
vllm-router, and a built srt (`cargo build`). Run it with any Python 3:

    SRT_TOOLS_DIR=.tools python3 scripts/compare-bench-with-vllm.py [options]

What it does:
  1. applies a simulated deployment (`srt apply --simulate`): WORKERS aggregated
     simulated workers behind the vLLM Router, serving the tiny test model's
     tokenizer (tests/fixtures/tiny-model), with the simulator's timing model set by
     --step-ms, --per-seq-us and --prefill-us;
  2. for each level: `vllm bench serve` (random dataset, --random-input-len ISL,
     --random-output-len OSL, --random-range-ratio 0 (srt's 1: fixed lengths), --num-prompts LEVEL x MULT,
     --max-concurrency LEVEL, --request-rate RATE, --ignore-eos, --seed SEED), then
     `srt bench` with the same parameters (no warm-up for either), alternating so drift
     on the machine hits both alike;
  3. prints a Markdown table of both clients' figures and their relative difference,
     and writes both clients' result files under --out;
  4. destroys the deployment.

As root it runs everything in a network namespace of its own (fixed ports free of
anything else on the machine); otherwise on this host's loopback.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests", "fixtures", "tiny-model")
NAME = "bench-compare"

METRICS = [
    ("mean TTFT (ms)", "mean_ttft_ms"),
    ("median TTFT (ms)", "median_ttft_ms"),
    ("p99 TTFT (ms)", "p99_ttft_ms"),
    ("mean TPOT (ms)", "mean_tpot_ms"),
    ("median ITL (ms)", "median_itl_ms"),
    ("p99 ITL (ms)", "p99_itl_ms"),
    ("median E2EL (ms)", "median_e2el_ms"),
    ("output tok/s", "output_throughput"),
    ("requests/s", "request_throughput"),
    ("total input tokens", "total_input_tokens"),
    ("total output tokens", "total_output_tokens"),
]


def recipe(a):
    return f"""name: {NAME}
model:
  path: {MODEL}
  served_name: tiny
resources:
  gpus_per_node: {a.workers}
frontend:
  type: vllm-router
  enable_multiple_frontends: false
  args:
    policy: round_robin
roles:
  agg:
    nodes: 1
    workers: {a.workers}
    args:
      max-model-len: 8192
    env:
      SRT_SIM_TOKEN_DELAY_MS: "{a.step_ms}"
      SRT_SIM_DECODE_US_PER_SEQ: "{a.per_seq_us}"
      SRT_SIM_PREFILL_US_PER_TOKEN: "{a.prefill_us}"
health_check:
  timeout_seconds: 120
  interval_seconds: 1
benchmark:
  type: sa-bench
  isl: {a.isl}
  osl: {a.osl}
  concurrencies: 1
  num_prompts_mult: 1
  num_warmup_mult: 0
  random_range_ratio: 1.0
  req_rate: {a.rate}
  seed: {a.seed}
  metric_percentiles: [50, 90, 99]
"""


class Runner:
    """Runs commands in the scratch directory, inside the namespace when there is one."""

    def __init__(self, work, tools):
        self.work = work
        self.netns = None
        self.env = dict(os.environ)
        self.env["PATH"] = os.path.join(tools, "bin") + os.pathsep + self.env.get("PATH", "")
        self.env.pop("SRT_STATE_DIR", None)
        self.env["SRT_SIM_STARTUP_DELAY_MS"] = "100"
        if os.geteuid() == 0 and shutil.which("ip"):
            self.netns = f"srt-bench-compare-{os.getpid()}"
            subprocess.run(["ip", "netns", "add", self.netns], check=True)
            subprocess.run(["ip", "-n", self.netns, "link", "set", "lo", "up"], check=True)

    def run(self, argv, capture=False):
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns] + argv
        r = subprocess.run(
            argv,
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else None,
            text=True,
        )
        if r.returncode != 0:
            raise SystemExit(f"failed ({r.returncode}): {' '.join(argv)}")
        return r.stdout

    def close(self):
        if self.netns:
            subprocess.run(["ip", "netns", "del", self.netns])


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, int) or float(v).is_integer() and abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", default="1,4,16", help="concurrency levels (default 1,4,16)")
    p.add_argument("--isl", type=int, default=256)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--mult", type=int, default=8, help="requests per level = level x MULT")
    p.add_argument("--rate", default="inf", help="request rate (default inf)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--step-ms", type=int, default=10)
    p.add_argument("--per-seq-us", type=int, default=500)
    p.add_argument("--prefill-us", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="where result files go (default: a temp dir)")
    p.add_argument("--srt", default=os.path.join(ROOT, "target", "debug", "srt"))
    a = p.parse_args()

    tools = os.environ.get("SRT_TOOLS_DIR", os.path.join(ROOT, ".tools"))
    vllm = os.path.join(tools, "vllm-venv", "bin", "vllm")
    for need in (vllm, os.path.join(tools, "bin", "vllm-router"), a.srt):
        if not os.path.exists(need):
            raise SystemExit(f"missing {need} (install-vllm.sh, install-router.sh, cargo build)")
    levels = [int(x) for x in a.levels.replace("x", ",").split(",")]
    out = a.out or tempfile.mkdtemp(prefix="srt-bench-compare-")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="srt-bench-compare-work-")
    with open(os.path.join(work, "recipe.yaml"), "w") as f:
        f.write(recipe(a))
    r = Runner(work, tools)
    rows = []
    try:
        r.run([a.srt, "apply", "-f", "recipe.yaml", "--simulate", "--auto-approve", "--quiet"], capture=True)
        for level in levels:
            n = level * a.mult
            vfile = f"vllm-c{level}.json"
            t = time.time()
            r.run(
                [
                    vllm, "bench", "serve",
                    "--backend", "openai",
                    "--base-url", "http://127.0.0.1:8000",
                    "--endpoint", "/v1/completions",
                    "--model", "tiny",
                    "--tokenizer", MODEL,
                    "--dataset-name", "random",
                    "--random-input-len", str(a.isl),
                    "--random-output-len", str(a.osl),
                    "--random-range-ratio", "0",
                    "--num-prompts", str(n),
                    "--max-concurrency", str(level),
                    "--request-rate", a.rate,
                    "--ignore-eos",
                    "--seed", str(a.seed),
                    "--num-warmups", "0",
                    "--percentile-metrics", "ttft,tpot,itl,e2el",
                    "--metric-percentiles", "50,90,99",
                    "--disable-tqdm",
                    "--save-result",
                    "--result-dir", out,
                    "--result-filename", vfile,
                ],
                capture=True,
            )
            print(f"vllm bench serve, concurrency {level}: {time.time() - t:.0f}s", file=sys.stderr)
            with open(os.path.join(out, vfile)) as f:
                v = json.load(f)
            s = r.run(
                [
                    a.srt, "bench", NAME,
                    "--concurrencies", str(level),
                    "--num-prompts-mult", str(a.mult),
                    "--num-warmup-mult", "0",
                    "--request-rate", a.rate,
                    "--seed", str(a.seed),
                    "--json",
                ],
                capture=True,
            )
            s = json.loads(s.strip().splitlines()[-1])
            with open(os.path.join(out, f"srt-c{level}.json"), "w") as f:
                json.dump(s, f)
            rows.append((level, v, s))
    finally:
        try:
            r.run([a.srt, "destroy", NAME, "--auto-approve", "--quiet"], capture=True)
        finally:
            r.close()
            shutil.rmtree(work, ignore_errors=True)

    print(
        f"Simulated deployment: {a.workers} worker(s) behind vllm-router; step {a.step_ms} ms, "
        f"+{a.per_seq_us} us per decoding sequence, +{a.prefill_us} us per prefilled token. "
        f"Random prompts of {a.isl} tokens, {a.osl} output tokens, {a.mult} x level requests, "
        f"request rate {a.rate}, seed {a.seed}.\n"
    )
    print("| level | metric | vllm bench serve | srt bench | srt vs vLLM |")
    print("|---|---|---|---|---|")
    for level, v, s in rows:
        for label, key in METRICS:
            x, y = v.get(key), s.get(key)
            diff = "-"
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x:
                diff = f"{(y - x) / x * 100:+.1f}%"
            print(f"| {level} | {label} | {fmt(x)} | {fmt(y)} | {diff} |")
    print(f"\nResult files: {out}")


if __name__ == "__main__":
    main()
