"""`planner`: the command line, a thin layer over `planner.solve` and the launcher.

One module per command (`models`, `show`, `solve`, `serve`, `bench`, `tune`), each with its
`add_parser` and `run`; `options` holds what several share, `console` where output goes. User
mistakes end here as one paragraph and exit code 2 (1 for an infeasible placement); nothing below
this layer prints or exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from planner.app.cli import bench, models, serve, show, solve, tune
from planner.app.cli.console import EXIT_BROKEN_PIPE, error
from planner.dotted import DottedError, DottedFlags, take
from planner.errors import ConfigError
from planner.plan import EXIT_INVALID

COMMANDS = {"models": models, "show": show, "solve": solve, "serve": serve, "bench": bench,
            "tune": tune}


class _Parser(argparse.ArgumentParser):
    """A usage error (a number out of range, two options that exclude each other) as any other
    error of the command: one paragraph naming the option, exit 2. argparse's own prints the
    whole usage first, which buries the line that names the culprit."""

    def error(self, message: str) -> NoReturn:
        error(f"{message}; see `{self.prog} --help`.")
        raise SystemExit(EXIT_INVALID)


class _VersionAction(argparse.Action):
    """`--version`, reading the package metadata only when asked: importing it costs every
    other command a fifth of `planner solve`'s cold start beyond OR-Tools' own import."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001
        from planner import __version__

        print(f"planner (stage-planner) {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    # No prefixes of options: `--isolat` would silently mean --isolate-stage today and break, or
    # mean something else, the day another option shares the prefix.
    parser = _Parser(
        prog="planner", allow_abbrev=False,
        description="Plan, check and run the process placement of multi-stage (TTS) serving "
                    "pipelines. Exit codes: 0 ok, 1 infeasible placement, 2 invalid request or "
                    "config.")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show the program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(sub)
    for command_parser in sub.choices.values():
        command_parser.allow_abbrev = False
    return parser


def _unknown(parser: argparse.ArgumentParser, command: str | None, extras: list[str]) -> str:
    """One paragraph for arguments no option takes, with the option a prefix abbreviates."""
    where = f"`planner {command}`" if command else "`planner`"
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    own = sub.choices[command] if sub is not None and command in sub.choices else parser
    options = sorted(o for o in own._option_string_actions if o.startswith("--"))
    said = []
    for extra in extras:
        typed = extra.split("=", 1)[0]
        full = [o for o in options if typed.startswith("--") and o.startswith(typed)]
        said.append(f"{extra} (did you mean {' or '.join(full)}? options are not abbreviated)"
                    if full else extra)
    help_command = f"planner {command} --help" if command else "planner --help"
    return f"{where} does not take {', '.join(said)}; see `{help_command}` for what it takes."


# The commands that take sglang-omni's dotted stage flags (`--vocoder.process vocoder`) beside
# the placement flags; the others say where such a flag goes instead.
DOTTED = ("solve", "serve")
_DOTTED_ELSEWHERE = {
    "bench": "give placements with --placement NAME='FLAGS' (e.g. --placement "
             "split='--vocoder.process vocoder') and other stage fields in the --config file",
    "tune": "tune searches the placements itself; put other stage fields in the --config file",
}


def _split_dotted(argv: list[str]) -> tuple[list[str], DottedFlags]:
    """The words argparse reads, and the dotted flags taken out before it reads them (argparse
    would take an unknown flag's value for the MODEL positional)."""
    at = next((i for i, w in enumerate(argv) if w in COMMANDS), None)
    if at is None:
        return argv, DottedFlags()
    rest, flags = take(argv[at + 1:])
    dotted = DottedFlags(flags)
    if flags and argv[at] not in DOTTED:
        where = _DOTTED_ELSEWHERE.get(
            argv[at], "put stage fields in the --config file (sglang-omni's stages: mapping)")
        raise DottedError(f"`planner {argv[at]}` does not take sglang-omni's dotted stage flags "
                          f"({flags[0].spelling}); {where}.")
    dotted.requests()  # a thread count given twice over: said before anything runs
    dotted.overrides()
    return argv[:at + 1] + rest, dotted


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        words, dotted = _split_dotted(list(sys.argv[1:] if argv is None else argv))
    except DottedError as err:
        return error(str(err))
    args, extras = parser.parse_known_args(words)
    args.dotted = dotted
    if extras:
        return error(_unknown(parser, args.command, extras))
    if args.command is None:
        parser.print_help()
        return EXIT_INVALID
    if getattr(args, "model", None) and getattr(args, "model_path", None) \
            and args.model != args.model_path:
        return error(f"MODEL {args.model!r} and --model-path {args.model_path!r} disagree; "
                     "give one.")
    if getattr(args, "model", None) and not getattr(args, "model_path", None):
        args.model_path = args.model  # the positional MODEL is shorthand for --model-path
    previous = _unwind_on_sigterm()
    try:
        code = COMMANDS[args.command].run(args)
        sys.stdout.flush()  # a reader that went away shows here, not as a traceback at exit
        return code
    except ConfigError as err:
        return error(err.paragraph())
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    finally:
        if previous is not _UNSET:
            signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _unwind_on_sigterm():
    """`kill` (or a CI job's timeout) stops a command as Ctrl-C does: unwinding, so the servers
    bench and tune started are stopped in order, not left running. `planner serve` sets its own
    handler once it serves. The previous handler, to put back (`_UNSET` off the main thread,
    where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return _UNSET
    return signal.signal(signal.SIGTERM, _terminated)


_UNSET = object()


def run_and_exit() -> None:
    """The `planner` program: `main`, then exit with its code without the interpreter's teardown
    of its modules (`planner.app.quick_exit`): after a command has closed everything it opened,
    finalizing the modules is time the user waits for and nothing else: 0.6-1.5 s once torch is
    loaded (serve, tune's profiling), about 0.13 s for OR-Tools' own imports (pandas, numpy)
    after `planner solve`. `main` itself returns, for callers in the same process."""
    code = main()
    from planner.app.quick_exit import exit_now

    exit_now(code)


def _reader_gone() -> int:
    """stdout's reader closed it (`planner ... | head`): stop quietly, as `cat` would, and keep
    Python from failing again on the final flush at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    run_and_exit()
