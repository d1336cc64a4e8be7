"""Options declared once (`planner.app.cli.declared`): for every option of every command built so,
the parser reads what the declaration says and `to_argv` writes back what parses to the same
options; so adding an option to a command's dataclass is the whole change."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import pytest

from planner.app.bench.options import BenchOptions
from planner.app.cli import build_parser
from planner.app.cli.declared import Declared, Flag
from planner.app.cli.options import ModelChoice
from planner.app.tune.options import TuneOptions

COMMANDS = {"bench": BenchOptions, "tune": TuneOptions}
CANDIDATES = ("3", "0.5", "7", "x.yaml")  # a sample value: the first its type takes


def parse(command: str, argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args([command, *argv])


def sample(flag: Flag) -> list[str]:
    """Words that give `flag` a value other than its default."""
    if flag.switch:
        return [flag.name]
    if flag.choices:
        return [flag.name, next(c for c in reversed(flag.choices) if c != flag.default)]
    for text in CANDIDATES:
        try:
            value = flag.type(text) if flag.type else text
        except (argparse.ArgumentTypeError, ValueError):
            continue
        if value != flag.default:
            return [flag.name, text, *([flag.name, "1"] if flag.repeat else [])]
    raise AssertionError(f"no sample value for {flag.name}")


def every_option(options: type[Declared]) -> list[tuple[str, Flag]]:
    return list(options.declared())


@pytest.mark.parametrize("command, name, flag", [
    (command, name, flag) for command, options in COMMANDS.items()
    for name, flag in every_option(options)])
def test_every_option_parses_into_its_field_and_writes_back_the_same(command, name, flag):
    options = COMMANDS[command]
    words = sample(flag)
    given = options.from_args(parse(command, words))
    field = getattr(given.model, name) if name in ModelChoice.__dataclass_fields__ \
        else getattr(given, name)
    assert field not in (None, (), False) and field != flag.default
    assert options.from_args(parse(command, given.to_argv())) == given
    assert options.flag(name) == flag.name
    # as a person types it: only what differs from the defaults, and it parses back the same
    assert options.from_args(parse(command, given.given_argv())) == given
    assert flag.name in given.given_argv()


@pytest.mark.parametrize("command", COMMANDS)
def test_given_argv_of_the_defaults_is_empty(command):
    assert COMMANDS[command].from_args(parse(command, [])).given_argv() == []


@pytest.mark.parametrize("command", COMMANDS)
def test_nothing_given_is_the_declared_defaults_and_writes_back_as_such(command):
    options = COMMANDS[command]
    given = options.from_args(parse(command, []))
    assert given == options()
    assert options.from_args(parse(command, given.to_argv())) == given


@pytest.mark.parametrize("command", COMMANDS)
def test_the_parser_takes_exactly_the_declared_options(command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    taken = {a.dest for a in sub.choices[command]._actions} - {"help", "model"}
    assert taken == {name for name, _ in COMMANDS[command].declared()}


def test_a_float_is_written_without_losing_digits_and_a_whole_one_without_dot_zero():
    options = BenchOptions(rate=(2.0, 0.1234567, 1 / 3), duration=2.5)
    argv = options.to_argv()
    assert argv[argv.index("--duration") + 1] == "2.5"
    assert [argv[i + 1] for i, w in enumerate(argv) if w == "--rate"] == [
        "2", "0.1234567", repr(1 / 3)]
    assert BenchOptions.from_args(parse("bench", argv)) == options


def test_a_value_is_written_at_its_default_unless_its_flag_says_not_to():
    argv = BenchOptions().to_argv()
    assert argv == ["--warmup", "4", "--input-chars", "100", "--device", "auto", "--seed", "0"]
    assert "--rounds" in dataclasses.replace(BenchOptions(), rounds=2).to_argv()


@pytest.mark.parametrize("module", ["planner.app.bench.options", "planner.app.tune.options",
                                    "planner.app.tune.verify", "planner.app.cli"])
def test_each_options_module_imports_first_in_a_fresh_interpreter(module):
    # The command modules import their options inside functions: a module below the CLI that
    # imports the options first must not meet a half-imported CLI package.
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
