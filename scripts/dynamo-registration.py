#!/usr/bin/env python3
"""Writes, on stdout, which registration flags each ai-dynamo release's engine wrappers
(and its mocker, which registers as they do) take:
`crates/srt/src/frontend/dynamo/registration.json`.

Usage: scripts/dynamo-registration.py [VERSION ...]
       (default: the releases srt has the frontend's catalogs of)

How a worker registers changed in ai-dynamo 1.0.0: the wrappers of 0.8 and 0.9
(`python3 -m dynamo.vllm`, `dynamo.sglang`, `dynamo.trtllm`) take no
`--discovery-backend` (their key-value store is `--store-kv`), `dynamo.vllm` takes no
`--endpoint` (its namespace is the variable `DYN_NAMESPACE`) and no
`--disaggregation-mode` (`--is-prefill-worker`, `--is-decode-worker`), and each parses
its command line strictly, so a flag of the later form stops the worker at startup.
srt renders each release's form from this catalog.

Why the source and not the parsers: the wrappers import their engine (vLLM, SGLang,
TensorRT-LLM) before they build a parser, and those need CUDA. This script downloads
each release's `ai-dynamo` wheel from PyPI (`pip download --no-deps`), never imports
it, and reads the flags its wrappers' source declares with `ast` (standard library
only), tests excluded: in the wrapper's own `dynamo/<engine>/`, every string that is
one of the flags below (declared by `add_argument` or in a table of flags); in
`dynamo/common/` (1.0.0 and later: argument groups every wrapper shares),
`add_argument("--flag", ...)` and `flag_name="--flag"`. Only the flags below are
recorded. For each release the output names the wheel and the sha256 of its bytes.
The Rust side checks the newest release's entry against the catalogs dumped from the
running 1.6.1 parsers (`frontend::dynamo::registration`).
"""

import ast
import hashlib
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
WRAPPERS = {
    "dynamo.vllm": "vllm",
    "dynamo.sglang": "sglang",
    "dynamo.trtllm": "trtllm",
    "dynamo.mocker": "mocker",
}
FLAGS = [
    "--endpoint",
    "--discovery-backend",
    "--store-kv",
    "--disaggregation-mode",
    "--is-prefill-worker",
    "--is-decode-worker",
    "--request-plane",
    "--event-plane",
]


def releases():
    """The releases of srt's frontend catalogs (`release.rs`)."""
    text = (ROOT / "crates/srt/src/frontend/dynamo/release.rs").read_text()
    return re.findall(r'\("(\d+\.\d+\.\d+)", include_str!\("catalog/dynamo-frontend-', text)


def named(source):
    """Every string constant of a wrapper's own module that is a recorded flag: the
    wrappers declare theirs in `add_argument` calls and in tables of flags (0.8's
    `dynamo.sglang`: `{"endpoint": {"flags": ["--endpoint"], ...}}`)."""
    return {
        n.value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in FLAGS
    }


def declared(source):
    """The flags a shared module's source declares: `add_argument("--flag")` and
    `flag_name="--flag"`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        if name == "add_argument":
            found.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
        for k in node.keywords:
            if k.arg == "flag_name" and isinstance(k.value, ast.Constant):
                found.add(k.value.value)
    return found


def flags_of(wheel, engine):
    """The recorded flags of wrapper `engine` in `wheel`."""
    found = set()
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            parts = name.split("/")
            if not name.endswith(".py") or "tests" in parts:
                continue
            if name.startswith(f"dynamo/{engine}/"):
                found |= named(z.read(name).decode("utf-8"))
            elif name.startswith("dynamo/common/"):
                found |= declared(z.read(name).decode("utf-8"))
    return sorted(f for f in found if f in FLAGS)


def main():
    versions = sys.argv[1:] or releases()
    out = {"program": "ai-dynamo-wrapper-registration", "flags": FLAGS, "releases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for v in versions:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"ai-dynamo=={v}", "-d", tmp],
                check=True,
            )
            wheel = pathlib.Path(tmp) / f"ai_dynamo-{v}-py3-none-any.whl"
            entry = {"wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
            entry.update({module: flags_of(wheel, engine) for module, engine in WRAPPERS.items()})
            out["releases"][v] = entry
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
