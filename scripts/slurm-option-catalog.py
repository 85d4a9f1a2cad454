#!/usr/bin/env python3
"""Prints the option catalog of an installed SLURM client (srun or sbatch) as JSON.

Usage: slurm-option-catalog.py PROGRAM PACKAGE_VERSION

  PROGRAM is srun or sbatch; PACKAGE_VERSION the Debian version of the
  package that installed it (recorded in the catalog).

Run by scripts/slurm-option-catalogs.sh, which points SLURM_CONF at a minimal
configuration: the clients read one before they parse their options, and no
controller is needed, since every probe ends in a parse error.

The program's own option parser (glibc getopt_long) is the source of truth:

* names: every `--name` and `-X` in `PROGRAM --help` and `--usage`, plus every
  candidate the program lists when a prefix is ambiguous (each prefix of each
  known name is probed, and each single letter), so options the help leaves out
  are found too;
* arguments: `PROGRAM --name=x --srt-probe-guard` says "doesn't allow an argument"
  (none), or the guard is reached or the value refused (an argument), and then
  `PROGRAM --name` says "requires an argument" (required) or not (optional);
  short letters likewise with `-X% --srt-probe` and `-X`;
* the short letter of a long option: the help's `-X, --name` pairs;
* a cross-check: every proper prefix of every name is read by the model srt
  uses (an exact name wins, one candidate is that option, several are
  ambiguous) and by the program; any difference fails the dump.

The output is deterministic (sorted, no timestamps).
"""

import json
import re
import string
import subprocess
import sys

GUARD = "--srt-probe-guard"
TIMEOUT = 20


def run(program, args):
    """The program's stderr+stdout and exit code for `args` (stdin closed)."""
    p = subprocess.run(
        [program, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=TIMEOUT,
        text=True,
        check=False,
    )
    return p.stdout, p.returncode


def names_in_help(program):
    """Long names, short letters and `-X, --name` pairs the help and usage show."""
    help_text, _ = run(program, ["--help"])
    usage, _ = run(program, ["--usage"])
    longs, shorts, pairs = set(), set(), {}
    for line in (help_text + "\n" + usage).splitlines():
        for m in re.finditer(r"(?<![\w-])--([A-Za-z][\w-]*)", line):
            longs.add(m.group(1))
        for m in re.finditer(r"(?:^\s+|\[)-([A-Za-z0-9])\b", line):
            shorts.add(m.group(1))
        m = re.match(r"^\s+-([A-Za-z0-9]),?\s+--([A-Za-z][\w-]*)", line)
        if m:
            pairs[m.group(1)] = m.group(2)
    return longs, shorts, pairs


def ambiguous(out):
    """The candidates of an "is ambiguous" error in the parser's table order (the
    first is the option the parser found first), or None."""
    m = re.search(r"is ambiguous; possibilities:(.*)", out)
    if not m:
        return None
    return list(dict.fromkeys(re.findall(r"'--([^']+)'", m.group(1))))


def read_prefix(program, text):
    """How the program reads `--text=x`: ("ambiguous", names), ("unknown",),
    ("none", name) or ("argument",)."""
    out, _ = run(program, [f"--{text}=x", GUARD])
    names = ambiguous(out)
    if names is not None:
        return ("ambiguous", names)
    m = re.search(r"option '--([^'=]+)' doesn't allow an argument", out)
    if m:
        return ("none", m.group(1))
    if f"unrecognized option '--{text}=x'" in out:
        return ("unknown",)
    return ("argument",)


def discover(program, seeds):
    """Every long name: the seeds, and the candidates of every ambiguous prefix of
    a known name or of a single letter."""
    known = set(seeds)
    probed = set()
    todo = set(string.ascii_lowercase) | {n[:k] for n in known for k in range(1, len(n))}
    while todo:
        prefix = todo.pop()
        probed.add(prefix)
        result = read_prefix(program, prefix)
        if result[0] != "ambiguous":
            continue
        for name in result[1]:
            if name not in known:
                known.add(name)
                todo |= {name[:k] for k in range(1, len(name))} - probed
    return {n for n in known if read_prefix(program, n)[0] != "unknown"}


def long_argument(program, name):
    """none, required or optional, as the program's parser has `--name`."""
    result = read_prefix(program, name)
    if result[0] == "none":
        return "none"
    out, _ = run(program, [f"--{name}"])
    if f"option '--{name}' requires an argument" in out:
        return "required"
    return "optional"


def short_argument(program, letter):
    """none, required, optional, or None when `-letter` is not an option."""
    out, code = run(program, [f"-{letter}%", GUARD])
    if f"invalid option -- '{letter}'" in out:
        return None
    if "invalid option -- '%'" in out or code == 0:
        # `%` read as the next option, or an option that acts at once (help).
        return "none"
    out, _ = run(program, [f"-{letter}"])
    if f"option requires an argument -- '{letter}'" in out:
        return "required"
    return "optional"


def matches(longs, text):
    """The names `--text` is a prefix of (itself alone when it is a name)."""
    if text in longs:
        return [text]
    return sorted(n for n in longs if n.startswith(text))


def aliases(program, longs, seeds):
    """Name -> the name it is another spelling of (same argument, same option).

    getopt_long reads a prefix of several names as one option when they all
    are the same option, and leaves those that are the option it found first
    out of an ambiguity's list: a name a prefix matches that the list leaves
    out, or names a prefix matches that are not ambiguous, are one option. Its
    name is the one `--help` shows, else the parser's first."""
    group = {n: n for n in longs}

    def root(n):
        while group[n] != n:
            n = group[n]
        return n

    def join(a, b):
        a, b = root(a), root(b)
        if a != b:
            keep, drop = sorted((a, b), key=lambda n: (n not in seeds, n))
            group[drop] = keep

    for text in sorted({n[:k] for n in longs for k in range(1, len(n))}):
        hits = matches(longs, text)
        if len(hits) < 2:
            continue
        result = read_prefix(program, text)
        if result[0] == "ambiguous":
            for n in set(hits) - set(result[1]):
                join(n, result[1][0])
        else:
            for n in hits[1:]:
                join(n, hits[0])
    return {n: root(n) for n in longs if root(n) != n}


def model(longs, alias, text):
    """srt's reading of `--text`: ("one", name) or ("ambiguous", names), with
    every name an option's own, or ("unknown",)."""
    hits = sorted({alias.get(n, n) for n in matches(longs, text)})
    if not hits:
        return ("unknown",)
    if len(hits) == 1:
        return ("one", hits[0])
    return ("ambiguous", hits)


def agrees(program, longs, alias, text):
    """Whether srt's model reads `--text=x` as the program does."""
    mine = model(longs, alias, text)
    theirs = read_prefix(program, text)
    if theirs[0] == "ambiguous":
        return mine == ("ambiguous", sorted({alias.get(n, n) for n in theirs[1]}))
    if theirs[0] == "none":
        return mine == ("one", alias.get(theirs[1], theirs[1]))
    if theirs[0] == "unknown":
        return mine == ("unknown",)
    return mine[0] == "one" and longs[mine[1]] != "none"


def cross_check(program, longs, alias):
    """Every prefix of every name the model and the program read apart."""
    prefixes = sorted({n[:k] for n in longs for k in range(1, len(n) + 1)})
    return [p for p in prefixes if not agrees(program, longs, alias, p)]


def version(program):
    out, _ = run(program, ["--version"])
    return out.split()[-1]


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("srun", "sbatch"):
        sys.exit(__doc__)
    program, package_version = sys.argv[1], sys.argv[2]
    seeds, short_seeds, pairs = names_in_help(program)
    longs = {n: long_argument(program, n) for n in sorted(discover(program, seeds))}
    alias = aliases(program, longs, seeds)
    bad = cross_check(program, longs, alias)
    if bad:
        sys.exit(f"{program}: srt's reading differs from the program's for: {bad}")
    letters = sorted(short_seeds | set(string.ascii_letters + string.digits))
    shorts = {}
    for letter in letters:
        argument = short_argument(program, letter)
        if argument is not None:
            shorts[letter] = argument
    short_of = {name: letter for letter, name in pairs.items() if letter in shorts}
    catalog = {
        "program": program,
        "version": version(program),
        "package_version": package_version,
        "source": f"{program} --help, --usage and probes of its option parser",
        "long": [
            {"name": n, "argument": a, "short": short_of.get(n), "alias_of": alias.get(n)}
            for n, a in longs.items()
        ],
        "short": [
            {"letter": s, "argument": a, "long": pairs.get(s) if pairs.get(s) in longs else None}
            for s, a in shorts.items()
        ],
    }
    write(catalog)


def write(catalog):
    """The catalog as JSON, one option a line (reviewable diffs)."""
    out = sys.stdout
    out.write("{\n")
    for key in ("program", "version", "package_version", "source"):
        out.write(f"  {json.dumps(key)}: {json.dumps(catalog[key])},\n")
    for i, key in enumerate(("long", "short")):
        rows = ",\n".join(f"    {json.dumps(row)}" for row in catalog[key])
        out.write(f"  {json.dumps(key)}: [\n{rows}\n  ]{',' if i == 0 else ''}\n")
    out.write("}\n")


if __name__ == "__main__":
    main()
