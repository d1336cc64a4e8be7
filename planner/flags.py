"""Placement requests as command-line flags, and flags back into requests.

The one place that spells `--isolate-stage` and `--stage-process`: diagnostics, hints, the bench
and `planner tune` all print requests through here, and nothing parses its own flag strings.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from planner.plan import Assign, Isolate, Request

ISOLATE, ASSIGN = "--isolate-stage", "--stage-process"


def flag(request: Request) -> str:
    """`Isolate("vocoder")` -> `--isolate-stage vocoder`; an Assign read from a flag keeps its text."""
    match request:
        case Isolate(stage=stage):
            return f"{ISOLATE} {stage}"
        case Assign(stage=stage, process=process, text=text):
            return f"{ASSIGN} {text if text is not None else f'{stage}={process}'}"
    raise TypeError(f"not a placement request: {request!r}")


def flags(requests: Iterable[Request]) -> tuple[str, ...]:
    return tuple(flag(r) for r in requests)


def command_line(requests: Iterable[Request]) -> str:
    """The flags as one shell-safe string, e.g. for a hint or a results table."""
    return " ".join(f"{option} {shlex.quote(value)}"
                    for option, _, value in (f.partition(" ") for f in flags(requests)))


def from_options(isolate_stages: Sequence[str] = (),
                 stage_processes: Sequence[str] = ()) -> tuple[Request, ...]:
    """The values of repeated `--stage-process` and `--isolate-stage` options, as requests
    (assignments first, as the solver has always read them)."""
    return tuple(Assign.parse(v) for v in stage_processes) + tuple(
        Isolate(v.strip()) for v in isolate_stages)


def parse(words: Sequence[str]) -> tuple[Request, ...]:
    """`["--isolate-stage", "vocoder", "--stage-process=a=b"]` -> requests, in the order given.

    Raises ValueError naming the first word that is not a placement flag."""
    out: list[Request] = []
    it = iter(words)
    for word in it:
        option, eq, value = word.partition("=")
        if option not in (ISOLATE, ASSIGN):
            raise ValueError(f"{word!r} is not a placement flag; only {ISOLATE} STAGE and "
                             f"{ASSIGN} STAGE=PROCESS are allowed")
        if not eq:
            value = next(it, None)
            if value is None:
                raise ValueError(f"{option} needs a value")
        out.append(Isolate(value.strip()) if option == ISOLATE else Assign.parse(value))
    return tuple(out)
