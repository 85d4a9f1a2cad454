#!/usr/bin/env python3
"""How srt reads srtctl's public recipes (docs/srtctl.md): `srt validate` on every
YAML file under the given directories, then the files that validate and the refusals
grouped by diagnostic code and key, as Markdown.

Usage: scripts/srtctl-corpus.py [--srt PATH] [--cluster FILE [--stand-in-scripts]] DIR [DIR ...]

`--cluster FILE` reads every recipe with that cluster profile (srtctl's `srtslurm.yaml`
works: with `srtctl_root` naming an srt-slurm checkout, a recipe's `setup_script` is
found in its `configs/` as srtctl finds it); without it, with none.

`--stand-in-scripts` (with an `srtslurm.yaml` that names `srtctl_root`) measures what
the recipes need besides their users' own setup scripts: it copies the root's
`configs/` into a temporary root, adds an empty script of each `setup_script` name the
recipes give that is in neither `configs/` nor `configs/patches/`, lists them, and
reads every recipe with a copy of the cluster file naming that root.

The corpus: NVIDIA/srt-slurm's `recipes/` and NVIDIA/srt-slurm-recipes, e.g.
  git clone https://github.com/NVIDIA/srt-slurm && git clone https://github.com/NVIDIA/srt-slurm-recipes
  scripts/srtctl-corpus.py srt-slurm/recipes srt-slurm-recipes/recipes

A file's refusals are those of the first stage that refuses it (loading, then the
engine's and frontend's checks), so a key can hide others behind it. Each refusal is
named by its code and the key or flag it is at (numbers and role names folded), and
counted once per file.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENTRY = re.compile(r"^(Error|Warning): (srt::[a-z0-9_:]+)\s*$")
# One problem alone is printed without the `Error:`/`Warning:` line: its code heads
# the output, and its symbol gives its level.
SOLE = re.compile(r"^(srt::[a-z0-9_:]+)\s*$")
MESSAGE = re.compile(r"^\s*([×⚠]) (.*)$")
# The heads of several problems (each then listed with its own entry).
AGGREGATES = ("srt::recipe::invalid", "srt::recipe::warnings")


def recipes(dirs):
    for d in dirs:
        for path in sorted(Path(d).rglob("*")):
            if path.suffix in (".yaml", ".yml") and path.is_file():
                yield path


def problems(srt, path, cluster):
    env = dict(os.environ, NO_COLOR="1")
    env.pop("SRT_CLUSTER", None)
    env.pop("SRTSLURM_CONFIG", None)
    if cluster:
        env["SRT_CLUSTER"] = cluster
    else:
        # No profile found where srtctl looks (the corpus' parent directories).
        env["SRTSLURM_CONFIG"] = os.devnull
    run = subprocess.run(
        [srt, "validate", "-f", str(path)], capture_output=True, text=True, env=env
    )
    found, code = [], None
    for line in run.stderr.splitlines():
        entry = ENTRY.match(line)
        sole = SOLE.match(line)
        if entry:
            code = (entry.group(1), entry.group(2))
            continue
        if sole and sole.group(1) not in AGGREGATES:
            code = (None, sole.group(1))
            continue
        message = MESSAGE.match(line)
        if message and code:
            level = code[0] or ("Error" if message.group(1) == "×" else "Warning")
            found.append(((level, code[1]), message.group(2)))
            code = None
    return run.returncode == 0, found


SETUP_SCRIPT = re.compile(r"""^\s*setup_script:\s*["']?([A-Za-z0-9._-]+)""", re.M)
ROOT = re.compile(r"^srtctl_root:\s*(\S+)\s*$", re.M)


def stand_ins(cluster, dirs, tmp):
    """A cluster file whose `srtctl_root` is a copy of `cluster`'s with an empty script
    for every `setup_script` the recipes under `dirs` name that it lacks, and those
    names."""
    text = Path(cluster).read_text()
    found = ROOT.search(text)
    if not found:
        sys.exit(f"{cluster}: no `srtctl_root:` to copy")
    configs = Path(found.group(1)) / "configs"
    root = Path(tmp) / "root"
    shutil.copytree(configs, root / "configs")
    names = {m for path in recipes(dirs) for m in SETUP_SCRIPT.findall(path.read_text())}
    missing = sorted(n for n in names if not (configs / n).exists() and not (configs / "patches" / n).exists())
    for name in missing:
        script = root / "configs" / name
        script.write_text("#!/bin/sh\n# an empty stand-in for a user's own script\n")
        script.chmod(0o644)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o022)
    profile = Path(tmp) / "srtslurm.yaml"
    profile.write_text(ROOT.sub(f"srtctl_root: {root}", text))
    return str(profile), missing


def subject(message):
    """The key or flag a message is about: its first `...` quote (else its first words),
    role and numbers folded."""
    quoted = re.search(r"`([^`]+)`", message)
    # Unquoted: the message up to its first colon, paths cut to their file names.
    text = quoted.group(1) if quoted else re.sub(r"\S*/", "", message.split(":")[0])[:60]
    text = re.sub(r"^roles\.(prefill|decode|agg)\.", "roles.*.", text)
    return re.sub(r"\d+", "N", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--srt", default="target/debug/srt")
    ap.add_argument("--cluster", default=None)
    ap.add_argument("--stand-in-scripts", action="store_true")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    if args.stand_in_scripts:
        if not args.cluster:
            sys.exit("--stand-in-scripts needs --cluster")
        tmp = tempfile.TemporaryDirectory()
        args.cluster, missing = stand_ins(args.cluster, args.dirs, tmp.name)
        print(f"With empty stand-ins of {', '.join(f'`{m}`' for m in missing)}:\n")
    total, valid = 0, 0
    refusals, notes = collections.Counter(), collections.Counter()
    for path in recipes(args.dirs):
        total += 1
        ok, found = problems(args.srt, path, args.cluster)
        valid += ok
        seen = set()
        for (level, code), message in found:
            if code == "srt::recipe::invalid":
                continue
            # A note is counted by its code: its message names no key.
            key = (code, subject(message) if level == "Error" else "")
            if key in seen:
                continue
            seen.add(key)
            (notes if level == "Warning" else refusals)[key] += 1
    print(f"{valid} of {total} files validate.\n")
    print("| files | refused by | at |\n|---:|---|---|")
    for (code, at), n in refusals.most_common():
        print(f"| {n} | `{code}` | `{at}` |")
    print("\n| files | note |\n|---:|---|")
    for (code, _), n in notes.most_common():
        print(f"| {n} | `{code}` |")


if __name__ == "__main__":
    sys.exit(main())
