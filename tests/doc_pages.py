"""The examples of the README and the docs pages, read from the page and compared with a run.

An example is a ```text block whose first line is `$ planner ...`: each `$ ` line (with its `\\`
continuation lines) is a command, and the lines up to the next `$ ` are its output as a terminal
shows it when piped (stdout and stderr, 120 columns). A line `...` alone stands for any number of
lines the page leaves out. A page's blocks whose first line is a comment naming a file
(`# my_tts.py`) are that file, written before its examples run.

How an output is compared (`Kind`):
- EXACT, for what the planner decides alone: `models`, `show`, `solve`, and `tune --profile`
  (from a saved profile tune simulates and serves nothing), on the CPUs the pages were made on;
- SHAPE, for what measures this machine (`serve`, its requests, `bench`, `tune` that profiles):
  numbers masked, the columns, names and kinds of line compared; a `winner` line by its load
  alone, and lines only some runs print (advice, notes) may be absent. The pages say these
  outputs are machine-dependent.
"""

from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ELISION = "..."
# Lines of a measured run that only some runs print (a figure's advice, a note on the bound).
OPTIONAL_PREFIXES = ("advice ", "note: ")
# Lines whose text names what won: compared up to their first colon.
VERDICT_PREFIXES = ("winner ",)
NUMBER = re.compile(r"\d+(?:[.,]\d+)*\*?")
RULE = re.compile(r"[─━═]+")  # a table rule or a progress bar: as long as the columns are wide
FILE_COMMENT = re.compile(r"^# ([\w./-]+\.(?:py|ya?ml))\s*$")


class Kind(enum.Enum):
    EXACT = "exact"
    SHAPE = "shape"


@dataclass(frozen=True)
class Command:
    text: str                      # as a shell reads it: continuation lines kept
    expected: tuple[str, ...]      # the output the page shows

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text.replace("\\\n", " "))

    @property
    def is_planner(self) -> bool:
        return self.argv[0] == "planner"

    @property
    def subcommand(self) -> str | None:
        return self.argv[1] if self.is_planner and len(self.argv) > 1 else None

    @property
    def kind(self) -> Kind:
        argv = self.argv
        if self.subcommand in ("models", "show", "solve"):
            return Kind.EXACT
        if self.subcommand == "tune" and "--profile" in argv and "--verify" not in argv:
            return Kind.EXACT
        return Kind.SHAPE


@dataclass(frozen=True)
class Example:
    page: Path
    first_line: int                # 0-based index of the block's first body line in the page
    last_line: int                 # one past its last body line
    commands: tuple[Command, ...]

    @property
    def name(self) -> str:
        text = " ".join(self.commands[0].text.replace("\\\n", " ").split())
        return text if len(text) <= 70 else text[:67] + "..."

    @property
    def serves(self) -> bool:
        return any(c.subcommand == "serve" for c in self.commands)

    @property
    def kind(self) -> Kind:
        kinds = {c.kind for c in self.commands}
        return Kind.EXACT if kinds == {Kind.EXACT} else Kind.SHAPE


def _blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(language, first body line, one past the last) of every fenced block."""
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```") and lines[i].strip() != "```":
            language, start = lines[i].strip()[3:], i + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            blocks.append((language, start, end))
            i = end + 1
        else:
            i += 1
    return blocks


def parse_commands(body: list[str]) -> tuple[Command, ...]:
    commands: list[Command] = []
    i = 0
    while i < len(body):
        line = body[i]
        assert line.startswith("$ "), f"output before any command: {line!r}"
        text = [line[2:]]
        while text[-1].endswith("\\") and i + 1 < len(body):
            i += 1
            text.append(body[i])
        i += 1
        start = i
        while i < len(body) and not body[i].startswith("$ "):
            i += 1
        commands.append(Command("\n".join(text), tuple(body[start:i])))
    return tuple(commands)


def examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for language, start, end in _blocks(lines):
        if language == "text" and start < end and lines[start].startswith("$ planner "):
            found.append(Example(page, start, end, parse_commands(lines[start:end])))
    return found


def files(page: Path) -> dict[str, str]:
    """The files a page shows whole: blocks whose first line is a comment naming the file."""
    lines = page.read_text(encoding="utf-8").splitlines()
    named = {}
    for _, start, end in _blocks(lines):
        match = FILE_COMMENT.match(lines[start]) if start < end else None
        if match:
            named[match.group(1)] = "\n".join(lines[start:end]) + "\n"
    return named


# --- comparing -----------------------------------------------------------------------------

def shape(line: str) -> str:
    """A line as a measured run's shape: numbers masked, rules one character long, the Pareto star
    and spacing dropped."""
    masked = " ".join(RULE.sub("─", NUMBER.sub("#", line.replace("★", " "))).split())
    if masked.startswith(VERDICT_PREFIXES):
        return masked.split(":", 1)[0] + ":"
    return masked


def _comparable(lines: list[str] | tuple[str, ...], kind: Kind) -> list[str]:
    lines = [line.rstrip() for line in lines]
    if kind is Kind.EXACT:
        return lines
    return [shape(line) for line in lines
            if line == ELISION or not line.lstrip().startswith(OPTIONAL_PREFIXES)]


def matches(expected, actual, kind: Kind) -> bool:
    """Whether `actual` is what the page shows, each `...` standing for any lines."""
    want, got = _comparable(expected, kind), _comparable(actual, kind)
    elision = shape(ELISION) if kind is Kind.SHAPE else ELISION
    # reachable[j]: the lines of `want` so far can match got[:j]
    reachable = [True] + [False] * len(got)
    for line in want:
        if line == elision:
            for j in range(1, len(got) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [reachable[j] and got[j] == line for j in range(len(got))]
    return reachable[-1]


def diff(expected, actual) -> str:
    import difflib

    return "\n".join(difflib.unified_diff([x.rstrip() for x in expected],
                                          [x.rstrip() for x in actual],
                                          "the page", "the run", lineterm=""))


def keep_elisions(expected: tuple[str, ...], actual: list[str], kind: Kind) -> list[str]:
    """The new output for a page: the run's lines, with each `...` of the page kept where the
    lines around it are still there (else the run's lines in full, for the author to trim)."""
    def same(a: str, b: str) -> bool:
        return a.rstrip() == b.rstrip() if kind is Kind.EXACT else shape(a) == shape(b)

    out = [line.rstrip() for line in actual]
    at = 0
    for k, line in enumerate(expected):
        if line != ELISION:
            continue
        before = next((e for e in reversed(expected[:k]) if e != ELISION), None)
        after = next((e for e in expected[k + 1:] if e != ELISION), None)
        i = at if before is None else next((n + 1 for n in range(at, len(out))
                                            if same(out[n], before)), None)
        if i is None:
            continue
        j = len(out) if after is None else next((n for n in range(i, len(out))
                                                 if same(out[n], after)), None)
        if j is not None and j > i:
            out[i:j] = [ELISION]
            at = i + 1
        else:
            at = i
    return out
