"""Rendering: live progress while running, then the comparison as a rich table, results.md and
results.json. Everything here reads a finished `Bench`; nothing decides or measures."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
)
from rich.table import Table

from .loadgen import MODE, Sample
from .results import Bench, Run, total_rss

PARETO_MARK = "★"
MIB = 1024 * 1024


class LiveProgress:
    """One progress line per (placement, concurrency) run, on stderr."""

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


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[Bench, Run], float | int | str | None]
    fmt: str  # format spec for numbers
    better: Literal["max", "min"] | None = None
    stream_only: bool = False


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000.0


def _vs(field: str) -> Callable[[Bench, Run], float | None]:
    def get(bench: Bench, run: Run) -> float | None:
        versus = bench.versus(run)
        return getattr(versus, field) if versus else None
    return get


COLUMNS = (
    Column("placement", lambda b, r: r.placement.name, "s"),
    Column("C", lambda b, r: r.concurrency, "d"),
    Column("procs", lambda b, r: r.placement.process_count, "d", "min"),
    Column("req/s", lambda b, r: r.load.throughput_rps, ".2f", "max"),
    Column("audio s/s", lambda b, r: r.load.audio_per_s, ".1f", "max"),
    Column("TTFC p50", lambda b, r: _ms(r.load.ttfc.p50) if r.load.ttfc else None, ".0f",
           "min", stream_only=True),
    Column("TTFC p99", lambda b, r: _ms(r.load.ttfc.p99) if r.load.ttfc else None, ".0f",
           "min", stream_only=True),
    Column("p50", lambda b, r: _ms(r.load.latency.p50) if r.load.latency else None, ".0f",
           "min"),
    Column("p90", lambda b, r: _ms(r.load.latency.p90) if r.load.latency else None, ".0f",
           "min"),
    Column("p99", lambda b, r: _ms(r.p99_s), ".0f", "min"),
    Column("err", lambda b, r: r.load.errors, "d", "min"),
    Column("start s", lambda b, r: r.startup_s, ".1f", "min"),
    Column("RSS MiB", lambda b, r: total_rss(r) / MIB if total_rss(r) else None,
           ".0f", "min"),
    Column("ideal", lambda b, r: r.ideal_rps, ".2f"),
    Column("ach/ ideal", lambda b, r: r.achieved_over_ideal, ".2f", "max"),
    Column("× req/s", _vs("throughput"), ".2f", "max"),
    Column("× p99", _vs("p99"), ".2f", "min"),
)


def columns(bench: Bench) -> tuple[Column, ...]:
    stream = bool(bench.settings.get("stream"))
    return tuple(c for c in COLUMNS if stream or not c.stream_only)


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


def _cell(value: float | int | str | None, fmt: str) -> str:
    if value is None:
        return "—"
    return format(value, fmt)


def _grid(bench: Bench) -> tuple[list[str], list[tuple[Run, list[tuple[str, bool]]]]]:
    """Headers, and per run its cells as (text, is best in its concurrency group)."""
    cols = columns(bench)
    front = bench.pareto()
    rows = []
    for c in bench.concurrencies:
        runs = bench.runs_at(c)
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
    load = bench.settings
    amount = (f"{load['requests']} requests" if load.get("requests")
              else f"{load['duration_s']:g} s")
    return (f"{MODE} load: C concurrent clients, each sending its next request when the last "
            f"ended; {amount} per placement and C after {load['warmup']} warm-up requests; "
            f"{'streaming' if load['stream'] else 'whole responses'}; about "
            f"{load['input_chars']} characters per request; seed {load['seed']}. "
            f"Latencies in ms{' (TTFC: time to first audio chunk)' if load['stream'] else ''}; "
            f"RSS: peak resident memory of "
            f"all processes, supervisor included. {PARETO_MARK} = on the Pareto front (req/s, "
            "p99, processes) at that C; best value per column and C in bold. × req/s, × p99: "
            "ratio to the declared topology at the same C, measured in this run. ideal: req/s "
            "bound from the stage profile (1 / busiest process's stage time per request); "
            "ach/ideal: achieved req/s over it.")


def _two_lines(header: str) -> str:
    head, sep, tail = header.rpartition(" ")
    return f"{head}\n{tail}" if sep else header


def observations(bench: Bench) -> list[str]:
    """Things in the numbers a reader should not have to spot alone."""
    over = [r for r in bench.runs if (r.achieved_over_ideal or 0) > 1.05]
    out = []
    if over:
        names = ", ".join(f"{r.placement.name} at C={r.concurrency}" for r in over)
        out.append(f"achieved exceeds the ideal bound for {names}: the launcher runs each stage "
                   "on its own thread, so stages sharing a process overlapped where torch released "
                   "the interpreter lock; the serial-process bound understates such a process")
    failed = [r for r in bench.runs if r.load.errors]
    for r in failed:
        out.append(f"{r.placement.name} at C={r.concurrency}: {r.load.errors} failed requests, "
                   f"e.g. {r.load.error_messages(1)[0]}")
    return out


def render_table(console: Console, bench: Bench) -> None:
    headers, rows = _grid(bench)
    # Compact borders and two-line headers keep all columns readable in 120 characters.
    table = Table(title=f"planner bench: {bench.settings['model']}", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False)
    for h in headers:
        table.add_column(_two_lines(h), justify="left" if h == "placement" else "right",
                         no_wrap=True)
    last = None
    for run, cells in rows:
        if last is not None and run.concurrency != last:
            table.add_section()
        last = run.concurrency
        table.add_row(*(f"[bold green]{t}[/]" if best else t for t, best in cells))
    console.print(table)
    console.print(legend(bench), style="dim")
    for note in (*bench.notes, *observations(bench)):
        console.print(f"note: {note}", style="dim")


def markdown_table(bench: Bench) -> str:
    headers, rows = _grid(bench)
    headers = [h.replace("/ ", "/") for h in headers]
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join(":---" if h == "placement" else "---:" for h in headers) + "|"]
    for _, cells in rows:
        lines.append("| " + " | ".join(f"**{t}**" if best else t for t, best in cells) + " |")
    return "\n".join(lines)


def _profile_table(bench: Bench) -> str:
    lines = ["| placement | C | stage | process | ms per request | invocations |",
             "|:---|---:|:---|:---|---:|---:|"]
    for run in bench.runs:
        for s in run.profile:
            per = "—" if s.per_request_s is None else f"{s.per_request_s * 1000:.1f}"
            lines.append(f"| {run.placement.name} | {run.concurrency} | {s.stage} | {s.process} "
                         f"| {per} | {s.invocations} |")
    return "\n".join(lines)


def markdown(bench: Bench, charts: list[str]) -> str:
    env = bench.to_dict()
    machine = env["machine"]
    gpus = ", ".join(machine["gpus"]) or "none"
    placements = "\n".join(
        f"- **{p.name}** ({p.process_count} process{'es' if p.process_count != 1 else ''}): "
        f"{p.describe()}" + (f" — `{' '.join(p.flags)}`" if p.flags else "")
        for p in bench.placements)
    images = "\n".join(f"![{c}]({c})" for c in charts)
    notes = "\n".join(f"- {n}" for n in (*bench.notes, *observations(bench)))
    return f"""# planner bench: {bench.settings['model']}

Date: {env['date']}  
Command: `{env['command']}`  
Machine: {machine['cpu']} ({machine['cpu_count']} CPUs), GPUs: {gpus}; device {bench.runs[0].device if bench.runs else '?'}

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
