"""peer_piper.py's measurements and their arithmetic: cells, ratios over rounds, the tables.

Pure (no processes, no I/O but the text it returns), so that its smoke test runs in milliseconds
on synthetic cells.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from benchmarks.intervals import log_ratio_interval
from planner.app.cpu_steal import share_of
from planner.stats import percentile

PIPER, GRAPH = "piper", "in-process"
WAV, STREAM = "wav", "pcm-stream"


@dataclass
class Cell:
    """One system at one concurrency in one round."""
    system: str  # PIPER, "ours:NAME" or GRAPH
    variant: str  # WAV or STREAM
    concurrency: int
    round: int
    wall_s: float
    cpu_s: float  # the server's process tree during the cell
    latencies_s: list[float]
    first_byte_s: list[float]
    errors: list[str] = field(default_factory=list)
    audio_s: float = 0.0  # seconds of audio in the answers (same text, same scales: similar)
    # (stolen, running) jiffies of the machine's CPUs during the cell (/proc/stat; None where it
    # does not say): how much of the CPUs' running time the host gave to other guests meanwhile
    cpu_ticks: tuple[int, int] | None = None

    @property
    def ok(self) -> int:
        return len(self.latencies_s)

    def metric(self, name: str) -> float:
        """rps, p50/p90 latency, fb50 (first byte p50), cpu and audio (s per request); 0 with
        no answer."""
        if not self.ok:
            return 0.0
        if name == "rps":
            return self.ok / self.wall_s
        if name == "cpu":
            return self.cpu_s / self.ok
        if name == "audio":
            return self.audio_s / self.ok
        if name == "fb50":
            return percentile(self.first_byte_s, 50)
        return percentile(self.latencies_s, {"p50": 50, "p90": 90}[name])


@dataclass(frozen=True)
class Summary:
    ratios: tuple[float | None, ...]  # per round; None where either side had no figure
    median: float
    geomean: float
    interval: tuple[float, float] | None  # 90%; None with fewer than two rounds


def summarise(ours: list[float], theirs: list[float]) -> Summary | None:
    """Ratios ours/theirs of paired rounds, their median, their geometric mean and a 90%
    interval for it (Student's t on the logs: how far the rounds leave it uncertain). A round
    where either figure is missing (0) is left out; None if every round is."""
    ratios = tuple(a / b if a > 0 and b > 0 else None for a, b in zip(ours, theirs, strict=True))
    kept = [r for r in ratios if r is not None]
    if not kept:
        return None
    logs = [math.log(r) for r in kept]
    return Summary(ratios, statistics.median(kept), math.exp(statistics.fmean(logs)),
                   log_ratio_interval(logs))


def series(cells: list[Cell], system: str, variant: str, concurrency: int, metric: str,
           rounds: int) -> list[float]:
    """The metric of one system's cell, round by round (0 where it is missing)."""
    found = {c.round: c.metric(metric) for c in cells
             if (c.system, c.variant, c.concurrency) == (system, variant, concurrency)}
    return [found.get(r, 0.0) for r in range(rounds)]


def limit_series(cells: list[Cell], cores: int, rounds: int) -> list[float]:
    """The machine's limit per round: cores / CPU s per request of the in-process graph."""
    return [cores / cpu if cpu > 0 else 0.0
            for cpu in series(cells, GRAPH, WAV, 1, "cpu", rounds)]


def ratio_columns(cells: list[Cell], ours: str, concurrency: int, cores: int,
                  rounds: int) -> dict[str, Summary | None]:
    """Each comparison the issue asks for at one concurrency, as a Summary over the rounds."""
    def s(system: str, variant: str, metric: str) -> list[float]:
        return series(cells, system, variant, concurrency, metric, rounds)

    graph_cpu = series(cells, GRAPH, WAV, 1, "cpu", rounds)
    columns = {
        "req/s wav": summarise(s(ours, WAV, "rps"), s(PIPER, WAV, "rps")),
        "p50 wav": summarise(s(ours, WAV, "p50"), s(PIPER, WAV, "p50")),
        "TTFA stream / piper p50": summarise(s(ours, STREAM, "fb50"), s(PIPER, WAV, "p50")),
        "req/s stream": summarise(s(ours, STREAM, "rps"), s(PIPER, WAV, "rps")),
        "CPU/req wav": summarise(s(ours, WAV, "cpu"), s(PIPER, WAV, "cpu")),
        "CPU/req wav / graph": summarise(s(ours, WAV, "cpu"), graph_cpu),
    }
    if concurrency > 1:  # one request at a time uses one core: the limit is not what binds
        limit = limit_series(cells, cores, rounds)
        columns["req/s wav / limit"] = summarise(s(ours, WAV, "rps"), limit)
        columns["req/s stream / limit"] = summarise(s(ours, STREAM, "rps"), limit)
    return columns


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def ratio_table(title: str, columns: dict[str, Summary | None], rounds: int) -> list[str]:
    names = list(columns)
    lines = [title, "| round | " + " | ".join(names) + " |",
             "| --- |" + " ---: |" * len(names)]
    for r in range(rounds):
        row = [_x(columns[n].ratios[r]) if columns[n] else "-" for n in names]
        lines.append(f"| {r + 1} | " + " | ".join(row) + " |")
    lines.append("| median | " + " | ".join(
        _x(columns[n].median if columns[n] else None) for n in names) + " |")
    lines.append("| g.mean | " + " | ".join(
        _x(columns[n].geomean if columns[n] else None) for n in names) + " |")
    lines.append("| 90% | " + " | ".join(
        f"{columns[n].interval[0]:.3f}-{columns[n].interval[1]:.3f}"
        if columns[n] and columns[n].interval else "-" for n in names) + " |")
    return lines


def absolute_table(cells: list[Cell], systems: list[tuple[str, str]], concurrency: int,
                   rounds: int) -> list[str]:
    """Medians over rounds of each system at one concurrency, in ms and req/s."""
    lines = [f"C={concurrency}, medians over {rounds} rounds",
             "| system | req/s | p50 ms | p90 ms | first byte p50 ms | CPU ms/request | "
             "audio s/request | CPU stolen | errors |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system, variant in systems:
        mine = [c for c in cells if (c.system, c.variant, c.concurrency)
                == (system, variant, concurrency) and c.ok]
        if not any(c.system == system and c.concurrency == concurrency for c in cells):
            continue
        errors = sum(len(c.errors) for c in cells if (c.system, c.variant, c.concurrency)
                     == (system, variant, concurrency))
        if not mine:
            lines.append(f"| {system} {variant} | - | - | - | - | - | - | - | {errors} |")
            continue

        def med(metric: str, scale: float = 1000.0, digits: int = 0,
                cells: list[Cell] = mine) -> str:
            return f"{statistics.median(c.metric(metric) for c in cells) * scale:.{digits}f}"
        lines.append(f"| {system} {variant} | {med('rps', 1.0, 2)} | {med('p50')} | "
                     f"{med('p90')} | {med('fb50')} | {med('cpu')} | {med('audio', 1.0, 2)} | "
                     f"{stolen_text(mine)} | {errors} |")
    return lines


def stolen_of_cells(cells: list[Cell]) -> float | None:
    """Of the CPUs' running time during these cells together, the share stolen by the host
    (None where a cell's reading is missing)."""
    if not cells or any(c.cpu_ticks is None for c in cells):
        return None
    return share_of((sum(c.cpu_ticks[0] for c in cells), sum(c.cpu_ticks[1] for c in cells)))


def stolen_text(cells: list[Cell]) -> str:
    share = stolen_of_cells(cells)
    return "-" if share is None else f"{share:.0%}"


def memory_table(memory: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """PSS/RSS of each system's tree after warm-up and after the last round, and ours/piper.
    Peak RSS is each process's own high-water mark, summed (shared pages counted in each)."""
    lines = ["| system | when | PSS MiB | RSS MiB | peak RSS MiB | processes | threads | "
             "PSS / piper's |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system, by_when in memory.items():
        for when, m in by_when.items():
            base = memory.get(PIPER, {}).get(when, {}).get("pss_mib")
            ratio = f"{m['pss_mib'] / base:.2f}" if base else "-"
            lines.append(f"| {system} | {when} | {m['pss_mib']:.0f} | {m['rss_mib']:.0f} | "
                         f"{m.get('peak_rss_mib', 0):.0f} | {m['processes']:.0f} | "
                         f"{m['threads']:.0f} | {ratio} |")
    return lines


def report(cells: list[Cell], ours: list[str], concurrencies: list[int], cores: int,
           rounds: int, memory: dict) -> list[str]:
    systems = [(PIPER, WAV)] + [(o, v) for o in ours for v in (WAV, STREAM)] + [(GRAPH, WAV)]
    lines: list[str] = []
    limit = statistics.median(limit_series(cells, cores, rounds) or [0.0])
    lines.append(f"machine limit (cores {cores} / in-process CPU per request), median over "
                 f"rounds: {limit:.2f} req/s")
    for c in concurrencies:
        lines += ["", *absolute_table(cells, systems, c, rounds)]
        for o in ours:
            columns = ratio_columns(cells, o, c, cores, rounds)
            lines += ["", *ratio_table(f"C={c}, {o} / piper (and / the in-process graph, the "
                                       "machine's limit)", columns, rounds)]
    lines += ["", "memory, summed over each process tree", *memory_table(memory)]
    return lines
