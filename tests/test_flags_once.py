"""Each flag of `planner bench` and `planner tune` is spelled once.

A flag spelled twice drifts: bench's were once in its parser, in the line results.json records
and in what `planner tune --verify` asked bench for. Where command lines are read or written (the
application, `planner/app/`, and the runtime, `launcher/`), every long flag the bench and tune
parsers take occurs as a string literal exactly once: in its declaration. Another command may
declare a flag of the same name for itself (`planner solve --format`, `planner serve --device`):
its own module may hold that literal, as long as its parser takes the flag.

The pure planner below does not count: it cannot import the application's declarations and
only names a flag inside its messages (hints, a `ConfigIssue`'s source). Prose never counts:
a docstring, a help text or a message holds a flag inside a longer string, not as a literal.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

from planner.app.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
COUNTED = ("planner/app", "launcher")
OWNERS = ("bench", "tune")


def _long_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {o for o in parser._option_string_actions if o.startswith("--") and o != "--help"}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _literals(flags: set[str]) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = defaultdict(list)
    for folder in COUNTED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in flags:
                    found[node.value].append(path.relative_to(ROOT))
    return found


def test_each_bench_and_tune_flag_is_spelled_once():
    parsers = _parsers()
    flags = set().union(*(_long_flags(parsers[c]) for c in OWNERS))
    # other commands' own modules, and the flags each may spell for itself
    own = {Path(COMMANDS[c].__file__).relative_to(ROOT): _long_flags(p)
           for c, p in parsers.items() if c not in OWNERS}
    twice = {}
    for flag, paths in _literals(flags).items():
        counted = [p for p in paths if flag not in own.get(p, ())]
        if len(counted) != 1:
            twice[flag] = [str(p) for p in counted]
    missing = flags - set(_literals(flags))
    assert not twice, f"spelled more than once (declare it once and use the declaration): {twice}"
    assert not missing, f"never spelled as a literal (a flag built from pieces): {missing}"


def test_the_count_sees_a_second_spelling(tmp_path, monkeypatch):
    """The check itself: a module that writes a bench flag again is caught."""
    import tests.test_flags_once as me

    (tmp_path / "planner" / "app").mkdir(parents=True)
    (tmp_path / "launcher").mkdir()
    (tmp_path / "planner" / "app" / "again.py").write_text('ARGV = ["--warmup", "4"]\n')
    monkeypatch.setattr(me, "ROOT", tmp_path)
    assert me._literals({"--warmup", "--seed"}) == {"--warmup": [Path("planner/app/again.py")]}
