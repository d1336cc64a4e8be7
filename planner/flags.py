"""Placement and compute requests as command-line flags, and flags back into requests.

The one place that spells `--isolate-stage`, `--stage-process`, `--stage-threads`,
`--process-copies` and `--process-cpus`: diagnostics, hints, the bench and `planner tune` all print requests through
here, and nothing parses its own flag strings.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from planner.plan import Assign, ComputeRequest, Copies, Isolate, Pin, Request, Threads, cpu_text

ISOLATE, ASSIGN = "--isolate-stage", "--stage-process"
THREADS, COPIES, PIN = "--stage-threads", "--process-copies", "--process-cpus"


def flag(request: Request | ComputeRequest) -> str:
    """`Isolate("vocoder")` -> `--isolate-stage vocoder`; an Assign read from a flag keeps its text."""
    spelling = getattr(request, "spelling", None)
    if spelling is not None:  # sglang-omni's dotted spelling, as typed
        return spelling
    match request:
        case Isolate(stage=stage):
            return f"{ISOLATE} {stage}"
        case Assign(stage=stage, process=process, text=text):
            return f"{ASSIGN} {text if text is not None else f'{stage}={process}'}"
        case Threads(stage=stage, count=count, text=text):
            return f"{THREADS} {text if text is not None else f'{stage}={count}'}"
        case Copies(process=process, count=count, text=text):
            return f"{COPIES} {text if text is not None else f'{process}={count}'}"
        case Pin(process=process, cpus=cpus, text=text):
            return f"{PIN} {text if text is not None else f'{process}={cpu_text(cpus or ())}'}"
    raise TypeError(f"not a placement request: {request!r}")


def flags(requests: Iterable[Request | ComputeRequest]) -> tuple[str, ...]:
    return tuple(flag(r) for r in requests)


def flag_words(requests: Iterable[Request | ComputeRequest]) -> tuple[str, ...]:
    """The flags as a command's words: each option, then its value."""
    return tuple(w for f in flags(requests) for w in f.split(" ", 1))


def command_line(requests: Iterable[Request | ComputeRequest]) -> str:
    """The flags as one shell-safe string, e.g. for a hint or a results table."""
    return shlex.join(flag_words(requests))


def from_options(isolate_stages: Sequence[str] = (), stage_processes: Sequence[str] = (),
                 stage_threads: Sequence[str] = (),
                 process_copies: Sequence[str] = (),
                 process_cpus: Sequence[str] = ()) -> tuple[Request | ComputeRequest, ...]:
    """The values of repeated `--stage-process`, `--isolate-stage`, `--stage-threads`,
    `--process-copies` and `--process-cpus` options, as requests (assignments first, as the
    solver has always read them)."""
    return (tuple(Assign.parse(v) for v in stage_processes)
            + tuple(Isolate(v.strip()) for v in isolate_stages)
            + tuple(Threads.parse(v) for v in stage_threads)
            + tuple(Copies.parse(v) for v in process_copies)
            + tuple(Pin.parse(v) for v in process_cpus))


_PARSERS = {ISOLATE: lambda v: Isolate(v.strip()), ASSIGN: Assign.parse,
            THREADS: Threads.parse, COPIES: Copies.parse, PIN: Pin.parse}


def parse(words: Sequence[str]) -> tuple[Request | ComputeRequest, ...]:
    """`["--isolate-stage", "vocoder", "--stage-threads=vocoder=2"]` -> requests, in order; the
    dotted `--vocoder.process vocoder` and `--vocoder.env.OMP_NUM_THREADS 2` too (after the rest).

    Raises ValueError naming the first word that is not a placement or compute flag."""
    from planner.dotted import DottedFlags, take

    words, dotted = take(words)
    given = DottedFlags(dotted)
    other = [f for f in dotted if f.field != ("process",) and not f.threads]
    if other:
        raise ValueError(f"{other[0].spelling!r} sets a stage field, not a placement; only "
                         "--STAGE.process and --STAGE.env.OMP_NUM_THREADS are placement and "
                         "compute flags (put other fields in the --config file)")
    out: list[Request | ComputeRequest] = []
    it = iter(words)
    for word in it:
        option, eq, value = word.partition("=")
        if option not in _PARSERS:
            raise ValueError(f"{word!r} is not a placement flag; only {ISOLATE} STAGE, "
                             f"{ASSIGN} STAGE=PROCESS, {THREADS} STAGE=N, "
                             f"{COPIES} PROCESS=N and {PIN} PROCESS=CPUS are allowed")
        if not eq:
            value = next(it, None)
            if value is None:
                raise ValueError(f"{option} needs a value")
        out.append(_PARSERS[option](value))
    return tuple(out) + given.requests()


def placement_only(requests: Iterable[Request | ComputeRequest]) -> tuple[Request, ...]:
    return tuple(r for r in requests if isinstance(r, (Isolate, Assign)))


def compute_only(requests: Iterable[Request | ComputeRequest]) -> tuple[ComputeRequest, ...]:
    return tuple(r for r in requests if isinstance(r, (Threads, Copies, Pin)))
