"""Interleaved rounds (`planner bench --rounds N`): each placement's load split into N parts,
measured round after round across all placements (A B C, A B C, ...), then each placement's parts
merged into one run.

Why: on a shared machine the speed drifts by more than the gaps between placements (the same
placement can measure tens of per cent apart a few minutes later; docs/bench.md, "Rounds"). Run
back to back, the placement measured in a slow spell loses; interleaved, every placement sees the
drift alike, and how far one placement's rounds disagree says how far to trust a gap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from planner.app.bench.load_results import LoadResult
from planner.app.bench.measure import ProcessPeak, StageTime
from planner.app.bench.results import Run


def split(total: int, rounds: int) -> list[tuple[int, int]]:
    """(first index, count) of each round's share of `total` requests, in order, the earlier
    rounds one larger when they do not divide evenly."""
    out, start = [], 0
    for r in range(rounds):
        count = total // rounds + (r < total % rounds)
        out.append((start, count))
        start += count
    return out


def merge(parts: Sequence[Run]) -> Run:
    """One placement's rounds at one load, as one run: throughput is all the requests that
    succeeded over all the measured time, latencies are over all requests, stage times over all
    the work, and each process's memory peak is its highest."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    load = _merge_loads([p.load for p in parts])
    profile = _merge_profiles([p.profile for p in parts])
    ideal = first.placement.ideal_rps({s.stage: s.per_request_s for s in profile})
    starts = [p.startup_s for p in parts if p.startup_s is not None]  # none for a --url target
    return replace(first, startup_s=sum(starts) / len(starts) if starts else None,
                   processes=_merge_peaks([p.processes for p in parts]), profile=profile,
                   ideal_rps=ideal, load=load,
                   round_rps=tuple(p.load.throughput_rps for p in parts))


def spread(run: Run) -> float | None:
    """How far apart its rounds measured: the fastest over the slowest, minus 1."""
    rates = run.round_rps
    if len(rates) < 2 or min(rates) <= 0:
        return None
    return max(rates) / min(rates) - 1.0


def _merge_loads(loads: Sequence[LoadResult]) -> LoadResult:
    """Each round's samples shifted to follow the last one's time, as if the rounds were one
    load with pauses cut out; request indices stay those of the texts each round sent."""
    samples, offset = [], 0.0
    for load in loads:
        samples += [replace(s, started_s=s.started_s + offset,
                            scheduled_s=None if s.scheduled_s is None else s.scheduled_s + offset)
                    for s in load.samples]
        offset += load.wall_s
    realtime = [load.sender_realtime for load in loads if load.sender_realtime is not None]
    ticks = [load.cpu_ticks for load in loads]
    return LoadResult(shape=loads[0].shape, stream=loads[0].stream, wall_s=offset,
                      samples=tuple(samples), sender_realtime=all(realtime) if realtime else None,
                      cpu_ticks=None if None in ticks else (sum(t[0] for t in ticks),
                                                            sum(t[1] for t in ticks)))


def _merge_profiles(profiles: Sequence[tuple[StageTime, ...]]) -> tuple[StageTime, ...]:
    out = []
    for same in zip(*profiles, strict=True):
        total = sum(s.total_s for s in same)
        # requests finished in each round: its time over its time per request
        done = sum(s.total_s / s.per_request_s for s in same if s.per_request_s)
        out.append(StageTime(stage=same[0].stage, process=same[0].process,
                             invocations=sum(s.invocations for s in same), total_s=total,
                             per_request_s=total / done if done > 0 else None))
    return tuple(out)


def _merge_peaks(peaks: Sequence[tuple[ProcessPeak, ...]]) -> tuple[ProcessPeak, ...]:
    by_name: dict[str, ProcessPeak] = {}
    for round_peaks in peaks:
        for p in round_peaks:
            seen = by_name.get(p.name)
            by_name[p.name] = p if seen is None else replace(
                p, peak_rss_bytes=_max(seen.peak_rss_bytes, p.peak_rss_bytes),
                peak_gpu_bytes=_max(seen.peak_gpu_bytes, p.peak_gpu_bytes))
    return tuple(by_name.values())


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
