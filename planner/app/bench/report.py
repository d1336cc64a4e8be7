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

from planner.app.bench.load_results import LATE_S, Sample
from planner.app.bench.load_shapes import describe
from planner.app.bench.results import Bench, Run, total_rss
from planner.app.bench.rounds import spread

PARETO_MARK = "★"
MIB = 1024 * 1024
LAG_NOTE_S = 0.001  # a schedule lag p99 at or above this is called out under the table
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
    header: str
    value: Callable[[Bench, Run], Value]
    fmt: str  # format spec for numbers
    better: Literal["max", "min"] | None = None
    shown: Callable[[Bench], bool] = lambda bench: True


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


COLUMNS = (
    Column("placement", lambda b, r: r.placement.name, "s"),
    Column("load", lambda b, r: r.shape.label, "s"),
    Column("offered req/s", lambda b, r: r.load.offered_rps, ".2f", shown=_open),
    Column("procs", lambda b, r: r.placement.process_count, "d", "min"),
    Column("req/s", lambda b, r: r.load.throughput_rps, ".2f", "max"),
    Column("goodput req/s", lambda b, r: r.goodput_rps, ".2f", "max", shown=_slo),
    Column("audio s/s", lambda b, r: r.load.audio_per_s, ".1f", "max"),
    Column("TTFA p50", _stat("ttfa", "p50"), ".0f", "min", shown=_stream),
    Column("TTFA p90", _stat("ttfa", "p90"), ".0f", "min", shown=_stream),
    Column("TTFA p99", _stat("ttfa", "p99"), ".0f", "min", shown=_stream),
    Column("p50", _stat("latency", "p50"), ".0f", "min"),
    Column("p90", _stat("latency", "p90"), ".0f", "min"),
    Column("p99", _stat("latency", "p99"), ".0f", "min"),
    Column("RTF p50", _stat("rtf", "p50", 1.0), ".3f", "min"),
    Column("RTF p90", _stat("rtf", "p90", 1.0), ".3f", "min"),
    Column("stalled %", lambda b, r: _pct(r.load.stalled_share), ".0f", "min", shown=_stream),
    Column("err", lambda b, r: r.load.errors, "d", "min"),
    Column("late", lambda b, r: r.load.late, "d", "min", shown=_open),
    Column("lag p99", _stat("lag", "p99"), ".2f", "min", shown=_open),
    Column("start s", lambda b, r: r.startup_s, ".1f", "min"),
    Column("RSS MiB", lambda b, r: total_rss(r) / MIB if total_rss(r) else None, ".0f", "min"),
    Column("ideal", lambda b, r: r.ideal_rps, ".2f"),
    Column("ach/ ideal", lambda b, r: r.achieved_over_ideal, ".2f", "max"),
    Column("× req/s", _vs("throughput"), ".2f", "max"),
    Column("× p99", _vs("p99"), ".2f", "min"),
)
KEYS = 2  # placement and load start every block of the console table


def columns(bench: Bench) -> tuple[Column, ...]:
    return tuple(c for c in COLUMNS if c.shown(bench))


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


def _grid(bench: Bench) -> tuple[list[str], list[tuple[Run, list[tuple[str, bool]]]]]:
    """Headers, and per run its cells as (text, is best at its load)."""
    cols = columns(bench)
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


def legend(bench: Bench) -> str:
    s = bench.settings
    amount = (f"{s['requests']} requests" if s.get("requests") else f"{s['duration_s']:g} s")
    if bench.open_loop:
        load = (f"open-loop load: requests arrive on a seeded schedule ({describe(bench.shapes)})"
                " whatever the server does; offered: the rate that schedule actually offered; "
                f"late: requests sent {LATE_S * 1000:g} ms or more after they were due; lag "
                "p99: how far behind its schedule the load generator sent (ms)")
    else:
        load = ("closed-loop load: C concurrent clients, each sending its next request when "
                "the last ended")
    slo = bench.slo
    goodput = ""
    if slo:
        parts = ([f"time to first audio ≤ {slo.ttfa_s * 1000:g} ms"] if slo.ttfa_s else []) + (
            [f"latency ≤ {slo.latency_s * 1000:g} ms"] if slo.latency_s else [])
        goodput = f" goodput: requests/s that succeeded with {' and '.join(parts)}."
    stream = (" TTFA: time to the first audio byte; stalled %: streamed requests whose "
              "playback would have run dry at least once (the next bytes arrived after the "
              "audio delivered before them had played out)." if bench.stream else "")
    rounds = s.get("rounds") or 1
    measured = (f"{amount} per placement and load after {s['warmup']} warm-up requests"
                if rounds == 1 else
                f"{amount} per placement and load in {rounds} interleaved rounds, each serving "
                f"the placement afresh and warming it up with {s['warmup']} requests")
    return (f"{load}; {measured}; "
            f"{'streaming' if s['stream'] else 'whole responses'}; about "
            f"{s['input_chars']} characters per request; seed {s['seed']}. Latencies in ms "
            f"(send to last byte); RTF: real-time factor, generation time / audio duration "
            f"(below 1 is faster than real time); audio s/s: seconds of audio per second."
            f"{stream}{goodput} RSS: peak resident memory of all processes, supervisor "
            f"included. {PARETO_MARK} = on the Pareto front (req/s, p99, processes) at that "
            "load; best value per column and load in bold. × req/s, × p99: ratio to the "
            "declared topology at the same load, measured in this run. ideal: req/s bound from "
            "the stage profile (1 / busiest process's stage time per request); ach/ideal: "
            "achieved req/s over it.")


def _two_lines(header: str) -> str:
    head, sep, tail = header.rpartition(" ")
    return f"{head}\n{tail}" if sep else header


def failures(bench: Bench) -> list[tuple[Run, str]]:
    """Runs in which every request failed, each with its first error."""
    return [(r, r.load.error_messages(1)[0]) for r in bench.runs if r.failed_entirely]


def observations(bench: Bench) -> list[str]:
    """Things in the numbers a reader should not have to spot alone."""
    out = []
    over = [r for r in bench.runs if (r.achieved_over_ideal or 0) > 1.05]
    if over:
        names = ", ".join(f"{r.placement.name} at {r.shape.label}" for r in over)
        out.append(f"achieved exceeds the ideal bound for {names}: the launcher runs each stage "
                   "on its own thread, so stages sharing a process overlapped where their native "
                   "code (whatever library the card's stages run) released the interpreter lock; "
                   "the serial-process bound understates such a process")
    spreads = [(apart, r) for r in bench.runs if (apart := spread(r)) is not None]
    if spreads:
        widest, run = max(spreads, key=lambda x: x[0])
        out.append(f"{len(run.round_rps)} interleaved rounds per placement and load: one "
                   f"placement's rounds measured up to {widest:.0%} apart ({run.placement.name} "
                   f"at {run.shape.label}): so much did this machine's speed, or a short "
                   "round, vary; merged, each placement's figures span the same stretch of time "
                   "as every other's")
    for r in bench.runs:
        offered = r.load.offered_rps
        if offered and r.load.ok and r.load.throughput_rps < 0.9 * offered:
            out.append(f"{r.placement.name} at {r.shape.label}: served "
                       f"{r.load.throughput_rps:.2f} of {offered:.2f} req/s offered: past "
                       "saturation, so requests queued and latency grew with the load")
    for r in bench.runs:
        lag, load = r.load.lag, r.load
        if lag is not None and (lag.p99 >= LAG_NOTE_S or load.not_sent):
            out.append(f"{r.placement.name} at {r.shape.label}: the load generator ran behind "
                       f"its schedule (lag p99 {lag.p99 * 1000:.2f} ms, max "
                       f"{lag.max * 1000:.1f} ms; {load.late} late, {load.not_sent} not sent); "
                       "the client shares the machine with the server")
    for r in bench.runs:
        if r.load.errors:
            kinds = ", ".join(f"{n} {k}" for k, n in r.load.errors_by_kind().items())
            out.append(f"{r.placement.name} at {r.shape.label}: {r.load.errors} failed "
                       f"requests ({kinds}), e.g. {r.load.error_messages(1)[0]}")
    return out


def _block_table(bench: Bench, title: str | None, headers: list[str],
                 rows: list[tuple[Run, list[tuple[str, bool]]]], keep: list[int]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 0, 0, 1), pad_edge=False)
    for i in keep:
        h = headers[i]
        if h == "placement":
            # A long name wraps; a number never does, so no digit is ever cut.
            table.add_column(h, justify="left", overflow="fold", max_width=PLACEMENT_WIDTH)
        else:
            table.add_column(_two_lines(h), justify="left" if i < KEYS else "right",
                             no_wrap=True, min_width=max(len(p) for p in h.split(" ")))
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
    headers, rows = _grid(bench)
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
    return [_block_table(bench, title if n == 0 else f"{title} (continued)", headers, rows,
                         [*range(KEYS), *block]) for n, block in enumerate(blocks)]


def render_table(console: Console, bench: Bench) -> None:
    for table in console_tables(console, bench):
        console.print(table)
    console.print(legend(bench), style="dim")
    for note in (*bench.notes, *observations(bench)):
        console.print(f"note: {note}", style="dim")


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
    notes = "\n".join(f"- {md_escape(n)}" for n in (*bench.notes, *observations(bench)))
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

{markdown_table(bench)}

{legend(bench)}

{notes}

## Stage profile

{_profile_table(bench)}

## Charts

{images}
"""


def write_json(bench: Bench, path: Path) -> None:
    path.write_text(json.dumps(bench.to_dict(), indent=2) + "\n")
