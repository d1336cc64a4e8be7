"""Rendering: live progress while running, then the comparison as a rich table, results.md and
results.json. Everything here reads a finished `Bench`; nothing decides or measures."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from planner.app.bench.findings import above_bound, advice, notes, winner_line, winners
from planner.app.bench.load_results import Sample
from planner.app.bench.load_shapes import describe
from planner.app.bench.results import Bench, Run, total_rss

PARETO_MARK = "★"
OVER_BOUND = "*"  # beside a stage bound the run measured above
MIB = 1024 * 1024
PLACEMENT_WIDTH = 32  # longer placement names wrap in the console table


class LiveProgress:
    """One progress line per (placement, load) run, on stderr."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[phase]}"), TimeElapsedColumn(), console=console)
        self._task = None
        self._errors = 0

    def __enter__(self) -> LiveProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def begin(self, label: str, total: int | None) -> None:
        self._errors = 0
        self._task = self._progress.add_task(label, total=total, phase="")

    def phase(self, text: str) -> None:
        self._progress.update(self._task, phase=text)

    def done(self, sample: Sample) -> None:
        self._errors += not sample.ok
        errors = f" ({self._errors} errors)" if self._errors else ""
        self._progress.update(self._task, advance=1, phase=f"load{errors}")

    def end(self, summary: str) -> None:
        task = self._progress.tasks[-1]
        self._progress.update(self._task, total=task.completed, phase=summary)


Value = float | int | str | None


@dataclass(frozen=True)
class Column:
    """A column of results.md; on screen too where `screen` says (the screen keeps what a
    comparison is read by, results.md every figure)."""

    header: str
    value: Callable[[Bench, Run], Value]
    fmt: str  # format spec for numbers
    better: Literal["max", "min"] | None = None
    shown: Callable[[Bench], bool] = lambda bench: True
    screen: Callable[[Bench], bool] = lambda bench: True


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000.0


def _vs(field: str) -> Callable[[Bench, Run], float | None]:
    def get(bench: Bench, run: Run) -> float | None:
        versus = bench.versus(run)
        return getattr(versus, field) if versus else None
    return get


def _stat(summary: str, field: str, scale: float = 1000.0) -> Callable[[Bench, Run], float | None]:
    def get(bench: Bench, run: Run) -> float | None:
        s = getattr(run.load, summary)
        return None if s is None else getattr(s, field) * scale
    return get


def _stream(bench: Bench) -> bool:
    return bench.stream


def _open(bench: Bench) -> bool:
    return bench.open_loop


def _slo(bench: Bench) -> bool:
    return bool(bench.slo)


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _never(bench: Bench) -> bool:
    return False


def _whole(bench: Bench) -> bool:
    return not bench.stream


def _bound(bench: Bench, run: Run) -> str | None:
    """The stage bound, marked `*` where the run measured above it: the bound was wrong there
    (`findings.notes` says why)."""
    if run.ideal_rps is None:
        return None
    return f"{run.ideal_rps:.2f}{OVER_BOUND if above_bound(run) else ''}"


COLUMNS = (
    Column("placement", lambda b, r: r.placement.name, "s"),
    Column("load", lambda b, r: r.shape.label, "s"),
    Column("offered req/s", lambda b, r: r.load.offered_rps, ".2f", shown=_open),
    Column("procs", lambda b, r: r.placement.process_count, "d", "min"),
    Column("req/s", lambda b, r: r.load.throughput_rps, ".2f", "max"),
    Column("goodput req/s", lambda b, r: r.goodput_rps, ".2f", "max", shown=_slo),
    Column("× declared req/s", _vs("throughput"), ".2f", "max"),
    Column("audio s/s", lambda b, r: r.load.audio_per_s, ".1f", "max", screen=_never),
    Column("TTFA p50", _stat("ttfa", "p50"), ".0f", "min", shown=_stream),
    Column("TTFA p90", _stat("ttfa", "p90"), ".0f", "min", shown=_stream, screen=_never),
    Column("TTFA p99", _stat("ttfa", "p99"), ".0f", "min", shown=_stream),
    Column("p50", _stat("latency", "p50"), ".0f", "min", screen=_whole),
    Column("p90", _stat("latency", "p90"), ".0f", "min", screen=_never),
    Column("p99", _stat("latency", "p99"), ".0f", "min"),
    Column("RTF p50", _stat("rtf", "p50", 1.0), ".3f", "min", screen=_never),
    Column("RTF p90", _stat("rtf", "p90", 1.0), ".3f", "min", screen=_whole),
    Column("streams stalled %", lambda b, r: _pct(r.load.stalled_share), ".0f", "min",
           shown=_stream),
    Column("failed", lambda b, r: r.load.errors, "d", "min"),
    Column("late", lambda b, r: r.load.late, "d", "min", shown=_open),
    Column("send lag p99", _stat("lag", "p99"), ".2f", "min", shown=_open, screen=_never),
    Column("start s", lambda b, r: r.startup_s, ".1f", "min", screen=_never),
    Column("RSS MiB", lambda b, r: total_rss(r) / MIB if total_rss(r) else None, ".0f", "min"),
    Column("bound req/s", _bound, "s"),
    Column("of bound", lambda b, r: r.achieved_over_ideal, ".2f", screen=_never),
    Column("× declared p99", _vs("p99"), ".2f", "min", screen=_never),
)
KEYS = 2  # placement and load start every block of the console table


def columns(bench: Bench, screen: bool = False) -> tuple[Column, ...]:
    """The columns of this bench's results.md, or (`screen`) of its console table."""
    return tuple(c for c in COLUMNS if c.shown(bench) and (not screen or c.screen(bench)))


def _best(bench: Bench, runs: tuple[Run, ...], col: Column) -> set[str]:
    """Keys of the runs holding the best value of `col` among `runs` (ties share it)."""
    if col.better is None or len(runs) < 2:
        return set()
    values = {r.key: col.value(bench, r) for r in runs}
    present = {k: v for k, v in values.items() if isinstance(v, (int, float))}
    if not present or len(set(present.values())) == 1:
        return set()
    target = (max if col.better == "max" else min)(present.values())
    return {k for k, v in present.items() if v == target}


def _cell(value: Value, fmt: str) -> str:
    if value is None:
        return "—"
    return format(value, fmt)


def _grid(bench: Bench, screen: bool = False
          ) -> tuple[list[str], list[tuple[Run, list[tuple[str, bool]]]]]:
    """Headers, and per run its cells as (text, is best at its load)."""
    cols = columns(bench, screen)
    front = bench.pareto()
    rows = []
    for shape in bench.shapes:
        runs = bench.runs_at(shape)
        best = {col.header: _best(bench, runs, col) for col in cols}
        for run in runs:
            cells = []
            for col in cols:
                text = _cell(col.value(bench, run), col.fmt)
                if col.header == "placement" and run.key in front:
                    text = f"{PARETO_MARK} {text}"
                cells.append((text, run.key in best[col.header]))
            rows.append((run, cells))
    return [c.header for c in cols], rows


def run_facts(bench: Bench) -> str:
    """What was measured: the load, how many requests, streamed or whole, the texts."""
    s = bench.settings
    amount = (f"{s['requests']} requests" if s.get("requests") else f"{s['duration_s']:g} s")
    if bench.open_loop:
        load = f"open loop ({describe(bench.shapes)})"
    else:
        load = "closed loop (C clients, each sending its next request when its last ended)"
    rounds = s.get("rounds") or 1
    where = (f"after {s['warmup']} warm-up requests" if rounds == 1 else
             f"in {rounds} interleaved rounds, each after {s['warmup']} warm-up requests")
    slo = bench.slo
    goal = ""
    if slo:
        parts = ([f"time to first audio ≤ {slo.ttfa_s * 1000:g} ms"] if slo.ttfa_s else []) + (
            [f"latency ≤ {slo.latency_s * 1000:g} ms"] if slo.latency_s else [])
        goal = f"; goodput: requests/s that succeeded with {' and '.join(parts)}"
    return (f"{load}; {amount} per row and load {where}; "
            f"{'streamed' if s['stream'] else 'whole responses'}, about {s['input_chars']} "
            f"characters each, seed {s['seed']}{goal}")


def legend(bench: Bench) -> str:
    """The short legend under the table; every column is explained in docs/bench.md."""
    first = (" TTFA: to the first audio byte; streams stalled: whose playback ran dry."
             if bench.stream else "")
    return (f"Latencies in ms, send to last byte.{first} × declared: over the declared "
            f"topology at the same load, this run. RSS: peak memory of all processes. Bound: the "
            f"req/s the stage times allow ({OVER_BOUND}: measured above it, so it was wrong "
            f"there). {PARETO_MARK}: Pareto front (req/s, p99, processes); bold: best at its load. "
            "Every column: docs/bench.md.")


def _two_lines(header: str) -> str:
    """A header over two lines, split where its longer line is shortest (the later split on a
    tie, so a unit goes below)."""
    words = header.split(" ")
    if len(words) < 2:
        return header
    k = min(range(1, len(words)), key=lambda k: (max(len(" ".join(words[:k])),
                                                     len(" ".join(words[k:]))), -k))
    return f"{' '.join(words[:k])}\n{' '.join(words[k:])}"


def failures(bench: Bench) -> list[tuple[Run, str]]:
    """Runs in which every request failed, each with its first error."""
    return [(r, r.load.error_messages(1)[0]) for r in bench.runs if r.failed_entirely]


def _block_table(bench: Bench, title: str | None, headers: list[str],
                 rows: list[tuple[Run, list[tuple[str, bool]]]], keep: list[int]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 0, 0, 1), pad_edge=False, show_edge=False)
    for i in keep:
        h = headers[i]
        if h == "placement":
            # A long name wraps; a number never does, so no digit is ever cut.
            table.add_column(h, justify="left", overflow="fold", max_width=PLACEMENT_WIDTH)
        else:
            table.add_column(_two_lines(h), justify="left" if i < KEYS else "right",
                             no_wrap=True, min_width=max(map(len, _two_lines(h).split("\n"))))
    last = None
    for run, cells in rows:
        if last is not None and run.shape != last:
            table.add_section()
        last = run.shape
        table.add_row(*(f"[bold green]{t}[/]" if best else t
                        for t, best in (cells[i] for i in keep)))
    return table


def _width(console: Console, table: Table) -> int:
    # Measured unconstrained: a table measured within the console's width is squeezed to fit.
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def _pack(console: Console, bench: Bench, headers: list[str], rows: list, limit: int
          ) -> list[list[int]]:
    """Columns after the keys, in order, in as few blocks of at most `limit` wide as fit."""
    blocks: list[list[int]] = []
    current: list[int] = []
    for i in range(KEYS, len(headers)):
        trial = [*range(KEYS), *current, i]
        if current and _width(console, _block_table(bench, None, headers, rows, trial)) > limit:
            blocks.append(current)
            current = []
        current.append(i)
    return [*blocks, current] if current else blocks


def console_tables(console: Console, bench: Bench) -> list[Table]:
    """The comparison as one table, or as several that each fit the console's width, every one
    starting with the placement and load columns; cells are never truncated. Columns are spread
    evenly over the blocks, so no block is left with a column or two."""
    headers, rows = _grid(bench, screen=True)
    title = f"planner bench: {bench.title}"
    blocks = _pack(console, bench, headers, rows, console.width)
    lo, hi = console.width // (len(blocks) + 1), console.width
    while len(blocks) > 1 and lo < hi:  # the narrowest limit that needs no more blocks
        mid = (lo + hi) // 2
        if len(_pack(console, bench, headers, rows, mid)) == len(blocks):
            hi = mid
        else:
            lo = mid + 1
    if len(blocks) > 1:
        blocks = _pack(console, bench, headers, rows, hi)
    return [_block_table(bench, None if n == 0 else f"{title} (continued)", headers, rows,
                         [*range(KEYS), *block]) for n, block in enumerate(blocks)]


def render_table(console: Console, bench: Bench) -> None:
    """The table, then the winner at each load, advice where a figure is bad, notes, and the
    short legend."""
    console.print(Text(f"planner bench: {bench.title}", style="bold")
                  + Text(f": {run_facts(bench)}"))
    for table in console_tables(console, bench):
        console.print(table)
    for w in winners(bench):
        console.print(Text("winner ", style="bold") + Text(winner_line(bench, w)))
    for line in advice(bench):
        console.print(Text("advice ", style="bold yellow") + Text(line))
    for note in notes(bench):
        console.print(Text(f"note: {note}", style="dim"))
    console.print(Text(legend(bench), style="dim"))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#])")


def md_escape(text: str) -> str:
    """Text shown literally in Markdown, table cells included (`|` would end the cell)."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def markdown_table(bench: Bench) -> str:
    headers, rows = _grid(bench)
    headers = [md_escape(h.replace("/ ", "/")) for h in headers]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join(":---" if i < KEYS else "---:" for i in range(len(headers))) + "|"]
    for _, cells in rows:
        lines.append("| " + " | ".join(f"**{md_escape(t)}**" if best else md_escape(t)
                                       for t, best in cells) + " |")
    return "\n".join(lines)


def _profile_table(bench: Bench) -> str:
    lines = ["| placement | load | stage | process | ms per request | invocations |",
             "|:---|:---|:---|:---|---:|---:|"]
    for run in bench.runs:
        for s in run.profile:
            per = "—" if s.per_request_s is None else f"{s.per_request_s * 1000:.1f}"
            lines.append(f"| {md_escape(run.placement.name)} | {md_escape(run.shape.label)} "
                         f"| {md_escape(s.stage)} | {md_escape(s.process)} | {per} "
                         f"| {s.invocations} |")
    return "\n".join(lines)


def markdown(bench: Bench, charts: list[str]) -> str:
    env = bench.to_dict()
    machine = env["machine"]
    gpus = ", ".join(machine["gpus"]) or "none"
    versions = env["versions"]
    placements = "\n".join(
        f"- **{md_escape(p.name)}** ({p.process_count or 'unknown'} "
        f"process{'es' if p.process_count != 1 else ''}): {md_escape(p.describe())}"
        + (f" — `{' '.join(p.flags)}`" if p.flags else "")
        for p in bench.placements)
    images = "\n".join(f"![{c}]({c})" for c in charts)
    found = "\n".join(f"- {md_escape(n)}" for n in (
        *(f"winner {winner_line(bench, w)}" for w in winners(bench)),
        *(f"advice {a}" for a in advice(bench)), *notes(bench)))
    load_avg = machine.get("load_average")
    busy = (f"; load average at the start {load_avg[0]:.2f}" if load_avg else "")
    return f"""# planner bench: {md_escape(bench.title)}

Date: {env['date']}  
Command: `{env['command']}`  
Machine: {md_escape(machine['cpu'] or '?')} ({machine['cpu_count']} CPUs{busy}), GPUs: {md_escape(gpus)}; device {next((r.device for r in bench.runs if r.device), '?')}  
Versions: Python {versions.get('python')}, torch {versions.get('torch')}, OR-Tools {versions.get('ortools')}

## Placements

{placements}

## Results

{md_escape(run_facts(bench))}.

{markdown_table(bench)}

{md_escape(legend(bench))}

{found}

## Stage profile

{_profile_table(bench)}

## Charts

{images}
"""


def write_json(bench: Bench, path: Path) -> None:
    path.write_text(json.dumps(bench.to_dict(), indent=2) + "\n")
