"""Measure a pipeline's profile for `planner tune`: each stage's own costs, on this machine.

The declared pipeline's stages are built with their factories, as a worker builds them, and the
bench's request texts are run through them one request at a time in one thread, so each stage's
costs are its own (no contention; that is what the model predicts). Per stage and request:
- wall time, the thread's CPU time (its own CPU clock) and the time it spent runnable but
  waiting for a core (Linux schedstat); what is none of these is device time (a GPU, a sleep, I/O).
  On a busy machine a stage waits for a core, and that wait is neither its CPU nor a device's: it
  is taken out, so a profile taken there has the shape of one taken on a quiet machine;
- the part of its CPU time that holds the interpreter lock: the same requests run again with a
  probe thread waking every 0.2 ms in the same process, and the time between wake-ups that
  found the lock held, over all the time, is the share of the stage's time that held it;
- how much native work it does per call, between two moments it needs the lock back: a few short
  requests run again beside a thread spinning pure Python, and each time the stage needs the lock
  back it waits for the spinner's switch interval;
- the chunks and payload bytes it hands on, and how much of its time passed before the first of
  several chunks came out (on the clocks of its wall time, less any wait for a core);
- the resident memory its construction added.
Plus the cost of a cross-process handoff (the CPU and time it adds to a request of a null pipeline
split in two, on the launcher's own path; the copy rate), and the serving process's
per-request work (encoding the audio).
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import torch

import planner
from planner import HandoffCost, Profile, StageProfile
from planner.tune.calibration import calibrate_to_served, request_scales

from planner.app.bench.machine import cpu_model, process_cpu_s
from planner.app.bench.texts import request_texts, warmup_texts
from launcher.control.metrics import rss_bytes
from launcher.worker.core_wait import WaitClock
from launcher.worker.main import resolve_factory

TEXT_CHARS = 100  # the bench's default request length


def _rss_mib() -> float:
    return (rss_bytes(os.getpid()) or 0) / 2**20


def _nbytes(out: Any) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel() * out.element_size()
    if isinstance(out, Mapping):
        return sum(_nbytes(v) for v in out.values())
    if isinstance(out, (list, tuple)):
        return sum(_nbytes(v) for v in out)
    return 0


def _build(stage: planner.PlannedStage, device: str, defaults: Mapping[str, Any]) -> Callable:
    factory = resolve_factory(stage.factory)
    kwargs = dict(stage.factory_kwargs())
    named = {n for n, p in inspect.signature(factory).parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    offered = {**defaults, "device": device, "stage_name": stage.name,
               "process_name": stage.process or stage.name,
               "total_gpu_memory_fraction": stage.fraction}
    for key, value in offered.items():
        if key not in kwargs and key in named:
            kwargs[key] = value
    return factory(**kwargs)


class _Probe:
    """A thread that wakes every PERIOD and notes whether it got the interpreter lock back at once.

    Its wake-ups fall at random moments of a stage's run; the time between two wake-ups is
    counted as held when the second found the lock held (late by more than a switch interval), and
    the held time over all the time is the share of the stage's time that held it. The time, not
    the count of wake-ups: a blocked one comes late, so while the lock is held the probe wakes
    about half as often, and counting wake-ups found about half a mixed stage's lock time (2
    vCPUs: 0.52 of 2 ms of pure Python beside a 15 ms sleep; 0.30 of 3 ms of pure Python beside
    3 ms of hashing, where 0.50 is right; timed, 1.0 and 0.56). Sampling costs the stage almost
    nothing: the probe asks for the lock for microseconds, unlike a busy competitor, which would
    also charge the stage the convoy of retaking the lock after each native call."""

    PERIOD = 0.0002

    def __init__(self) -> None:
        self.blocked_s = 0.0
        self.total_s = 0.0
        self.threshold = float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        period, clock = self.PERIOD, time.perf_counter
        with WaitClock() as waited:
            last = clock()
            while not self._stop.is_set():
                due, w0 = clock() + period, waited()
                time.sleep(period)
                now = clock()
                # Late for want of a core (a busy machine) is not late for the lock.
                if now - due - (waited() - w0) > self.threshold:
                    self.blocked_s += now - last
                self.total_s += now - last
                last = now

    def snapshot(self) -> tuple[float, float]:
        return self.blocked_s, self.total_s

    def held_ms(self, before: tuple[float, float], after: tuple[float, float],
                wall_ms: float) -> float:
        spanned = after[1] - before[1]
        return wall_ms * (after[0] - before[0]) / spanned if spanned > 0 else 0.0

    def __enter__(self) -> _Probe:
        self._old_interval = sys.getswitchinterval()
        # The lock changes hands at the probe's resolution, so a blocked wake-up is late by about
        # one switch interval, an unblocked one only by timer slack.
        sys.setswitchinterval(self.PERIOD)
        lateness = []
        with WaitClock() as waited:
            for _ in range(400):
                due, w0 = time.perf_counter() + self.PERIOD, waited()
                time.sleep(self.PERIOD)
                lateness.append(time.perf_counter() - due - (waited() - w0))
        self.threshold = statistics.median(lateness) + self.PERIOD / 2
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._old_interval)


class _Spinner:
    """A thread that runs pure Python flat out beside the stages, as a busy stage does in a worker,
    with a short switch interval. A stage then waits about an interval each time it needs the lock
    back: after each native call (to run the Python that makes the next one; a call or two more may
    slip in while the spinner wakes up) and for half of its own pure-Python time, which it shares
    with the spinner. So (slowdown - lock-holding time) / INTERVAL counts the waits, and its native
    time over that count is the native work per wait: what the model calls a call. The interval is
    short to keep this cheap (a wait per torch op adds up); the count hardly depends on it, since
    what ends a run of calls is the spinner taking the lock back, not the interval's length
    (hashing 64 KiB blocks on 2 cores: 0.06-0.09 ms of native work per wait at 0.5 ms, 0.09-0.10
    at CPython's default 5 ms)."""

    INTERVAL = 0.0005
    # A few short requests: the count is per ms of native work, and a stage of small torch ops
    # waits thousands of times per request (qwen3-tts's engine: about 7 s for a 100-character one).
    REQUESTS = 3
    TEXT_CHARS = 20
    SETTLE = 0.05  # the first requests beside a fresh spinner waited less often (2 cores)

    def __init__(self) -> None:
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        x = 0
        while not self._stop:
            for _ in range(200):
                x += 1

    def __enter__(self) -> _Spinner:
        self._old_interval = sys.getswitchinterval()
        sys.setswitchinterval(self.INTERVAL)
        self._thread.start()
        time.sleep(self.SETTLE)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()
        sys.setswitchinterval(self._old_interval)

    @classmethod
    def call_ms(cls, alone_ms: float, contended_ms: float, gil_ms: float,
                native_ms: float) -> float | None:
        """Native work per call, from a stage's wall time alone and beside the spinner, and its
        lock-holding and native time on the same requests; None without native work."""
        if native_ms <= 0:
            return None
        waits = max(contended_ms - alone_ms - gil_ms, 0.0) / (cls.INTERVAL * 1000.0)
        return native_ms / max(waits, 1.0)  # at least one call: the stage enters it once


def _run_request(plan: planner.Plan, stages: dict[str, Callable], text: str,
                 cost: dict[str, list[float]], out: dict[str, list[float]],
                 probe: _Probe | None = None) -> Any:
    """One request through the stages in pipeline order; adds each stage's wall time (less any
    wait for a core) and its CPU time."""
    preds: dict[str, list[str]] = defaultdict(list)
    for h in plan.handoffs:
        preds[h.target].append(h.source)
    with WaitClock() as waited:
        return _run_stages(plan, stages, text, cost, out, probe, preds, waited)


def _run_stages(plan: planner.Plan, stages: dict[str, Callable], text: str,
                cost: dict[str, list[float]], out: dict[str, list[float]], probe: _Probe | None,
                preds: dict[str, list[str]], waited: WaitClock) -> Any:
    wholes: dict[str, dict[str, Any]] = {}
    chunks: dict[str, list[dict[str, Any]]] = {}
    audio = None
    for s in plan.stages:
        base: dict[str, Any] = {"text": text, "voice": "alloy"} if not preds[s.name] else {}
        stream: list[dict[str, Any]] | None = None
        for p in preds[s.name]:
            base.update(wholes.get(p, {}))
            if p in chunks:
                stream = chunks[p]
        inputs = [base] if stream is None else [{**base, **c} for c in stream]
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
            audio = torch.cat([p["audio"] for p in produced if "audio" in p])
    return audio


def core_wait_share(*passes: tuple[Mapping[str, list[float]], Mapping[str, list[float]]]) -> float:
    """The share of the stages' time spent waiting for a core over profiling passes, each given
    as `_run_request` filled it: (each stage's ms on a core, what else it noted, each call's wait
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


def _serve_null(stage: dict[str, Any], requests: int) -> tuple[float, float]:
    """Serve a pipeline of one stage that does no work as `planner bench` serves it, drive it one
    request at a time with the bench's own client: per request (serving-side CPU ms, client CPU
    ms)."""
    import resource
    import tempfile

    import yaml

    from planner.app.bench.loadgen import Closed, Load, run_load
    from planner.app.bench.server import Server, ServerSpec

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "front-door.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"name": "front-door", "stages": [stage]}, f)
        with Server(ServerSpec(None, path, None, (), "cpu", None)) as server:
            started = server.start()
            texts = tuple(f"front door {i}." for i in range(8))
            run_load(started.url, Load(Closed(1), texts, 8, None, False))  # warm up
            # In windows, and the median window taken: a one-off cost (a collection, a stats
            # report, a neighbour's burst) would otherwise be spread over every request.
            server_ms, client_ms = [], []
            for _ in range(_WINDOWS):
                cpu0, self0 = _tree_cpu_s(started.pid), resource.getrusage(resource.RUSAGE_SELF)
                result = run_load(started.url, Load(Closed(1), texts, -(-requests // _WINDOWS),
                                                    None, False))
                cpu1, self1 = _tree_cpu_s(started.pid), resource.getrusage(resource.RUSAGE_SELF)
                n = max(len(result.ok), 1)
                server_ms.append((cpu1 - cpu0) / n * 1000.0)
                client_ms.append((self1.ru_utime + self1.ru_stime - self0.ru_utime
                                  - self0.ru_stime) / n * 1000.0)
    return statistics.median(server_ms), statistics.median(client_ms)


_WINDOWS = 5


def _served_ms(plan: planner.Plan, device: str, defaults: Mapping[str, Any],
               texts: tuple[str, ...]) -> dict[str, float]:
    """Each stage's time per request as the launcher itself times it (its calls and their
    handoffs on), with `plan` served and driven one request at a time."""
    from launcher import launch

    with launch(plan, device=device, factory_defaults=defaults) as deployment:
        deployment.synthesize(texts[0], timeout=600)  # warm up: first calls build caches
        before = deployment.settled_sample()  # with the warm-up's timings, then dropped
        for text in texts:
            deployment.synthesize(text, timeout=600)
        after = deployment.settled_sample()
    # Less each stage's wait for a core: the model shares the cores out itself, and a stage of
    # one request overlapping another (a streaming edge across processes) waited for one even
    # on a quiet 2-core machine (1.8 ms of a 7 ms stage: it was charged 26% more than it costs).
    lat0, lat1 = before.stage_latency, after.stage_latency
    wait0, wait1 = before.stage_core_wait_s, after.stage_core_wait_s
    return {name: (lat1[name].total - lat0[name].total - (wait1.get(name, 0.0)
                                                           - wait0.get(name, 0.0)))
            / len(texts) * 1000.0 for name in lat1 if lat1[name].n > lat0[name].n}


def _front_door(audio_ms: float, requests: int = 120) -> tuple[float, float, HandoffCost]:
    """(serving-side ms, load client ms, cross-process handoff) per request: the front door
    from a served pipeline of one stage that does nothing, the crossing from `_crossing`."""
    stage = {"name": "out", "process": "pipeline", "factory": "launcher.synthetic:stage",
             "args": {"audio_ms": max(audio_ms, 1.0)}, "terminal": True}
    server1, client = _serve_null(stage, requests)
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


def measure(plan: planner.Plan, *, requests: int = 12, warmup: int = 2, device: str = "cpu",
            factory_defaults: Mapping[str, Any] | None = None, seed: int = 0,
            progress: Callable[[str], None] = lambda _: None,
            served: planner.Plan | None = None) -> Profile:
    """Profile `plan`'s stages (its declared topology is what is measured: costs are per stage).
    The stages are then timed served as `served` places them (default: as `plan` does): a
    placement that keeps stages of one request that run at once in processes of their own times
    more of them fairly (see `planner.tune.calibration.calibrate_to_served`)."""
    torch.set_num_threads(1)  # as every worker runs
    base_rss = _rss_mib()
    stages: dict[str, Callable] = {}
    rss: dict[str, float] = {}
    for s in plan.stages:
        before = _rss_mib()
        stages[s.name] = _build(s, device, factory_defaults or {})
        rss[s.name] = max(0.0, _rss_mib() - before)
    texts = request_texts(seed, requests, TEXT_CHARS)
    for text in warmup_texts(seed, warmup, TEXT_CHARS):
        _run_request(plan, stages, text, defaultdict(list), defaultdict(list))

    progress(f"profiling {len(plan.stages)} stages on {requests} requests")
    alone: dict[str, list[float]] = defaultdict(list)
    extra: dict[str, list[float]] = defaultdict(list)
    audio_lengths = []
    for text in texts:
        audio = _run_request(plan, stages, text, alone, extra)
        if audio is not None:
            audio_lengths.append(audio.numel() / 24.0)  # 24 kHz: samples -> ms
    progress("sampling what holds the interpreter lock")
    held: dict[str, list[float]] = defaultdict(list)
    probed: dict[str, list[float]] = defaultdict(list)
    with _Probe() as probe:
        for text in texts:
            _run_request(plan, stages, text, probed, held, probe)

    progress("timing native calls beside a busy thread")
    switch_interval_ms = sys.getswitchinterval() * 1000.0  # the workers' (the spinner changes it)
    short = request_texts(seed, _Spinner.REQUESTS, _Spinner.TEXT_CHARS)
    calm: dict[str, list[float]] = defaultdict(list)
    calm_costs: dict[str, list[float]] = defaultdict(list)
    for text in short:
        _run_request(plan, stages, text, calm, calm_costs)
    contended: dict[str, list[float]] = defaultdict(list)
    with _Spinner():
        for text in short:
            _run_request(plan, stages, text, contended, defaultdict(list))

    out = []
    for s in plan.stages:
        wall = statistics.fmean(alone[s.name])
        cpu = min(statistics.fmean(extra[s.name + ":cpu"]), wall)
        gil = min(statistics.fmean(held[s.name + ":held"]), cpu)
        # Totals over the short requests; their lock-holding share taken to be the stage's.
        short_cpu = sum(calm_costs[s.name + ":cpu"])
        short_gil = short_cpu * gil / cpu if cpu else 0.0
        call = _Spinner.call_ms(sum(calm[s.name]), sum(contended[s.name]), short_gil,
                                short_cpu - short_gil)
        successors = [h for h in plan.handoffs if h.source == s.name]
        out.append(StageProfile(
            name=s.name, gil_ms=round(gil, 4), native_ms=round(cpu - gil, 4),
            device_ms=round(wall - cpu, 4),
            chunks_out=round(statistics.fmean(extra[s.name + ":items"]), 3),
            out_bytes=round(statistics.fmean(extra[s.name + ":bytes"]) if successors else 0.0),
            rss_mib=round(rss[s.name], 1),
            native_call_ms=round(call, 4) if call is not None else None,
            first_chunk_share=first_chunk_share(extra, s.name)))
    progress("measuring the HTTP front door")
    audio_ms = statistics.fmean(audio_lengths) if audio_lengths else 0.0
    frontend_ms, client_ms, handoff = _front_door(audio_ms)
    progress("timing the stages served")
    serve = served or plan
    try:
        served_ms = _served_ms(serve, device, factory_defaults or {}, texts)
    except Exception as exc:  # noqa: BLE001 - the profile stands without it
        progress(f"could not serve the stages ({type(exc).__name__}: {exc}); "
                 "keeping each stage's costs as measured alone")
        served_ms = {}
    out = calibrate_to_served(serve, out, served_ms, handoff)
    return Profile(
        model=plan.model, variant=plan.variant, cores=len(os.sched_getaffinity(0)),
        cpu_model=cpu_model() or "unknown", stages=tuple(out),
        handoff=handoff, device=device,
        frontend_ms=round(frontend_ms, 4), client_ms=round(client_ms, 4),
        process_rss_mib=round(base_rss, 1), requests=requests,
        request_scale=request_scales(alone, [s.name for s in plan.stages]),
        switch_interval_ms=round(switch_interval_ms, 4),
        core_wait_share=round(core_wait_share((alone, extra), (probed, held)), 4),
        note=f"{TEXT_CHARS}-character texts, seed {seed}, torch {torch.__version__}")
