#!/usr/bin/env python3
"""Dumps a program's command-line options, read from its own argparse objects,
as a JSON catalog on stdout; spot checks go to stderr.

Usage: <venv>/bin/python scripts/flag-catalog.py PROGRAM
       PROGRAM: vllm | vllm-router | sglang-router | smg | sglang
                | dynamo-frontend | dynamo-mocker | dynamo-vllm | dynamo-sglang
                | dynamo-trtllm | sglang-run-eval

Run it with the interpreter of the venv that holds PROGRAM;
scripts/flag-catalogs.sh does that for every program and writes the files
under src/. See real_parsers.py for how each parser is obtained.

Catalog (keys sorted, 2-space indent, trailing newline; the same install
gives the same bytes):
  program, version, command        the command name, its release, the argv
                                   prefix the options follow
  allow_abbrev                     the parser accepts unique prefixes of long
                                   options (the attribute, confirmed by
                                   parsing such a prefix)
  underscore_equivalent            --foo_bar is accepted for --foo-bar
                                   (found by parsing one)
  positionals                      [{dest, nargs}]
  options                          sorted by first flag, help excluded:
    flags        option_strings in the parser's order
    dest, required
    action       store, store_true, store_false, store_const, append,
                 append_const, count, boolean_optional, help, version, or
                 other:<Action class>
    takes_value  the option consumes an argument
    nargs        argparse's nargs (null, "?", "*", "+", an integer)
    type         int, float, str, bool (a str->bool converter), json (the
                 value is parsed as JSON: json.loads or vLLM's JSON-to-config
                 parsers), path, other:<function's qualified name>, or null.
                 vLLM wraps types in optional_type()/parse_type() (which also
                 accept "" and "None" as None); those are unwrapped.
                 vLLM's human_readable_int ("1k", "2M") stays other:.
                 SGLang: json_list_type and parse_cuda_graph_config_arg
                 (JSON parsed, then checked) are json; nullable_str ("" and
                 "None" as None) is str; its human_readable_int and
                 parse_cuda_graph_backend_arg stay other:.
    choices      stringified, in the parser's order, or null; sorted where
                 the program draws them from an unordered collection (a set,
                 or sglang-router's tool-call parsers) so that reruns match
    deprecated   argparse's `deprecated` (Python >= 3.13), or, on older
                 Pythons, membership of vLLM's FlexibleArgumentParser
                 `_deprecated` set (its stand-in for that keyword), or vLLM's
                 own marking: a help text saying "<one of its flags> is
                 deprecated" (vLLM 0.32 marks --disable-cascade-attn and
                 --log-config-file that way and passes deprecated=True for no
                 serve option), or SGLang's: one of its Deprecated*Action
                 classes (arg_groups/argparse_actions.py), or a help text
                 opening "Deprecated" or "(Deprecated"
  env (vllm)                       sorted names in vllm.envs.environment_variables
  env (sglang)                     sorted names of the variables
                                   sglang.srt.environ.Envs reads (its fields,
                                   and the deprecated names some fall back to)
  Dynamo programs only:
    env          sorted names of the environment variables that give an
                 option its default (the options' env_var); the Rust runtime
                 reads more (ETCD_ENDPOINTS, NATS_SERVER, DYN_*) that no
                 option names
    per option:
    env_var      the variable Dynamo's add_argument() reads the option's
                 default from (its help ends "env var: NAME | default: ..."),
                 or null
    parser       "dynamo", or for dynamo-vllm, dynamo-sglang and
                 dynamo-trtllm "worker-router": the second parser, which sees
                 only the words the first left, and which accepts unique
                 prefixes (allow_abbrev is the first parser's); see
                 real_parsers.py
  dynamo-trtllm only:
    argv_rewrites        {word: [the words its parser gets instead]}: the
                         deprecated words dynamo.trtllm.args.parse_args
                         replaces before parsing (seen by running it on each
                         word), which are no parser's options
    dynamic_flag_prefix  dynamo.trtllm.dynamic_flags.DYNAMIC_FLAG_PREFIX:
                         the words both parsers leave must be
                         `<prefix><key>[.<key>...] VALUE` pairs (TensorRT-LLM
                         engine overrides); any other word is an error
  Dynamo marks a deprecated option by wrapping its action in a subclass
  named DeprecatedAction; `action` is then that subclass's argparse base.
  SGLang's deprecated actions subclass argparse.Action directly; `action`
  is what they do: DeprecatedStoreTrueAction store_true,
  DeprecatedStoreConstAction store_const when it takes no value (else
  store: --monokernel-backend takes one of its choices),
  DeprecatedAliasStoreAction store.
"""

import argparse
import json
import os
import pathlib
import re
import sys

sys.dont_write_bytecode = True  # keep the work tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_parsers  # noqa: E402

_ACTIONS = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse.BooleanOptionalAction: "boolean_optional",
    argparse._HelpAction: "help",
    argparse._VersionAction: "version",
}
_NO_VALUE = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version", "boolean_optional"}


# SGLang's deprecated flags (sglang/srt/arg_groups/argparse_actions.py), by
# what they do with the command line.
_SGLANG_DEPRECATED = {
    "DeprecatedStoreTrueAction": lambda action: "store_true",
    "DeprecatedStoreConstAction": lambda action: "store_const" if action.nargs == 0 else "store",
    "DeprecatedAliasStoreAction": lambda action: "store",
}


def _is_sglang_deprecated(action):
    cls = type(action)
    return cls.__name__ in _SGLANG_DEPRECATED and cls.__module__.startswith("sglang.")


def action_name(action):
    cls = type(action)
    if _is_sglang_deprecated(action):
        return _SGLANG_DEPRECATED[cls.__name__](action)
    if cls.__name__ == "DeprecatedAction" and not cls.__module__.startswith("sglang."):
        cls = cls.__mro__[1]  # Dynamo's wrapper (configuration/utils.py)
    return _ACTIONS.get(cls) or "other:" + cls.__name__


def _closure_value(fn, name):
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return None
    cells = dict(zip(code.co_freevars, fn.__closure__))
    return cells[name].cell_contents if name in cells else None


def type_name(t):
    if t is None:
        return None
    # vLLM's optional_type(f) and parse_type(f) wrap the real converter f.
    while getattr(t, "__name__", "") in ("_optional_type", "_parse_type") and _closure_value(t, "return_type"):
        t = _closure_value(t, "return_type")
    if t is int:
        return "int"
    if t is float:
        return "float"
    if t is str:
        return "str"
    if t is bool:
        return "bool"
    if t is json.loads:
        return "json"
    if isinstance(t, type) and issubclass(t, (pathlib.PurePath, os.PathLike)):
        return "path"
    name = getattr(t, "__qualname__", None) or type(t).__qualname__
    short = name.rsplit(".", 1)[-1]
    if short == "parse_dataclass":  # vLLM: JSON validated into a config dataclass
        return "json"
    module = getattr(t, "__module__", "") or ""
    if module.startswith("sglang."):
        if short in ("json_list_type", "parse_cuda_graph_config_arg"):  # orjson/json.loads, then checked
            return "json"
        if short == "nullable_str":  # "" and "None" as None
            return "str"
    if re.fullmatch(r"str_?(2|to)_?bool|strtobool|parse_bool|to_bool", short):
        return "bool"
    if isinstance(t, argparse.FileType):
        return "path"
    return "other:" + name


def is_deprecated(program, parser, action):
    if getattr(action, "deprecated", False) or type(action).__name__ == "DeprecatedAction":
        return True
    if _is_sglang_deprecated(action):
        return True
    if action in getattr(parser, "_deprecated", ()):
        return True
    help_text = action.help or ""
    if program == "sglang" and help_text.startswith(("Deprecated", "(Deprecated")):
        return True
    return any(f"{flag} is deprecated" in help_text for flag in action.option_strings)


# Options whose programs build `choices` from an unordered collection, so the
# parser's order changes from run to run: sglang-router takes its tool-call
# parsers from a Rust hash map (get_available_tool_call_parsers), and Dynamo's
# workers take theirs from the Rust runtime's get_tool_parser_names() and
# get_reasoning_parser_names() (also hash maps). Sorted.
UNORDERED_CHOICES = {
    ("sglang-router", "tool_call_parser"),
    ("dynamo-vllm", "dyn_tool_call_parser"),
    ("dynamo-vllm", "dyn_reasoning_parser"),
    ("dynamo-sglang", "dyn_tool_call_parser"),
    ("dynamo-sglang", "dyn_reasoning_parser"),
    ("dynamo-trtllm", "dyn_tool_call_parser"),
    ("dynamo-trtllm", "dyn_reasoning_parser"),
}


def choices_of(program, action):
    if action.choices is None:
        return None
    values = [str(c) for c in action.choices]
    if isinstance(action.choices, (set, frozenset)) or (program, action.dest) in UNORDERED_CHOICES:
        values.sort()
    return values


# The words dynamo.trtllm.args.parse_args rewrites before parsing, read in its
# source; what each becomes is seen by running it (real_parsers).
TRTLLM_DEPRECATED_WORDS = ("--publish-events-and-metrics", "--no-publish-events-and-metrics")

_ENV_VAR = re.compile(r"env var: ([A-Za-z_][A-Za-z0-9_]*)")


def option_entry(program, parser, action, role=None):
    kind = action_name(action)
    entry = {
        "flags": list(action.option_strings),
        "dest": action.dest,
        "action": kind,
        "takes_value": False if kind in _NO_VALUE else action.nargs != 0,
        "nargs": action.nargs,
        "type": type_name(action.type),
        "choices": choices_of(program, action),
        "deprecated": is_deprecated(program, parser, action),
        "required": bool(action.required),
    }
    if program in real_parsers.DYNAMO_PROGRAMS:
        m = _ENV_VAR.search(action.help or "")
        entry["env_var"] = m.group(1) if m else None
        entry["parser"] = role
    return entry


def _parses(program, argv):
    try:
        return real_parsers.parse(program, argv, validate=False)
    except real_parsers.ParseError:
        return None


def _base_argv(program):
    if program == "vllm":
        return ["tiny-model"]
    if program == "sglang":  # --model-path is required
        return ["--model-path", "tiny-model"]
    return []


def probe_abbrev(program, options):
    """Parses a unique prefix of a long string-valued option; True if accepted."""
    longs = [f for o in options for f in o["flags"] if f.startswith("--")]
    for o in options:
        if o["action"] != "store" or o["type"] != "str" or o["choices"] or o["nargs"] is not None:
            continue
        for flag in (f for f in o["flags"] if f.startswith("--")):
            for n in range(3, len(flag)):
                prefix = flag[:n]
                if prefix not in longs and [f for f in longs if f.startswith(prefix)] == [flag]:
                    args = _parses(program, _base_argv(program) + [prefix, "probe-value"])
                    return args is not None and getattr(args, o["dest"], None) == "probe-value", prefix
    raise RuntimeError(f"{program}: no option to probe abbreviations with")


def probe_underscore(program, options):
    """Parses --foo_bar for a store_true/boolean_optional --foo-bar; True if accepted."""
    flags = {f for o in options for f in o["flags"]}
    for o in options:
        if o["action"] not in ("store_true", "boolean_optional"):
            continue
        flag = o["flags"][0]
        under = "--" + flag[2:].replace("-", "_")
        if flag.startswith("--") and "-" in flag[2:] and under not in flags:
            args = _parses(program, _base_argv(program) + [under])
            return args is not None and getattr(args, o["dest"], None) is True, under
    # A parser without such a switch (sglang-run-eval): an int-valued --foo-bar.
    for o in options:
        flag = o["flags"][0]
        under = "--" + flag[2:].replace("-", "_")
        if o["action"] == "store" and o["type"] == "int" and "-" in flag[2:] and under not in flags:
            args = _parses(program, _base_argv(program) + [under, "7"])
            return args is not None and getattr(args, o["dest"], None) == 7, under
    raise RuntimeError(f"{program}: no option to probe underscores with")


def catalog(program):
    if program in real_parsers.DYNAMO_PROGRAMS:
        parsers = real_parsers.dynamo_parsers(program)
    else:
        parsers = [(None, real_parsers.options_parser(program, with_help=True))]
    parser = parsers[0][1]
    options, positionals = [], []
    for role, p in parsers:
        for action in p._actions:
            if not action.option_strings:
                positionals.append({"dest": action.dest, "nargs": action.nargs})
            elif not isinstance(action, argparse._HelpAction):
                options.append(option_entry(program, p, action, role))
    options.sort(key=lambda o: o["flags"][0])
    flags = [f for o in options for f in o["flags"]]
    if len(flags) != len(set(flags)):
        raise RuntimeError(f"{program}: an option string is defined twice")

    abbrev, abbrev_probe = probe_abbrev(program, options)
    if abbrev != parser.allow_abbrev:
        raise RuntimeError(
            f"{program}: allow_abbrev is {parser.allow_abbrev} but parsing {abbrev_probe} gave {abbrev}"
        )
    underscore, underscore_probe = probe_underscore(program, options)
    out = {
        "program": program,
        "version": real_parsers.program_version(program),
        "command": real_parsers.COMMANDS[program],
        "allow_abbrev": parser.allow_abbrev,
        "underscore_equivalent": underscore,
        "positionals": positionals,
        "options": options,
    }
    if program == "vllm":
        import vllm.envs

        out["env"] = sorted(vllm.envs.environment_variables)
    if program == "sglang":
        from sglang.srt.environ import EnvField, Envs

        fields = [f for f in vars(Envs).values() if isinstance(f, EnvField)]
        aliases = {f.deprecated_name for f in fields if getattr(f, "deprecated_name", None)}
        out["env"] = sorted({f.name for f in fields} | aliases)
    if program in real_parsers.DYNAMO_PROGRAMS:
        out["env"] = sorted({o["env_var"] for o in options if o["env_var"]})
    if program == "dynamo-trtllm":
        from dynamo.trtllm.dynamic_flags import DYNAMIC_FLAG_PREFIX

        out["argv_rewrites"] = real_parsers.trtllm_argv_rewrites(TRTLLM_DEPRECATED_WORDS)
        out["dynamic_flag_prefix"] = DYNAMIC_FLAG_PREFIX
    probes = {"abbrev": (abbrev_probe, abbrev), "underscore": (underscore_probe, underscore)}
    return out, probes


def spot_checks(program, cat, probes):
    by_flag = {f: o for o in cat["options"] for f in o["flags"]}

    def show(label, value):
        print(f"[flag-catalog] {program}: {label}: {value}", file=sys.stderr)

    def opt(flag, *keys):
        o = by_flag.get(flag)
        return "ABSENT" if o is None else {k: o[k] for k in keys}

    def parse_result(argv, validate=False):
        try:
            real_parsers.parse(program, _base_argv(program) + argv, validate=validate)
            return "accepted"
        except real_parsers.ParseError as e:
            return f"rejected ({e})"

    show("options", len(cat["options"]))
    show("allow_abbrev", f"{cat['allow_abbrev']} (parsing {probes['abbrev'][0]} -> {probes['abbrev'][1]})")
    show(
        "underscore_equivalent",
        f"{cat['underscore_equivalent']} (parsing {probes['underscore'][0]} -> {probes['underscore'][1]})",
    )
    show("deprecated", [o["flags"][0] for o in cat["options"] if o["deprecated"]])
    if program not in real_parsers.DYNAMO_PROGRAMS:
        try:
            port = real_parsers.parse(program, _base_argv(program) + ["--por", "1"], validate=False).port
            show("'--por 1'", f"accepted as --port {port}")
        except real_parsers.ParseError as e:
            show("'--por 1'", f"rejected ({e})")
    if program == "vllm":
        show("--enforce-eager", opt("--enforce-eager", "flags", "action", "takes_value"))
        show("--kv-transfer-config", opt("--kv-transfer-config", "action", "type"))
        show("--data-parallel-size", opt("--data-parallel-size", "flags", "type"))
        show("--enable-scale-out", opt("--enable-scale-out", "flags", "action"))
        show("--headless", opt("--headless", "action"))
        show("--device-ids", opt("--device-ids", "type"))
        show("json-typed", [o["flags"][0] for o in cat["options"] if o["type"] == "json"])
        show("env count", len(cat["env"]))
        show("VLLM_PORT in env", "VLLM_PORT" in cat["env"])
    elif program in real_parsers.DYNAMO_PROGRAMS:
        show("env", cat["env"])
        show("by parser", {r: sum(o["parser"] == r for o in cat["options"]) for r in ("dynamo", "worker-router")})
        for flag in ("--namespace", "--discovery-backend", "--request-plane", "--event-plane",
                     "--router-mode", "--disaggregation-mode", "--migration-limit", "--http-port",
                     "--bootstrap-ports", "--endpoint"):
            if flag in by_flag:
                show(flag, opt(flag, "action", "type", "choices", "env_var"))
        show("'--bogus-flag 1'", parse_result(["--bogus-flag", "1"]))
        if program == "dynamo-trtllm":
            for flag in ("--model-path", "--served-model-name", "--extra-engine-args", "--publish-kv-events",
                         "--publish-metrics", "--publish-events-and-metrics", "--connector", "--headless"):
                show(flag, opt(flag, "flags", "action", "env_var", "parser"))
            show("argv_rewrites", cat["argv_rewrites"])
            srtctl = ["--model-path", "m", "--served-model-name", "n", "--disaggregation-mode", "prefill",
                      "--extra-engine-args", "e.yaml", "--request-plane", "nats", "--publish-events-and-metrics"]
            show(f"parse_args({' '.join(srtctl)})", parse_result(srtctl, validate=True))
            show("'--trtllm.kv_cache_config.free_gpu_memory_fraction 0.7' (validated)",
                 parse_result(["--trtllm.kv_cache_config.free_gpu_memory_fraction", "0.7"], validate=True))
            show("'--bogus-flag 1' (validated)", parse_result(["--bogus-flag", "1"], validate=True))
    elif program == "sglang":
        for flag in ("--model-path", "--served-model-name", "--host", "--port", "--tp-size", "--dp-size",
                     "--enable-dp-attention", "--attn-dp-size", "--ep-size", "--nnodes", "--node-rank",
                     "--dist-init-addr", "--nccl-port", "--base-gpu-id", "--disaggregation-mode",
                     "--disaggregation-bootstrap-port", "--disaggregation-transfer-backend",
                     "--disaggregation-ib-device", "--skip-server-warmup", "--trust-remote-code"):
            show(flag, opt(flag, "flags", "action", "type", "nargs", "choices", "required"))
        show("env count", len(cat["env"]))
        show("'--tp-size 2 --dp-size 2 --enable-dp-attention'",
             parse_result(["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"]))
        show("'--disaggregation-mode both'", parse_result(["--disaggregation-mode", "both"]))
        show("'--tp 2' (a prefix of --tp-size alone)", parse_result(["--tp", "2"]))
    else:
        show("--policy", opt("--policy", "choices"))
        show("--prefill", opt("--prefill", "action", "nargs"))
    if program not in real_parsers.DYNAMO_PROGRAMS:
        show("'--port=18000'", parse_result(["--port=18000"]))
        show("'--port 18000'", parse_result(["--port", "18000"]))


def main(argv):
    if len(argv) != 2 or argv[1] not in real_parsers.PROGRAMS:
        print(__doc__.strip(), file=sys.stderr)
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    program = argv[1]
    # vLLM's loggers print to stdout: keep stdout for the catalog alone.
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    cat, probes = catalog(program)
    spot_checks(program, cat, probes)
    sys.stdout.flush()
    real_stdout.write(json.dumps(cat, indent=2, sort_keys=True) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
