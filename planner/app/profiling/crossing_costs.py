"""What serving adds to a request around the stages: the cost of a cross-process handoff (on
the launcher's own path and over a pipe, and the copy rate), the serving process's and the load
client's work per request, and each stage's time as the launcher itself times it when served."""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Mapping
from typing import Any

import torch

import planner
from planner import HandoffCost

from planner.app.bench.machine import process_cpu_s
from planner.tune.parallel import frozen_gc


def _pipe_child(conn) -> None:
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(msg)


def _copy_gbps() -> float:
    src = torch.empty(16 << 20, dtype=torch.uint8)
    dst = torch.empty_like(src)
    copies = []
    for _ in range(5):
        t = time.perf_counter()
        dst.copy_(src)
        copies.append(time.perf_counter() - t)
    return src.numel() / statistics.median(copies) / 1e9


def _handoff_cost() -> HandoffCost:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_pipe_child, args=(child,), daemon=True)
    with frozen_gc():
        proc.start()
    try:
        msg = {"request": 1, "stage": "x", "block": "segment", "offset": 0, "shape": (1024,)}
        busy, idle = [], []
        for i in range(300):
            if i % 2:  # a receiver that slept first pays the wake-up, as a waiting stage does
                time.sleep(0.0005)
            t = time.perf_counter()
            parent.send(msg)
            parent.recv()
            (idle if i % 2 else busy).append(time.perf_counter() - t)
        rtt = statistics.median(busy) * 1000.0
        woken = statistics.median(idle) * 1000.0
    finally:
        parent.send(None)
        proc.join(5)
    gbps = _copy_gbps()
    # A round trip is two messages. Each side's interpreter work is about a quarter of a
    # back-to-back trip; the time in flight includes waking the receiver.
    return HandoffCost(fixed_ms=rtt / 4, copy_gbps=gbps, latency_ms=max(woken - rtt / 2, rtt) / 2)


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by `pid` and all its descendants (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    tree, frontier = {pid}, {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - tree
        tree |= frontier
    return sum(process_cpu_s(p) or 0.0 for p in tree)


def _serve_null(stage: dict[str, Any], sample_rate: int, requests: int,
                stream: bool) -> tuple[float, float]:
    """Serve a pipeline of one stage that does no work as `planner bench` serves it, drive it one
    request at a time with the bench's own client (streamed responses if `stream`): per request
    (serving-side CPU ms, client CPU ms)."""
    import resource
    import tempfile

    import yaml

    from planner.app.bench.load_shapes import Closed, Load
    from planner.app.bench.loadgen import run_load
    from planner.app.bench.server import Server, ServerSpec

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "front-door.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"name": "front-door", "sample_rate": sample_rate,
                            "stages": [stage]}, f)
        with Server(ServerSpec(None, path, None, (), "cpu", None)) as server:
            started = server.start()
            texts = tuple(f"front door {i}." for i in range(8))
            run_load(started.url, Load(Closed(1), texts, 8, None, stream))  # warm up
            # In windows, and the median window taken: a one-off cost (a collection, a stats
            # report, a neighbour's burst) would otherwise be spread over every request.
            server_ms, client_ms = [], []
            for _ in range(_WINDOWS):
                cpu0, self0 = _tree_cpu_s(started.pid), resource.getrusage(resource.RUSAGE_SELF)
                result = run_load(started.url, Load(Closed(1), texts, -(-requests // _WINDOWS),
                                                    None, stream))
                cpu1, self1 = _tree_cpu_s(started.pid), resource.getrusage(resource.RUSAGE_SELF)
                n = max(len(result.ok), 1)
                server_ms.append((cpu1 - cpu0) / n * 1000.0)
                client_ms.append((self1.ru_utime + self1.ru_stime - self0.ru_utime
                                  - self0.ru_stime) / n * 1000.0)
    return statistics.median(server_ms), statistics.median(client_ms)


_WINDOWS = 5


def served_stage_ms(plan: planner.Plan, device: str, defaults: Mapping[str, Any],
                    texts: tuple[str, ...], stream: bool = False) -> dict[str, float]:
    """Each stage's time per request as the launcher itself times it (its calls and their
    handoffs on), with `plan` served and driven one request at a time, each asking for a
    streamed response if `stream`, else a whole one."""
    from launcher import launch

    with launch(plan, device=device, factory_defaults=defaults) as deployment:
        # warm up: first calls build caches
        deployment.submit(texts[0], stream=stream).result(600)
        before = deployment.settled_sample()  # with the warm-up's timings, then dropped
        for text in texts:
            deployment.submit(text, stream=stream).result(600)
        after = deployment.settled_sample()
    # Less each stage's wait for a core: the model shares the cores out itself, and a stage of
    # one request overlapping another (a streaming edge across processes) waited for one even
    # on a quiet 2-core machine (1.8 ms of a 7 ms stage: it was charged 26% more than it costs).
    lat0, lat1 = before.stage_latency, after.stage_latency
    wait0, wait1 = before.stage_core_wait_s, after.stage_core_wait_s
    return {name: (lat1[name].total - lat0[name].total - (wait1.get(name, 0.0)
                                                           - wait0.get(name, 0.0)))
            / len(texts) * 1000.0 for name in lat1 if lat1[name].n > lat0[name].n}


def front_door(audio_ms: float, sample_rate: int, requests: int = 120,
               stream: bool = False) -> tuple[float, float, HandoffCost]:
    """(serving-side ms, load client ms, cross-process handoff) per request: the front door
    from a served pipeline of one stage that does nothing but return `audio_ms` of audio at
    `sample_rate` (the profiled model's: so the server encodes and sends as many samples as it
    does for that model), the crossing from `_crossing`."""
    stage = {"name": "out", "process": "pipeline", "factory": "launcher.synthetic:stage",
             "args": {"audio_ms": max(audio_ms, 1.0), "sample_rate": sample_rate},
             "terminal": True}
    server1, client = _serve_null(stage, sample_rate, requests, stream)
    crossing_cpu, crossing_wall = _crossing()
    pipe = _handoff_cost()  # the floor under a crossing, and the copy rate
    handoff = HandoffCost(fixed_ms=max(crossing_cpu / 2, pipe.fixed_ms), copy_gbps=pipe.copy_gbps,
                          latency_ms=max(crossing_wall - crossing_cpu, pipe.latency_ms))
    # The serving side's own work, less the two crossings (in, out) the model charges apart.
    return max(server1 - 2 * handoff.fixed_ms, 0.0), client, handoff


def _crossing(requests: int = 1500) -> tuple[float, float]:
    """(CPU ms, wall ms) that one cross-process handoff adds to a request on the launcher's own
    path: two stages that do nothing, in one process and in two, each driven one request at a
    time through `launcher.launch`. A crossing costs a tenth of a millisecond or so; measured as
    the difference of two served HTTP runs, it drowned in their noise (+-15% of a millisecond
    and more), so it is measured here, on many requests, with the HTTP front door left out."""
    from launcher import launch

    def pipeline(split: bool) -> dict[str, Any]:
        def stage(name: str, nxt: str | None) -> dict[str, Any]:
            return {"name": name, "process": "other" if split and nxt is None else "pipeline",
                    "factory": "launcher.synthetic:stage",
                    "args": {} if nxt else {"audio_ms": 1.0},
                    **({"next": nxt} if nxt else {"terminal": True})}
        return {"name": "crossing", "stages": [stage("a", "out"), stage("out", None)],
                "process_safe_edges": [["a", "out"]]}

    cpu, wall = {}, {}
    for split in (False, True):
        result = planner.solve(config=pipeline(split))
        with launch(result.plan, device="cpu") as deployment:
            for _ in range(50):
                deployment.synthesize("x", timeout=30)
            pids = [os.getpid(), *deployment.worker_pids().values()]
            before = sum(process_cpu_s(p) or 0.0 for p in pids)
            times = []
            for _ in range(requests):
                t = time.perf_counter()
                deployment.synthesize("x", timeout=30)
                times.append(time.perf_counter() - t)
            cpu[split] = (sum(process_cpu_s(p) or 0.0 for p in pids) - before) / requests * 1e3
            wall[split] = statistics.median(times) * 1e3
    return max(cpu[True] - cpu[False], 0.0), max(wall[True] - wall[False], 0.0)
