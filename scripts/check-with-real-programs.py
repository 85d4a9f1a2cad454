#!/usr/bin/env python3
"""Checks one command line with the real program's own parser, without
running the program.

Usage: <venv>/bin/python scripts/check-with-real-programs.py PROGRAM < argv.json
       PROGRAM: vllm | vllm-router | sglang-router | smg | sglang

stdin: a JSON list of strings, the words after the command prefix, or a JSON
list of such lists (one parser start for many commands; one verdict line each):
  vllm           the words after `vllm serve` (model first, as srt renders it)
  vllm-router    the words after `vllm-router`
  sglang-router  the words after `sglang-router launch`
  smg            the words after `smg launch`
  sglang         the words after `python3 -m sglang.launch_server`

Run it with the interpreter of the venv that holds PROGRAM
(.tools/vllm-venv, .tools/router-venv, .tools/sglang-router-venv,
.tools/smg-venv, .tools/sglang-catalog-venv). It parses
the words as the program does (real_parsers.py), then runs the checks the
program runs right after parsing:
  vllm           ServeSubcommand.validate(args) (validate_parsed_serve_args)
  the Routers    RouterArgs._validate_router_args() (launch_router does so
                 before starting the Rust router)
  sglang         the rest of prepare_server_args (--config merge,
                 ServerArgs.from_cli_args); its resolution, which checks the
                 parallel layout and P/D settings, reads the model and the
                 platform and is not run
Deeper checks that vLLM makes only once it reads the model config (engine
config, parallel layout) are not run.

stdout: one line, {"ok": true} or {"ok": false, "error": "<the program's
message>"}. Exit status 0 when ok, 1 when not, 2 on a usage error. What the
programs log while parsing goes to stderr.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep the work tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_parsers  # noqa: E402


def main(argv):
    if len(argv) != 2 or argv[1] not in real_parsers.PROGRAMS:
        print(__doc__.strip(), file=sys.stderr)
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    program = argv[1]
    try:
        words = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        print(f"stdin is not JSON: {e}", file=sys.stderr)
        return 2
    def words_list(x):
        return isinstance(x, list) and all(isinstance(w, str) for w in x)

    if words_list(words):
        commands = [words]
    elif isinstance(words, list) and words and all(words_list(c) for c in words):
        commands = words
    else:
        print("stdin must be a JSON list of strings, or a list of such lists", file=sys.stderr)
        return 2

    # vLLM's loggers write to stdout: keep stdout for the verdicts alone.
    verdict_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    all_ok = True
    for command in commands:
        try:
            real_parsers.parse(program, command, validate=True)
            result = {"ok": True}
        except real_parsers.ParseError as e:
            result = {"ok": False, "error": str(e)}
            all_ok = False
        sys.stdout.flush()
        verdict_out.write(json.dumps(result) + "\n")
        verdict_out.flush()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
