#!/usr/bin/env python3
"""Dumps the command-line flags of a Go program that parses them with Go's
`flag` package (etcd, nats-server) as a JSON catalog on stdout; findings go
to stderr.

Usage: python3 scripts/go-flag-catalog.py PROGRAM
       PROGRAM: etcd | nats-server   (the Debian packages' /usr/bin programs)

Go programs have no argparse object to read, so the catalog comes from the
program itself in two steps:
  1. flag names: every option word that starts a line of `PROGRAM --help`
     (with its aliases on that line: `-a, --addr, --net <host>`; etcd's usage
     lines `etcd --version` too). A word on one line is one option; Go knows
     no aliases, so the grouping is the help text's.
  2. each name is probed with the real parser: `PROGRAM -NAME=<probe> VERSION`
     (VERSION: etcd `--version`, nats-server `-v`, which print the version
     and exit right after parsing), in an empty temporary directory, with a
     timeout. Go's flag package answers
       `invalid boolean value "<probe>"`  -> a bool flag: `-NAME` or
                                              `-NAME=false`, never `-NAME false`
       `invalid value "<probe>" for flag` -> takes a value that must parse
                                              (int, duration, URL list, ...)
       the version, exit 0                -> takes a string value
       `flag provided but not defined`    -> not a flag (the help word is
                                              dropped, and reported)
     Flags that act instead of parsing (help, version, signal, config test)
     are not probed; their kind is fixed below and said so.

Catalog: the fields of scripts/flag-catalog.py's catalogs (program, version,
command, allow_abbrev false, underscore_equivalent false, positionals [],
options sorted by first flag with flags, dest, action, takes_value, nargs,
type, choices null, deprecated, required false) plus
  syntax         "go-flag": `-name` and `--name` are the same flag; a value
                 is the next word or follows `=`; bool flags take no
                 separate word; parsing stops at the first non-flag word or
                 `--`; no abbreviations, no `_`/`-` equivalence
  per option:
    names        the flag names without dashes (what Go's flag package
                 matches, with one or two dashes)
    probe        what the probe saw (bool, typed, string, or fixed:<why>)
  type is "bool", "str" (any text parses), "other:go-typed" (the value must
  parse: int, duration, URLs, ...), or null (help/version).
"""

import json
import os
import re
import subprocess
import sys
import tempfile

PROGRAMS = {
    "etcd": {"version_args": ["--version"], "help_args": ["--help"]},
    "nats-server": {"version_args": ["-v"], "help_args": ["--help"]},
}
# Names not probed: they act (print help, print version, signal a running
# server, test a config and exit) rather than only parse.
FIXED = {
    "etcd": {"h": "help", "help": "help", "version": "version"},
    "nats-server": {
        "h": "help",
        "help": "help",
        "help_tls": "help",
        "v": "version",
        "version": "version",
        "t": "bool",
        "sl": "value",
        "signal": "value",
    },
}
PROBE = "srt-probe-value"
FLAG_WORD = re.compile(r"--?[A-Za-z][A-Za-z0-9_.-]*")


def help_groups(program, text):
    """[[flag words of one help line]] in help order."""
    groups = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(program + " "):
            s = s[len(program) + 1 :]
        words = []
        while True:
            m = FLAG_WORD.match(s)
            if not m:
                break
            words.append(m.group(0))
            s = s[m.end() :]
            sep = re.match(r"\s*(,|\|)\s*", s)
            if not sep:
                break
            s = s[sep.end() :]
        if words:
            groups.append(words)
    return groups


def probe(program, name, tmp):
    cmd = [program, f"-{name}={PROBE}", *PROGRAMS[program]["version_args"]]
    try:
        p = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    out = p.stdout + p.stderr
    if "flag provided but not defined" in out:
        return "undefined", out
    if "invalid boolean value" in out:
        return "bool", out
    if f'invalid value "{PROBE}"' in out:
        return "typed", out
    if p.returncode == 0:
        return "string", out
    return "error", out


def version_of(program):
    out = subprocess.run([program, *PROGRAMS[program]["version_args"]], capture_output=True, text=True).stdout
    m = re.search(r"v?(\d+\.\d+\.\d+)", out)
    if not m:
        raise SystemExit(f"{program}: no version in {out!r}")
    return m.group(1)


def entry(program, words, tmp):
    names = []
    for w in words:
        n = w.lstrip("-")
        if n not in names:
            names.append(n)
    kinds = {}
    for n in names:
        fixed = FIXED[program].get(n)
        kinds[n] = ("fixed:" + fixed, "") if fixed else probe(program, n, tmp)
    defined = [n for n in names if kinds[n][0] != "undefined"]
    for n in names:
        if kinds[n][0] in ("undefined", "timeout", "error"):
            print(f"[go-flag-catalog] {program}: -{n}: {kinds[n][0]} {kinds[n][1].strip()[:160]!r}", file=sys.stderr)
    if not defined:
        return None
    seen = {kinds[n][0] for n in defined}
    if len(seen) != 1:
        raise SystemExit(f"{program}: names on one help line disagree: { {n: kinds[n][0] for n in defined} }")
    kind = seen.pop()
    action, takes_value, ty = {
        "bool": ("store_true", False, "bool"),
        "fixed:bool": ("store_true", False, "bool"),
        "typed": ("store", True, "other:go-typed"),
        "string": ("store", True, "str"),
        "fixed:value": ("store", True, "str"),
        "fixed:help": ("help", False, None),
        "fixed:version": ("version", False, None),
    }[kind]
    flags = [w for w in words if w.lstrip("-") in defined]
    long_names = [n for n in defined if len(n) > 2] or defined
    return {
        "flags": flags,
        "names": defined,
        "dest": long_names[0].replace("-", "_"),
        "action": action,
        "takes_value": takes_value,
        "nargs": None,
        "type": ty,
        "choices": None,
        "deprecated": False,
        "required": False,
        "probe": kind,
    }


def main(argv):
    if len(argv) != 2 or argv[1] not in PROGRAMS:
        print(__doc__.strip(), file=sys.stderr)
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    program = argv[1]
    p = subprocess.run([program, *PROGRAMS[program]["help_args"]], capture_output=True, text=True)
    groups = help_groups(program, p.stdout + p.stderr)
    options = []
    with tempfile.TemporaryDirectory(prefix="go-flag-catalog.") as tmp:
        for words in groups:
            e = entry(program, words, tmp)
            if e:
                options.append(e)
        left = os.listdir(tmp)
        if left:
            raise SystemExit(f"{program}: probing wrote {left} into its working directory")
    by_name = {}
    merged = []
    for e in options:  # a flag listed twice in the help (etcd: --version) is one option
        key = tuple(e["names"])
        if key in by_name:
            continue
        by_name[key] = e
        merged.append(e)
    names = [n for e in merged for n in e["names"]]
    if len(names) != len(set(names)):
        raise SystemExit(f"{program}: a flag name is in two help lines")
    merged.sort(key=lambda e: e["flags"][0].lstrip("-"))
    cat = {
        "program": program,
        "version": version_of(program),
        "command": [program],
        "syntax": "go-flag",
        "allow_abbrev": False,
        "underscore_equivalent": False,
        "positionals": [],
        "options": merged,
    }
    kinds = {}
    for e in merged:
        kinds[e["probe"]] = kinds.get(e["probe"], 0) + 1
    print(f"[go-flag-catalog] {program} {cat['version']}: {len(merged)} options, by probe {kinds}", file=sys.stderr)
    sys.stdout.write(json.dumps(cat, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
