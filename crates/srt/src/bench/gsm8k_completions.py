"""srt's GSM8K evaluation of an OpenAI-compatible `/v1/completions` endpoint.

srtctl evaluates vLLM deployments on GSM8K with its own copy of the evaluation script
in vLLM's source tree (`tests/evals/gsm8k`), which no vLLM package ships. This is srt's
program of the same evaluation, written for srt: the first `--num-shots` questions of
GSM8K's training set, each with its worked answer, as the prefix of every prompt; then
each of the first `--num-questions` test questions, sent as a completion with greedy
sampling by default and the same stop strings; an answer's value is the last whole
number in its text (thousands separators removed), for the reference answers and the
model's alike. It needs Python's standard library only.

GSM8K's two files are read from `--data-dir` (`train.jsonl`, `test.jsonl`, one JSON
object with `question` and `answer` per line), and downloaded there first when they are
missing. The results are printed and, with `--save-results`, written as JSON.

Unlike a plain accuracy script it fails (exit status 1) when the evaluation proves
nothing: more requests failed than `--max-failed-fraction` of the questions, or none
produced an output token.
"""

import argparse
import concurrent.futures
import json
import os
import re
import sys
import time
import urllib.request

GSM8K = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data"
STOP = ["Question", "Assistant:", "<|separator|>"]
INVALID = None


def number(text):
    """The last whole number in `text`, or INVALID."""
    found = re.findall(r"\d+", text.replace(",", ""))
    return int(found[-1]) if found else INVALID


def examples(data_dir, name):
    """The examples of `name` (train or test), downloaded into `data_dir` if missing."""
    path = os.path.join(data_dir, f"{name}.jsonl")
    if not os.path.exists(path):
        os.makedirs(data_dir, exist_ok=True)
        print(f"downloading {GSM8K}/{name}.jsonl to {path}", flush=True)
        with urllib.request.urlopen(f"{GSM8K}/{name}.jsonl", timeout=120) as r:
            body = r.read()
        with open(path + ".part", "wb") as f:
            f.write(body)
        os.replace(path + ".part", path)
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith("#")]


def prompts(train, test, shots, count):
    """The prompts of the first `count` test questions, and their reference values."""
    prefix = "".join(f"Question: {e['question']}\nAnswer: {e['answer']}\n\n" for e in train[:shots])
    chosen = test[:count]
    labels = [number(e["answer"]) for e in chosen]
    if INVALID in labels:
        sys.exit("srt: a GSM8K reference answer holds no number")
    return [f"{prefix}Question: {e['question']}\nAnswer:" for e in chosen], labels


def complete(url, body, timeout):
    """One completion: its text and output tokens, or None when the request failed."""
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            reply = json.load(r)
        return reply["choices"][0]["text"], (reply.get("usage") or {}).get("completion_tokens", 0)
    except Exception as e:  # every failure is counted, and the run goes on
        print(f"srt: a request failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return None


def parser():
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="the server's base URL")
    ap.add_argument("--model", required=True, help="the served model name")
    ap.add_argument("--num-questions", type=int, default=1319)
    ap.add_argument("--num-shots", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--max-failed-fraction", type=float, default=0.05)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--save-results")
    return ap


def main():
    args = parser().parse_args()

    train, test = examples(args.data_dir, "train"), examples(args.data_dir, "test")
    texts, labels = prompts(train, test, args.num_shots, args.num_questions)
    print(f"GSM8K: {len(texts)} questions, {args.num_shots}-shot, model {args.model}", flush=True)

    def ask(prompt):
        body = {
            "model": args.model,
            "prompt": prompt,
            "temperature": args.temperature,
            "max_tokens": args.max_tokens,
            "stop": STOP,
            "seed": args.seed,
        }
        return complete(args.url, body, args.timeout)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.concurrency)) as pool:
        replies = list(pool.map(ask, texts))
    latency = time.perf_counter() - started

    failed = sum(r is None for r in replies)
    predictions = [INVALID if r is None else number(r[0]) for r in replies]
    tokens = sum(r[1] for r in replies if r is not None)
    n = len(texts)
    result = {
        "accuracy": sum(p == l for p, l in zip(predictions, labels)) / n if n else 0.0,
        "invalid_rate": sum(p is INVALID for p in predictions) / n if n else 0.0,
        "failed_requests": failed,
        "latency": latency,
        "questions_per_second": n / latency if latency > 0 else 0.0,
        "total_output_tokens": tokens,
        "tokens_per_second": tokens / latency if latency > 0 else 0.0,
        "num_questions": n,
        "num_shots": args.num_shots,
        "max_tokens": args.max_tokens,
        "model": args.model,
        "temperature": args.temperature,
        "seed": args.seed,
        "timestamp": time.time(),
    }
    for key in ("accuracy", "invalid_rate", "failed_requests", "latency", "total_output_tokens"):
        value = result[key]
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    if args.save_results:
        os.makedirs(os.path.dirname(os.path.abspath(args.save_results)), exist_ok=True)
        with open(args.save_results, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        print(f"results: {args.save_results}")
    if failed > args.max_failed_fraction * n:
        sys.exit(f"srt: {failed} of {n} requests failed, more than max_failed_fraction {args.max_failed_fraction}")
    if n and tokens == 0:
        sys.exit("srt: the evaluation got no output token back")


if __name__ == "__main__":
    main()
