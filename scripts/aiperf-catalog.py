#!/usr/bin/env python3
"""Writes the JSON catalog of `aiperf profile`'s command-line options on stdout,
read from aiperf's own cyclopts application; spot checks go to stderr.

Usage: <aiperf-venv>/bin/python scripts/aiperf-catalog.py \\
           > crates/srt/src/bench/catalog/aiperf-<version>.json
       (scripts/install-aiperf.sh makes the venv; <version> is aiperf's)

aiperf's command line is not argparse but cyclopts. The catalog keeps the
format of scripts/flag-catalog.py (argparse's words), which srt's catalog
reader parses argv by, translated from each cyclopts argument of the
`profile` command (`App.assemble_argument_collection`):
  a switch (a bool: no token)  action store_true; its negative names
                               (`--no-server-metrics`; some arguments list
                               them among their names too) an entry of their
                               own, action store_false, the same dest
  a list (consumes many)       action append, nargs "+": `--url a b` and
                               `--url a --url b` both add values
  anything else                action store, one value
  choices                      an Enum's values, or a Literal's; null else
  type                         int, float, str, bool, or other:<name>
cyclopts takes no abbreviations (allow_abbrev false: `--random-se` is
refused) and reads `--random_seed` as `--random-seed` (underscore_equivalent
true); both are probed by parsing, and the script fails if either changes.
"""
import enum
import importlib.metadata
import json
import sys
import typing


def unwrap_outer(hint):
    """The hint under Optional[...] and Annotated[...] (a list stays a list)."""
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            hint = typing.get_args(hint)[0]
        elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(args) != 1:
                return hint
            hint = args[0]
        else:
            return hint


def unwrap(hint):
    """The type under Optional[...], Annotated[...] and list[...]."""
    hint = unwrap_outer(hint)
    while typing.get_origin(hint) in (list, tuple, set):
        args = typing.get_args(hint)
        hint = unwrap_outer(args[0]) if args else str
    return hint


def choices_of(hint):
    hint = unwrap(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [str(m.value) for m in hint]
    if typing.get_origin(hint) is typing.Literal:
        return [str(v) for v in typing.get_args(hint)]
    return None


def type_of(hint):
    hint = unwrap(hint)
    for t in (bool, int, float, str):
        if hint is t:
            return t.__name__
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "str"
    if typing.get_origin(hint) is typing.Literal:
        return "str"
    return "other:" + getattr(hint, "__name__", str(hint))


def entries(argument):
    """The catalog entries of one cyclopts argument."""
    negatives = [n for n in argument.negatives if n.startswith("-")]
    names = [n for n in argument.names if n.startswith("-") and n not in negatives]
    if not names:
        return []
    dest = argument.name.lstrip("-").replace("-", "_").split(".")[-1]
    count, _ = argument.token_count()
    base = {"choices": None, "deprecated": False, "dest": dest, "required": False}
    if count == 0:
        out = [{**base, "action": "store_true", "flags": names, "nargs": 0, "takes_value": False, "type": None}]
        if negatives:
            out.append({**base, "action": "store_false", "flags": negatives, "nargs": 0,
                        "takes_value": False, "type": None})
        return out
    many = bool(argument.parameter.consume_multiple) or typing.get_origin(unwrap_outer(argument.hint)) in (list, tuple, set)
    return [{**base, "action": "append" if many else "store", "choices": choices_of(argument.hint),
             "flags": names, "nargs": "+" if many else None, "takes_value": True,
             "type": type_of(argument.hint)}]


def profile_app():
    from aiperf.cli import app

    return app["profile"]


def catalog():
    arguments = profile_app().assemble_argument_collection(parse_docstring=False)
    options = [e for a in arguments for e in entries(a)]
    options.sort(key=lambda o: o["flags"][0])
    flags = [f for o in options for f in o["flags"]]
    if len(flags) != len(set(flags)):
        raise RuntimeError("aiperf: an option string is defined twice")
    return {
        "allow_abbrev": False,
        "command": ["aiperf", "profile"],
        "options": options,
        "positionals": [],
        "program": "aiperf",
        "underscore_equivalent": True,
        "version": importlib.metadata.version("aiperf"),
    }


def parses(argv):
    """None when `aiperf profile` parses argv, else cyclopts' message."""
    try:
        profile_app().parse_args(list(argv), exit_on_error=False, print_error=False)
        return None
    except SystemExit as e:  # help or version
        return f"exited {e.code}"
    except Exception as e:  # cyclopts' errors
        return f"{type(e).__name__}: {e}"


def probe_syntax():
    """Fails unless cyclopts still refuses a prefix and takes underscores."""
    base = ["-m", "tiny", "--url", "http://127.0.0.1:8000"]
    if parses(base + ["--random-se", "42"]) is None:
        raise RuntimeError("aiperf now takes a prefix of --random-seed: allow_abbrev changed")
    if parses(base + ["--random_seed", "42"]) is not None:
        raise RuntimeError("aiperf now refuses --random_seed: underscore_equivalent changed")


def spot_checks(cat):
    def show(label, value):
        print(f"[aiperf-catalog] {label}: {value}", file=sys.stderr)

    show("options", len(cat["options"]))
    base = ["-m", "tiny", "--url", "http://127.0.0.1:8000"]
    for argv in (
        ["--random-seed", "42"],
        ["--random_seed", "42"],
        ["--random-se", "42"],
        ["--streaming", "--no-server-metrics"],
        ["--server-metrics", "http://a/metrics", "http://b/metrics"],
        ["--custom-dataset-type", "mooncake_trace", "--input-file", __file__, "--fixed-schedule"],
        ["--custom-dataset-type", "bogus", "--input-file", __file__],
        ["--goodput", "time_to_first_token:2000 inter_token_latency:25"],
        ["--bogus-flag", "1"],
    ):
        message = parses(base + argv)
        show(" ".join(argv), "accepted" if message is None else f"rejected ({message.splitlines()[0]})")


def main():
    cat = catalog()
    probe_syntax()
    spot_checks(cat)
    json.dump(cat, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
