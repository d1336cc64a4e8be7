"""Running a pipeline's stages one request at a time in this thread, as a worker builds and
calls them, and noting each stage's own costs: wall time less any wait for a core, CPU time,
lock-holding time (with a `LockProbe`), the items and bytes it hands on, and when its first of
several chunks came out."""

from __future__ import annotations

import inspect
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import torch

import planner
from planner.app.profiling.lock_sampling import LockProbe
from launcher.worker.core_wait import WaitClock
from launcher.worker.main import resolve_factory


def _nbytes(out: Any) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel() * out.element_size()
    if isinstance(out, Mapping):
        return sum(_nbytes(v) for v in out.values())
    if isinstance(out, (list, tuple)):
        return sum(_nbytes(v) for v in out)
    return 0


def build_stage(stage: planner.PlannedStage, device: str, defaults: Mapping[str, Any]) -> Callable:
    factory = resolve_factory(stage.factory)
    kwargs = dict(stage.factory_kwargs())
    named = {n for n, p in inspect.signature(factory).parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    offered = {**defaults, "device": device, "stage_name": stage.name,
               "process_name": stage.process or stage.name,
               "total_gpu_memory_fraction": stage.fraction, "threads": stage.threads}
    for key, value in offered.items():
        # the planned threads win over a config's, as in a worker (`launcher.worker.main`)
        if key in named and (key not in kwargs or key == "threads"):
            kwargs[key] = value
    return factory(**kwargs)


def run_request(plan: planner.Plan, stages: dict[str, Callable], text: str,
                 cost: dict[str, list[float]], out: dict[str, list[float]],
                 probe: LockProbe | None = None, stream: bool = False) -> Any:
    """One request through the stages in pipeline order; adds each stage's wall time (less any
    wait for a core) and its CPU time. `stream`: the request asks for a streamed response (the
    entry stages' payload says so, as the launcher's does), else a whole one."""
    preds: dict[str, list[str]] = defaultdict(list)
    for h in plan.handoffs:
        preds[h.target].append(h.source)
    with WaitClock() as waited:
        return _run_stages(plan, stages, text, cost, out, probe, preds, waited, stream)


def _run_stages(plan: planner.Plan, stages: dict[str, Callable], text: str,
                cost: dict[str, list[float]], out: dict[str, list[float]], probe: LockProbe | None,
                preds: dict[str, list[str]], waited: WaitClock, stream: bool) -> Any:
    wholes: dict[str, dict[str, Any]] = {}
    chunks: dict[str, list[dict[str, Any]]] = {}
    audio = None
    for s in plan.stages:
        base: dict[str, Any] = ({"text": text, "voice": "alloy", "stream": stream}
                                if not preds[s.name] else {})
        fed: list[dict[str, Any]] | None = None  # the chunks a predecessor streams to it
        for p in preds[s.name]:
            base.update(wholes.get(p, {}))
            if p in chunks:
                fed = chunks[p]
        inputs = [base] if fed is None else [{**base, **c} for c in fed]
        fn = stages[s.name]
        wall = cpu = held = 0.0
        first: float | None = None  # its busy time (as `wall`) before its first item came out
        produced: list[dict[str, Any]] = []
        merged: dict[str, Any] = {}
        for data in inputs:
            p0 = probe.snapshot() if probe else None
            q0 = waited()
            w0, c0 = time.perf_counter(), time.thread_time()
            result = fn(data)
            if not isinstance(result, Mapping):
                items = []
                it = iter(result)
                while True:  # a generator's work happens inside next()
                    try:
                        items.append(next(it))
                    except StopIteration:
                        break
                    if first is None:  # on the same clocks as `took` below
                        first = wall + max(time.perf_counter() - w0 - (waited() - q0), 0.0)
            else:
                items = [result]
            took = time.perf_counter() - w0
            cpu += time.thread_time() - c0
            # What the stage took on a core of its own: less the time it waited for one (a busy
            # machine's other work), which would otherwise pass for device time.
            stalled = waited() - q0
            out[s.name + ":waited"].append(stalled)
            took = max(took - stalled, 0.0)
            if first is None and items:  # a call returning its one item: out when it returned
                first = wall + took
            wall += took
            if probe:
                held += probe.held_ms(p0, probe.snapshot(), took * 1000.0)
            for item in items:
                produced.append({k: v for k, v in item.items() if v is not None})
            merged = {**data, **{k: v for k, v in items[-1].items() if v is not None}} if items \
                else data
        cost[s.name].append(wall * 1000.0)
        out[s.name + ":cpu"].append(cpu * 1000.0)
        out[s.name + ":held"].append(held)
        out[s.name + ":items"].append(float(len(produced)))
        out[s.name + ":bytes"].append(float(sum(_nbytes(p) for p in produced)))
        if len(produced) > 1 and wall > 0 and first is not None:
            out[s.name + ":first"].append(min(first / wall, 1.0))
        if len(produced) > 1:
            chunks[s.name] = produced
        wholes[s.name] = merged
        if "audio" in merged and not any(h.source == s.name for h in plan.handoffs):
            # piper's vocoder yields numpy arrays, the stand-ins tensors: one flat tensor either way
            audio = torch.cat([torch.as_tensor(p["audio"]).reshape(-1)
                               for p in produced if "audio" in p])
    return audio


def core_wait_share(*passes: tuple[Mapping[str, list[float]], Mapping[str, list[float]]]) -> float:
    """The share of the stages' time spent waiting for a core over profiling passes, each given
    as `run_request` filled it: (each stage's ms on a core, what else it noted, each call's wait
    for a core in seconds among it)."""
    waited = sum(sum(v) for _, extra in passes for k, v in extra.items() if k.endswith(":waited"))
    ran = sum(sum(v) for cost, _ in passes for v in cost.values()) / 1000.0
    return waited / (waited + ran) if waited + ran > 0 else 0.0


def first_chunk_share(extra: Mapping[str, list[float]], name: str) -> float | None:
    """The mean share of a stage's busy time per request spent before its first item came out,
    over the requests it handed on more than one item for (None: it never did). The model spreads
    a streaming stage's work over its chunks from this: a stage that computes a whole request and
    then yields its chunks in a burst (near 1) holds the next stage back far longer than one that
    streams as it computes (near 1 / chunks)."""
    shares = extra.get(name + ":first")
    return round(statistics.fmean(shares), 4) if shares else None
