"""Where the CPUs idle while a thread waits, per placement, from the kernel's scheduler events.

`cores_busy.py` shows that a placement can leave the CPUs partly idle while its threads have work
(issue 26); this shows how. Linux keeps a run queue per CPU. A thread woken onto a busy CPU (an
interpreter-lock hand-over wakes the sibling wherever the scheduler guesses) preempts or queues
behind the thread there, and when the other CPU then goes idle it does not take that thread
until a wakeup lands on it or the busy CPU's next tick balances the load (up to 4 ms at HZ=250).
The scheduler's own events say, for each stretch of idle, whether a runnable thread waited in
another CPU's queue meanwhile, whose it was, and which process's threads preempted which:

    python -m benchmarks.tune_eval.cpu_idle_trace --config pipeline.yaml --concurrency 4 \\
        --requests 1000 --placement "--isolate-stage s0" \\
        --placement "--isolate-stage s0 --isolate-stage s1"
    python -m benchmarks.tune_eval.cpu_idle_trace --config pipeline.yaml --concurrency 4 \\
        --placement "--isolate-stage s0" --pin pipeline=0

Each placement is served through the launcher's Python API (client threads in this process, as
in `cores_busy.py`). Once a quarter of the requests are done, `sched_switch`, `sched_wakeup` and
`sched_wakeup_new` are recorded through tracefs for `--trace-seconds`; that needs root. A row
gives the throughput over the whole run and, over the traced window: the CPUs idle; of those,
the CPUs idle while a runnable thread that may run there waited in another CPU's queue (work a
single shared queue, `planner tune`'s model, would have run); idle stretches over 0.5 ms per
request; and the commonest preemptions across processes per request ("s0 by pipeline": a thread
of s0 put off its CPU, still runnable, by one of pipeline's). A line under it gives the idle
stretches' spread and who waited elsewhere as the long ones began.

`--pin PROCESS=CPUS` pins a process's threads after launch (`main` is this process, with the
client threads; a process group's copies are all pinned), to measure a remedy beside the plain
placement. `--json FILE` keeps the figures. Self-checks: idle with a thread waiting in the idle
CPU's own queue should be about 0 (else the trace was read wrong), and a trace that lost events
is flagged: its figures are not to be used.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

import yaml

import planner
from launcher import launch
from planner.errors import ConfigError
from planner.plan import cpu_list, cpu_text

from benchmarks.tune_eval.cores_busy import WARMUP, add_pipeline_args, solved_placements
from benchmarks.tune_eval.replay import pipeline_for

TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new")
# Ring buffer per CPU and traced second. These events come at a few thousand per second per CPU
# here (~70 bytes each): 4 MiB leaves room for twenty times that before the oldest are overwritten
BUFFER_KB_PER_S = 4096
LONG_GAP_NS = 500_000  # a stretch of idle longer than a wakeup's latency: the CPU sat out work
# Linux's sched_migration_cost (0.5 ms by default): a thread that left a CPU more recently than
# this is "cache hot" there, and an idle CPU's balancing will not take it from that CPU's queue
# (the kernel's task_hot; only a balance that failed often enough overrides it). Waiting beside
# an idle CPU while hot is then what the kernel chose; once cold, only a balance pass is missing
# (an idle CPU's own comes at the busy CPU's tick, up to 4 ms at HZ=250).
HOT_NS = 500_000
MAIN = "main"  # this process: the client threads and the launcher's side of the pipes
OTHER = "other"  # threads of no process of the placement (kernel threads, other programs)
NOBODY = "nobody"  # a long idle stretch that began with nothing waiting anywhere
IDLE = 0  # the pid the kernel gives each CPU's idle task

# `          python-3095    [001] d..2.   459.077680: sched_switch: prev_comm=...`; the flags
# column and a `(  tgid)` column come and go with tracefs options, and a command name may hold
# spaces and dashes (the pid is the last `-digits` before the CPU)
_LINE = re.compile(r"^\s*(?P<task>.*?)-(?P<tid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
                   r"(?:\S+\s+)?(?P<sec>\d+)\.(?P<frac>\d+):\s+"
                   r"(?P<kind>sched_switch|sched_wakeup_new|sched_wakeup):\s+(?P<rest>.*)$")
_SWITCH = re.compile(r"prev_pid=(\d+) prev_prio=-?\d+ prev_state=(\S+) ==> "
                     r".*next_pid=(\d+) next_prio=-?\d+\s*$")
_WAKEUP = re.compile(r".* pid=(\d+) prio=-?\d+ (?:success=\d+ )?target_cpu=(\d+)\s*$")
_WRITTEN = re.compile(r"entries-in-buffer/entries-written:\s*(\d+)/(\d+)")
_LOST = re.compile(r"^\s*CPU:\d+ \[LOST (\d+) EVENTS\]")


@dataclass(frozen=True)
class IdleFigures:
    """What one traced window says. Shares are of the span, per CPU; sum them for CPUs."""

    span_s: float  # first event to last
    requests: int  # requests finished in the window
    idle: tuple[float, ...]  # per CPU: running its idle task
    idle_waiting_elsewhere: tuple[float, ...]  # ... while a thread that may run there waited
    # ... of that, while every such thread had left a CPU within HOT_NS (cache hot: the kernel's
    # balancing does not move it); the rest had a cold one the next balance would have taken
    idle_waiting_elsewhere_hot: tuple[float, ...]
    # ... while one waited in its own queue: only a wakeup's latency, ~0 (a check on the reading)
    idle_waiting_own: tuple[float, ...]
    gaps: int  # idle stretches begun and ended inside the window
    gap_median_ms: float
    gap_p90_ms: float
    gaps_long_share: float  # of the stretches, those over LONG_GAP_NS
    long_gaps: int
    # per process, how many long stretches began with a thread of it waiting on another CPU
    # (each stretch counts once per process; NOBODY: none waited)
    long_gap_waiters: tuple[tuple[str, int], ...]
    preemptions: tuple[tuple[str, str, int], ...]  # (preempted, by, count), most first
    pulls: int  # threads that ran on a CPU other than the one whose queue they waited in
    # threads woken into the queue of a CPU running another while a CPU they may run on idled:
    # placed so, only a balance pass moves them (an idle CPU's comes at a busy CPU's tick)
    wakes_beside_idle: int
    lost_events: int  # events the ring buffer dropped: the figures are then not to be trusted

    @property
    def cpus_idle(self) -> float:
        return sum(self.idle)

    @property
    def cpus_idle_waiting_elsewhere(self) -> float:
        return sum(self.idle_waiting_elsewhere)

    @property
    def cpus_idle_waiting_elsewhere_hot(self) -> float:
        return sum(self.idle_waiting_elsewhere_hot)

    @property
    def cpus_idle_waiting_own(self) -> float:
        return sum(self.idle_waiting_own)

    def per_request(self, count: int) -> float:
        return count / self.requests if self.requests else math.nan

    def to_json(self) -> dict:
        out = {**asdict(self), "cpus_idle": self.cpus_idle,
               "cpus_idle_waiting_elsewhere": self.cpus_idle_waiting_elsewhere,
               "cpus_idle_waiting_elsewhere_hot": self.cpus_idle_waiting_elsewhere_hot,
               "cpus_idle_waiting_own": self.cpus_idle_waiting_own,
               "long_gaps_per_request": self.per_request(self.long_gaps),
               "preemptions_per_request": [[a, b, self.per_request(n)]
                                           for a, b, n in self.preemptions]}
        # JSON has no NaN (a window without idle stretches has no median): null
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}


@dataclass(frozen=True)
class _Event:
    ns: int
    cpu: int
    current: int  # the thread running on `cpu` when the event fired
    kind: str  # "switch" or "wakeup"
    tid: int  # switch: the thread leaving; wakeup: the thread woken
    other: int  # switch: the thread coming in; wakeup: the CPU whose queue it joins
    state: str = ""  # switch: the leaving thread's state (R: still runnable, preempted)


def _events(trace: str) -> tuple[list[_Event], int]:
    """The scheduler events of a tracefs `trace` text, in order, and the events it lost."""
    events: list[_Event] = []
    dropped = lost_lines = 0
    for line in trace.splitlines():
        if line.startswith("#"):
            if m := _WRITTEN.search(line):
                dropped = max(0, int(m.group(2)) - int(m.group(1)))
            continue
        if m := _LOST.match(line):
            lost_lines += int(m.group(1))
            continue
        m = _LINE.match(line)
        if m is None:
            continue  # another event, a blank line: not ours
        # nanoseconds, whole: the window's sums come out exact, whatever the clock's digits
        ns = int(m["sec"]) * 1_000_000_000 + int(m["frac"].ljust(9, "0")[:9])
        cpu, current = int(m["cpu"]), int(m["tid"])
        if m["kind"] == "sched_switch":
            if s := _SWITCH.search(m["rest"]):
                events.append(_Event(ns, cpu, current, "switch", int(s[1]), int(s[3]), s[2]))
        elif w := _WAKEUP.match(m["rest"]):
            events.append(_Event(ns, cpu, current, "wakeup", int(w[1]), int(w[2])))
    # an overwritten buffer reports both ways, or either: the larger says the most
    return events, max(dropped, lost_lines)


def idle_figures(trace: str, processes: Mapping[int, str], cpus: int, requests: int,
                 affinity: Mapping[int, Collection[int]] | None = None) -> IdleFigures:
    """The figures of one traced window: `trace` is tracefs's `trace` text, `processes` maps
    thread ids to process names (any other thread is OTHER), `cpus` the CPUs the machine has (a
    CPU the trace never mentions counts idle throughout: on a large machine mostly true), and
    `affinity` the CPUs each thread may run on, where known (a thread pinned away from an idle
    CPU is no work that CPU sat out). No I/O."""
    events, lost = _events(trace)
    n = max([cpus, *(e.cpu + 1 for e in events),
             *(e.other + 1 for e in events if e.kind == "wakeup")])
    allowed = affinity or {}

    def name(tid: int) -> str:
        return processes.get(tid, OTHER)

    def may_run(tid: int, cpu: int) -> bool:
        where = allowed.get(tid)
        return where is None or cpu in where

    # The window opens on a state the events have not said. The thread running on each CPU is
    # the one its first event fired on; a thread whose first appearance is being switched in was
    # runnable, in a queue the trace does not name (None), since before the window.
    running = [IDLE] * n
    known = [False] * n
    seen: set[int] = set()
    waiting: dict[int, int | None] = {}
    for e in events:
        if not known[e.cpu]:
            running[e.cpu], known[e.cpu] = e.current, True
        seen.add(e.current)
        if e.kind == "switch":
            seen.add(e.tid)
            if e.other not in seen and e.other != IDLE:
                waiting[e.other] = None
            seen.add(e.other)
        else:
            seen.add(e.tid)

    idle, elsewhere, hot, own = [0] * n, [0] * n, [0] * n, [0] * n
    left_cpu: dict[int, int] = {}  # when each thread last left a CPU (not known: cold)
    # when each CPU's idle stretch began; None also for one that began before the window,
    # whose length is unknown (its time still counts as idle)
    idle_since: list[int | None] = [None] * n
    began_with: list[frozenset[str]] = [frozenset()] * n
    gaps: list[int] = []
    long_waiters: Counter[str] = Counter()
    preempted: Counter[tuple[str, str]] = Counter()
    pulls = wakes_beside_idle = 0
    last = events[0].ns if events else 0
    for e in events:
        if dt := e.ns - last:
            for c in range(n):
                if running[c] != IDLE:
                    continue
                idle[c] += dt
                movable = [t for t, q in waiting.items() if q != c and may_run(t, c)]
                if movable:
                    elsewhere[c] += dt
                    cold_at = min(left_cpu.get(t, -HOT_NS) + HOT_NS for t in movable)
                    hot[c] += max(0, min(e.ns, cold_at) - last)
                if any(q == c for q in waiting.values()):
                    own[c] += dt
        last = e.ns
        c = e.cpu
        if e.kind == "wakeup":
            # one woken before it had switched out is still on its CPU: it never queued
            if e.tid not in running:
                waiting[e.tid] = e.other
                if running[e.other] != IDLE and any(
                        running[c] == IDLE and may_run(e.tid, c) for c in range(n)):
                    wakes_beside_idle += 1
            continue
        prev, nxt = e.tid, e.other
        if prev != IDLE:
            left_cpu[prev] = e.ns
            if e.state.startswith("R"):  # put off the CPU still runnable: back in its queue
                waiting[prev] = c
                if nxt != IDLE:
                    preempted[name(prev), name(nxt)] += 1
            else:
                waiting.pop(prev, None)
        if nxt != IDLE:
            queue = waiting.pop(nxt, None)
            if queue is not None and queue != c:
                pulls += 1
        if prev == IDLE and nxt != IDLE and idle_since[c] is not None:
            gap = e.ns - idle_since[c]
            gaps.append(gap)
            if gap > LONG_GAP_NS:
                long_waiters.update(began_with[c] or {NOBODY})
        if nxt == IDLE and prev != IDLE:
            idle_since[c] = e.ns
            began_with[c] = frozenset(name(t) for t, q in waiting.items()
                                      if q != c and may_run(t, c))
        elif nxt != IDLE:
            idle_since[c] = None
        running[c] = nxt

    span = (events[-1].ns - events[0].ns) if events else 0

    def share(per_cpu: list[int]) -> tuple[float, ...]:
        return tuple(x / span if span else 0.0 for x in per_cpu)

    ordered = sorted(gaps)
    long_gaps = sum(g > LONG_GAP_NS for g in gaps)
    return IdleFigures(
        span_s=span / 1e9, requests=requests, idle=share(idle),
        idle_waiting_elsewhere=share(elsewhere), idle_waiting_elsewhere_hot=share(hot),
        idle_waiting_own=share(own),
        gaps=len(gaps),
        gap_median_ms=statistics.median(ordered) / 1e6 if ordered else math.nan,
        # nearest rank: a stretch that happened, not a blend of two
        gap_p90_ms=ordered[math.ceil(0.9 * len(ordered)) - 1] / 1e6 if ordered else math.nan,
        gaps_long_share=long_gaps / len(gaps) if gaps else math.nan,
        long_gaps=long_gaps,
        long_gap_waiters=tuple(sorted(long_waiters.items(), key=lambda kv: (-kv[1], kv[0]))),
        preemptions=tuple((a, b, k) for (a, b), k in
                          sorted(preempted.items(), key=lambda kv: (-kv[1], kv[0]))),
        pulls=pulls, wakes_beside_idle=wakes_beside_idle, lost_events=lost)


def parse_pin(value: str, cpus: int) -> tuple[str, frozenset[int]]:
    """`PROCESS=CPUS` (CPUS as taskset writes them: `0`, `0-1`, `0,2`) -> (process, CPUs).
    ValueError, saying what to write instead, for anything else."""
    process, eq, spec = value.partition("=")
    process = process.strip()
    fix = ("write PROCESS=CPUS, e.g. pipeline=0 or main=0-1, with "
           + (f"CPUs 0-{cpus - 1}" if cpus > 1 else "CPU 0"))
    chosen = cpu_list(spec) if eq and process else None
    if chosen is None:
        raise ValueError(f"--pin {value!r} is not PROCESS=CPUS: {fix}")
    if chosen[-1] >= cpus:
        raise ValueError(f"--pin {value!r}: this machine has no CPU {chosen[-1]}: {fix}")
    return process, frozenset(chosen)


# -- the machine ---------------------------------------------------------------------------------
NEEDS_ROOT = ("cpu_idle_trace.py records the kernel's scheduler events through tracefs "
              f"({TRACEFS}), which needs root (or CAP_SYS_ADMIN): run it as root, or run "
              "benchmarks/tune_eval/cores_busy.py for the CPUs busy per placement without them")


def tracefs_error() -> str | None:
    """Why the scheduler's events cannot be recorded here, or None. Mounts tracefs where it is
    missing and this is root."""
    # os.access, not Path.exists: tracefs's directory refuses a non-root look inside (EACCES)
    if not os.access(TRACEFS / "trace", os.F_OK) and os.geteuid() == 0 and TRACEFS.is_dir():
        try:
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True,
                           capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            return f"cpu_idle_trace.py could not mount tracefs on {TRACEFS}: {e}"
    if not os.access(TRACEFS / "set_event", os.W_OK):
        return NEEDS_ROOT
    return None


def _write(name: str, text: str, append: bool = False) -> None:
    # One os.write per value: tracefs takes each write whole, and Python's buffered append to
    # set_event hands it pieces the kernel refuses (EINVAL). O_TRUNC clears set_event and trace.
    fd = os.open(TRACEFS / name, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class Tracer:
    """The kernel's trace buffer, recording the scheduler's events between `on` and `off`, put
    back on leaving: tracing off, no events set, the clock and buffer size as they were."""

    def __init__(self, seconds: float) -> None:
        self.buffer_kb = math.ceil(seconds) * BUFFER_KB_PER_S

    def __enter__(self) -> Self:
        clock = (TRACEFS / "trace_clock").read_text()
        self.old_clock = m[1] if (m := re.search(r"\[(\S+)\]", clock)) else None
        # "7 (expanded: 1408)" until first used: the expanded size is the one it has
        self.old_kb = int(re.findall(r"\d+", (TRACEFS / "buffer_size_kb").read_text())[-1])
        try:
            _write("tracing_on", "0")
            _write("set_event", "")
            for event in EVENTS:
                _write("set_event", event + "\n", append=True)
            # mono: the same clock on every CPU, so the CPUs' events interleave in true order
            _write("trace_clock", "mono")
            if self.old_kb < self.buffer_kb:
                _write("buffer_size_kb", str(self.buffer_kb))
        except BaseException:
            self.__exit__()
            raise
        return self

    def on(self) -> None:
        _write("trace", "")
        _write("tracing_on", "1")

    def off(self) -> None:
        _write("tracing_on", "0")

    def text(self) -> str:
        return (TRACEFS / "trace").read_text(errors="replace")

    def __exit__(self, *exc: object) -> None:
        _write("tracing_on", "0")
        _write("set_event", "")
        _write("trace", "")
        if self.old_clock:
            _write("trace_clock", self.old_clock)
        _write("buffer_size_kb", str(self.old_kb))


def threads_of(pids: Mapping[str, int]) -> dict[int, str]:
    """Thread id -> process name, for each process's threads now."""
    out: dict[int, str] = {}
    for name, pid in pids.items():
        try:
            out.update((int(tid), name) for tid in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue  # it exited: its threads ran nothing worth naming
    return out


def affinities(tids: Collection[int]) -> dict[int, frozenset[int]]:
    out = {}
    for tid in tids:
        try:
            out[tid] = frozenset(os.sched_getaffinity(tid))
        except OSError:
            continue
    return out


def pin(pid: int, cpus: frozenset[int]) -> None:
    """Every thread of `pid` on these CPUs only; threads started later inherit it from theirs."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            continue  # the thread ended between the listing and here


def pinned_names(pins: Mapping[str, frozenset[int]], names: Collection[str]) -> dict[str, str]:
    """worker or `main` name -> the pin's process, for the pins that apply: a pin names a
    process group, and its copies run as `group.N`."""
    return {n: p for p in pins for n in names if n == p or n.startswith(p + ".")}


class PinError(Exception):
    """A process could not be pinned (a CPU outside this process's cpuset, say)."""


@dataclass(frozen=True)
class Run:
    pins: tuple[str, ...]  # the pins that applied, as given
    throughput_rps: float
    figures: IdleFigures
    ended_early: bool  # the clients were done before the window closed: the tail is in it


def serve(plan: planner.Plan, concurrency: int, requests: int, seconds: float,
          pins: Mapping[str, frozenset[int]], tracer: Tracer) -> Run:
    home = os.sched_getaffinity(0)
    try:
        return _serve(plan, concurrency, requests, seconds, pins, tracer)
    finally:
        for tid in threads_of({MAIN: os.getpid()}):
            try:
                os.sched_setaffinity(tid, home)  # the next placement starts unpinned
            except ProcessLookupError:
                continue


def _serve(plan: planner.Plan, concurrency: int, requests: int, seconds: float,
           pins: Mapping[str, frozenset[int]], tracer: Tracer) -> Run:
    texts = [f"request number {i} with a few words in it to say." for i in range(requests)]
    done = 0
    lock = threading.Lock()
    quarter = threading.Event()
    failed: list[BaseException] = []
    with launch(plan, device="cpu") as deployment:
        for text in texts[:WARMUP]:
            deployment.synthesize(text, timeout=60)
        pids = {MAIN: os.getpid(), **deployment.worker_pids()}
        applied = pinned_names(pins, pids)
        try:
            for process, pin_name in applied.items():
                # main is pinned before the clients start: they inherit its CPUs
                pin(pids[process], pins[pin_name])
        except OSError as e:
            raise PinError(f"cannot pin {', '.join(applied)}: {e}") from e
        left = iter(texts)

        def client() -> None:
            nonlocal done
            try:
                while (text := next(left, None)) is not None:
                    deployment.synthesize(text, timeout=120)
                    with lock:
                        done += 1
                        if done == requests // 4:
                            quarter.set()
            except BaseException as e:  # noqa: BLE001 - raised in the main thread below
                failed.append(e)
                quarter.set()

        clients = [threading.Thread(target=client) for _ in range(concurrency)]
        start = time.perf_counter()
        for c in clients:
            c.start()
        quarter.wait()
        names = threads_of(pids)
        with lock:
            before = done
        tracer.on()
        try:
            time.sleep(seconds)
        finally:
            tracer.off()
        with lock:
            during = done - before
        ended_early = not any(c.is_alive() for c in clients)
        # threads started in the window are named too; one gone by now is OTHER: there is no
        # knowing whose it was
        names |= threads_of(pids)
        allowed = affinities(names)
        for c in clients:
            c.join()
        wall = time.perf_counter() - start
    if failed:
        raise failed[0]
    # read once the deployment is down: a few MB of text parsed while serving would be load
    figures = idle_figures(tracer.text(), names, os.cpu_count() or 1, during, allowed)
    used = tuple(f"{p}={cpu_text(pins[p])}" for p in pins if p in applied.values())
    return Run(used, requests / wall, figures, ended_early)


def row(placement: str, run: Run) -> list[str]:
    f = run.figures
    # between processes: within one, most are an interpreter-lock hand-over, the wakee
    # preempting the thread that woke it on the same CPU (the JSON has those too)
    across = [(a, b, k) for a, b, k in f.preemptions if a != b]
    top = ", ".join(f"{a} by {b} {f.per_request(k):.2f}" for a, b, k in across[:2])
    waiters = ", ".join(f"{p} {k}" for p, k in f.long_gap_waiters[:4]) or "-"
    lines = [
        (f"{placement:38} {' '.join(run.pins) or '-':14} {run.throughput_rps:6.1f} "
         f"{f.cpus_idle:9.2f} {f.cpus_idle_waiting_elsewhere:16.2f} "
         f"{f.per_request(f.long_gaps):9.2f}  {top or '-'}"),
        (f"{'':4}{f.requests} requests in {f.span_s:.2f} s; {f.gaps} idle stretches, median "
         f"{f.gap_median_ms:.2f} ms, p90 {f.gap_p90_ms:.2f} ms, {f.gaps_long_share:.0%} over "
         f"{LONG_GAP_NS / 1e6:g} ms; waiting elsewhere as those began: {waiters}"),
        (f"{'':4}idle beside a thread waiting elsewhere: {f.cpus_idle_waiting_elsewhere_hot:.2f} "
         f"CPUs while it was cache hot (it left a CPU under {HOT_NS / 1e6:g} ms before: not "
         f"moved by the kernel's balancing), "
         f"{f.cpus_idle_waiting_elsewhere - f.cpus_idle_waiting_elsewhere_hot:.2f} after; "
         f"{f.per_request(f.wakes_beside_idle):.2f} wakes per request onto a busy CPU while "
         "another idled")]
    if f.lost_events:
        lines.append(f"{'':4}WARNING: the trace lost {f.lost_events} events: these figures are "
                     "wrong; raise BUFFER_KB_PER_S or lower --trace-seconds")
    if f.cpus_idle_waiting_own > 0.01:
        lines.append(f"{'':4}WARNING: {f.cpus_idle_waiting_own:.2f} CPUs idle beside their own "
                     "queue's thread: the trace was not read right")
    if run.ended_early:
        lines.append(f"{'':4}WARNING: the run ended inside the traced window: raise --requests "
                     "or lower --trace-seconds")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pipeline_args(ap)
    ap.add_argument("--pin", action="append", default=[], metavar="PROCESS=CPUS",
                    help="pin this process's threads (a process group of the placement, or "
                         "main: this one, with the clients) to these CPUs after launch, in every "
                         "placement that has it; repeatable")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--trace-seconds", type=float, default=2.0,
                    help="how long to record, from a quarter of the requests on")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    cpus = os.cpu_count() or 1
    pins: dict[str, frozenset[int]] = {}
    given: dict[str, str] = {}  # each pin as written, to name it so
    for value in args.pin:
        try:
            process, chosen = parse_pin(value, cpus)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if process in pins:
            print(f"error: --pin {value!r}: {process} is pinned twice (also "
                  f"{given[process]!r}): give one list, e.g. {process}=0,1", file=sys.stderr)
            return 2
        pins[process], given[process] = chosen, value
    if args.requests < 2 * WARMUP:
        print(f"error: --requests must be at least {2 * WARMUP} (the trace starts a quarter of "
              "them in)", file=sys.stderr)
        return 2
    if not 0 < args.trace_seconds <= 60:
        print("error: --trace-seconds must be over 0 and at most 60 (the kernel's buffer is "
              f"sized {BUFFER_KB_PER_S} KiB per CPU a second)", file=sys.stderr)
        return 2
    if (problem := tracefs_error()) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory() as tmp:  # a synthetic pipeline's config, read at once
            pipeline = (planner.load(config=str(args.config)) if args.config
                        else pipeline_for(args.pipeline, Path(tmp)))
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        plans = solved_placements(pipeline, args.placement)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # a pin that names no process of any placement is a typo: say so before serving anything
    groups = {MAIN} | {g.name for _, plan in plans for g in plan.groups} | {
        t.name for _, plan in plans for t in plan.tp_processes} | {
        f"{g.name}.{k}" for _, plan in plans for g in plan.groups if g.copies > 1
        for k in range(g.copies)}  # one copy of a group alone: `pipeline.0`
    if unknown := [p for p in pins if p not in groups]:
        print(f"error: --pin {given[unknown[0]]!r}: no placement has a process "
              f"{unknown[0]!r}: name one of {', '.join(sorted(groups))}", file=sys.stderr)
        return 2

    print(f"{pipeline.name}, C={args.concurrency}, {args.requests} requests, "
          f"{args.trace_seconds:g} s traced from a quarter in; {cpus} CPUs, load average "
          f"{os.getloadavg()[0]:.2f} at the start")
    print(f"{'placement':38} {'pins':14} {'req/s':>6} {'CPUs idle':>9} {'idle, one waits':>16} "
          f"{'long gaps':>9}  top preemptions")
    print(f"{'':38} {'':14} {'':6} {'':9} {'elsewhere (CPUs)':>16} {'per req':>9}  "
          "(per request)")
    runs = []
    with Tracer(args.trace_seconds) as tracer:
        for placement, plan in plans:
            try:
                run = serve(plan, args.concurrency, args.requests, args.trace_seconds, pins,
                            tracer)
            except PinError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            runs.append((placement, run))
            print("\n".join(row(placement, run)), flush=True)
    if args.json:
        args.json.write_text(json.dumps({
            "pipeline": pipeline.name, "concurrency": args.concurrency,
            "requests": args.requests, "trace_seconds": args.trace_seconds, "cpus": cpus,
            "runs": [{"placement": p, "pins": list(r.pins), "throughput_rps": r.throughput_rps,
                      "ended_early": r.ended_early, "figures": r.figures.to_json()}
                     for p, r in runs]}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
