"""How a stage's native work scales with intra-op threads: the stage built for N threads (its
factory's `threads` argument where it takes one, and torch's pool of N threads either way, as a
worker sizes it), the same requests run through it, and its wall time compared with one thread's
on the same requests. onnxruntime's or torch's second thread is not a second core's worth, and
this is the measurement that says how much it is.

What changes with threads is taken to be the native part alone: the lock-holding Python around
it and any device time are the one-thread measurement's, so a stage's native wall time with N
threads is its one-thread native time less what its wall time gained."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

import planner
from planner import StageProfile
from planner.app.profiling.stage_timing import build_stage, run_request

MAX_THREADS = 4  # the most threads measured: beyond it onnxruntime and torch rarely gain
# Stages whose native work is less than this share of their time, or than NATIVE_FLOOR_MS, are not
# measured: more threads cannot make them noticeably faster.
NATIVE_SHARE = 0.1
NATIVE_FLOOR_MS = 0.5


def thread_counts(cpus: int) -> tuple[int, ...]:
    """The counts above one measured on a machine of `cpus` CPUs."""
    return tuple(range(2, min(MAX_THREADS, cpus) + 1))


def worth_measuring(p: StageProfile) -> bool:
    return p.native_ms >= NATIVE_FLOOR_MS and p.native_ms >= NATIVE_SHARE * p.busy_ms


def native_by_threads(one_thread_wall_ms: float, native_ms: float, wall_ms: Mapping[int, float]
                      ) -> dict[str, float]:
    """`native_ms_by_threads` from the stage's mean wall time per request at each count (`1`
    included, on the same requests): the native part shrinks by what the wall time gained, at
    most down to an even split over the threads, and never grows past a thread less's time
    (more threads measured slower are noise or a cost the plan will not choose)."""
    out = {"1": round(native_ms, 4)}
    previous = native_ms
    for n in sorted(wall_ms):
        if n <= 1:
            continue
        gained = one_thread_wall_ms - wall_ms[n]
        native = min(max(native_ms - gained, native_ms / n), previous)
        out[str(n)] = round(native, 4)
        previous = native
    return out


def measure_threads(plan: planner.Plan, built: Mapping[str, Callable],
                    profiles: Sequence[StageProfile], device: str, defaults: Mapping[str, Any],
                    texts: Sequence[str], cpus: int,
                    progress: Callable[[str], None] = lambda _: None,
                    stream: bool = False) -> list[StageProfile]:
    """`profiles` with `native_ms_by_threads` filled in for each stage worth measuring, each built
    again for each count of `thread_counts(cpus)` and timed on `texts` beside its one-thread
    build (the other stages stay the one-thread ones). Leaves torch's pool at one thread."""
    counts = thread_counts(cpus)
    if not counts or not texts:
        return list(profiles)
    out = []
    for p in profiles:
        stage = plan.stage(p.name)
        if not worth_measuring(p) or stage.is_tp:
            out.append(p)
            continue
        progress(f"timing {p.name} with {', '.join(map(str, counts))} threads")
        walls = {1: _mean_wall(plan, dict(built), p.name, 1, texts, stream)}
        for n in counts:
            stages = dict(built)
            stages[p.name] = build_stage(dataclasses.replace(stage, threads=n), device, defaults)
            walls[n] = _mean_wall(plan, stages, p.name, n, texts, stream)
            del stages
        out.append(dataclasses.replace(
            p, native_ms_by_threads=native_by_threads(walls[1], p.native_ms, walls)))
    return out


def _mean_wall(plan: planner.Plan, stages: dict[str, Callable], name: str, threads: int,
               texts: Sequence[str], stream: bool) -> float:
    torch.set_num_threads(threads)
    try:
        run_request(plan, stages, texts[0], defaultdict(list), defaultdict(list),
                    stream=stream)  # warm-up
        cost: dict[str, list[float]] = defaultdict(list)
        for text in texts:
            run_request(plan, stages, text, cost, defaultdict(list), stream=stream)
    finally:
        torch.set_num_threads(1)
    return statistics.fmean(cost[name])
