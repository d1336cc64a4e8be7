"""Run a `Plan`: one OS process per process group and per tensor-parallel rank, supervised.

The supervisor (this process) starts the workers, routes the control messages of cross-process
handoffs, and watches every process. Placement is the plan's; nothing here re-decides it.

Supervision rules (documented for operators):
- Ready only when every process has built all its stages; `startup_timeout` (default 120 s) bounds
  it, and a failure names the process, the stage and the factory's error. A process that exits
  before it starts building points at the usual cause: a launching script without an
  `if __name__ == "__main__":` guard, which every worker re-imports.
- A dead process is noticed within `POLL_S` (0.1 s). Requests it held fail with `WorkerDied`
  (HTTP 503) naming the process and its stages; the process (for a tensor-parallel stage: all its
  ranks) is restarted after a backoff of 0.5 s, 1 s, 2 s, ... capped at 8 s.
- More than `max_restarts` (default 3) restarts of one group within `RESTART_WINDOW_S` (60 s) shut
  the whole deployment down: health reports `failed` and every request gets 503.
- Workers exit when this process dies (their control pipe closes) and ignore SIGINT, so Ctrl-C is
  handled once, here. `close()` stops every worker and removes every shared-memory segment.
- Shared memory (see `ipc`): each process sends from its own pool of blocks and readers give
  blocks back by lease; every give-back passes through here on its way to the owner. A message
  that cannot be delivered has its lease given back; a dead reader's leases are given back for it
  (this process tracks what each process holds); a dead owner's blocks are unlinked at once, and
  readers are told to unmap them.
"""

from __future__ import annotations

import atexit
import itertools
import math
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import queue
import secrets
import signal
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from planner import Plan

from . import ipc, worker
from .audio import SAMPLE_RATE, Audio
from .errors import (
    LaunchError, RequestFailed, RequestTimeout, StageFailed, Unavailable, WorkerDied,
)
from .metrics import Histogram, label, rss_bytes

POLL_S = 0.1
RESTART_WINDOW_S = 60.0
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
STOP_GRACE_S = 2.0
SHM_PREFIX = "stageplanner-"
# A worker that exits before its own code runs died in multiprocessing's bootstrap, where the
# forkserver/spawn child re-imports the launching script: an unguarded launch() there fails.
_NO_MAIN_GUARD = (
    "before it started building its stages. Likely cause: the script that called "
    "launcher.launch() has no `if __name__ == \"__main__\":` guard. Each worker process "
    "re-imports that script (the forkserver and spawn start methods do), so its top-level code "
    "runs launch() again inside the worker, which cannot start processes while it is starting "
    "itself and exits. Put the script's entry point under `if __name__ == \"__main__\":`.")


def _context(start_method: str):
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        # Preloaded once in the fork server, so each worker starts without re-importing torch.
        ctx.set_forkserver_preload(["launcher.worker", "launcher.standins"])
    return ctx


def resolve_device(requested: str) -> tuple[str, str | None]:
    """('cpu' | 'cuda', a note for the operator or None)."""
    if requested not in ("auto", "cpu", "cuda"):
        raise LaunchError(f"device must be auto, cpu or cuda, not {requested!r}")
    if requested == "cpu":
        return "cpu", None
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise LaunchError("device cuda was requested but torch sees no CUDA device")
    if available:
        return "cuda", None
    return "cpu", ("CUDA is not available: running every stage on CPU "
                   "(GPU ids and memory fractions are not enforced)")


@dataclass
class _Proc:
    name: str
    unit: str  # restarted together: a process group, or all ranks of one TP stage
    stages: tuple[str, ...]
    gpu: int | None
    spec: worker.WorkerSpec
    process: Any = None
    conn: Any = None
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    state: str = "stopped"  # starting | ready | restarting | failed | stopped
    pid: int | None = None
    started: bool = False  # the worker's own code runs (multiprocessing's bootstrap is over)
    building: str | None = None
    build_error: tuple[str, str, str] | None = None  # stage, one line, traceback
    in_flight: set[int] = field(default_factory=set)
    # (block, lease) delivered to this process and not given back yet; released for it if it dies
    holding: set[tuple[str, int]] = field(default_factory=set)
    depths: dict[str, int] = field(default_factory=dict)
    cuda_allocated: int | None = None
    shm: tuple[int, int, int] = (0, 0, 0)  # its pool's blocks lent, blocks free, bytes
    restarts: int = 0

    def describe(self) -> str:
        return f"process '{self.name}' (pid {self.pid}, stages: {', '.join(self.stages)})"


class SpeechRequest:
    """Handle of one submitted request. Iterate `chunks()` to stream, or call `result()`."""

    def __init__(self, request_id: int, stream: bool, cancel) -> None:
        self.id = request_id
        self.stream = stream
        self.sample_rate = SAMPLE_RATE
        self._events: queue.Queue = queue.Queue()
        self._cancel = cancel
        self.done = False

    def chunks(self, timeout: float | None = None) -> Iterator[torch.Tensor]:
        """Audio chunks (float32, mono) in order, each as soon as the terminal stage produced it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                kind, value = self._events.get(timeout=wait)
            except queue.Empty:
                self._cancel(self.id, RequestTimeout(f"no audio within {timeout} s"))
                raise RequestTimeout(f"request {self.id}: no audio within {timeout} s") from None
            if kind == "chunk":
                yield value
            elif kind == "end":
                return
            else:
                raise value

    def result(self, timeout: float | None = None) -> Audio:
        parts = list(self.chunks(timeout))
        return Audio(torch.cat(parts) if parts else torch.zeros(0), self.sample_rate)

    def cancel(self) -> None:
        self._cancel(self.id, RequestFailed("cancelled by the client"))


class Deployment:
    """A running plan. Create with `launch(...)`; always `close()` (or use it as a context manager)."""

    def __init__(self, plan: Plan, *, device: str, note: str | None, start_method: str,
                 startup_timeout: float, max_restarts: int,
                 factory_defaults: Mapping[str, Any]) -> None:
        self.plan = plan
        self.device = device
        self.note = note
        self.max_restarts = max_restarts
        self.startup_timeout = startup_timeout
        self.shm_prefix = f"{SHM_PREFIX}{os.getpid()}-{secrets.token_hex(3)}-"
        self._ctx = _context(start_method)
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._requests: dict[int, SpeechRequest] = {}
        self._state = "starting"  # starting | running | draining | stopping | stopped | failed
        self._failure: str | None = None
        self._startup_failure: str | None = None
        self._started = threading.Event()
        self.failed = threading.Event()  # set when the deployment gave up (restart limit)
        self._restart_log: dict[str, deque[float]] = {}
        self._due_restarts: dict[str, float] = {}
        self._latency: dict[str, Histogram] = {}
        self._request_latency = Histogram()
        self._outcomes = {"ok": 0, "error": 0}
        self._router_stop = threading.Event()
        self._receiver = ipc.Receiver(self._release)
        self._procs, self._home, self._entry = _layout(plan, device, self.shm_prefix,
                                                       dict(factory_defaults))
        self._units: dict[str, list[_Proc]] = {}
        for proc in self._procs.values():
            self._units.setdefault(proc.unit, []).append(proc)
        self._router = threading.Thread(target=self._route_forever, name="supervisor",
                                         daemon=True)

    # -- startup ---------------------------------------------------------------------------------
    def _start(self) -> None:
        for unit in self._units:
            self._start_unit(unit)
        self._router.start()
        if not self._started.wait(self.startup_timeout):
            with self._lock:
                waiting = [
                    f"{p.describe()}: building {p.building or 'nothing yet'}"
                    for p in self._procs.values() if p.state != "ready"
                ]
            self.close()
            raise LaunchError(
                f"startup timed out after {self.startup_timeout:g} s; not ready: "
                + "; ".join(waiting)
            )
        if self._startup_failure is not None:
            message = self._startup_failure
            self.close()
            raise LaunchError(message)

    def _start_unit(self, unit: str) -> None:
        procs = self._units[unit]
        if procs[0].spec.tp is not None:
            init = f"tcp://127.0.0.1:{_free_port()}"
            for proc in procs:
                proc.spec = _replace_tp(proc.spec, init)
        for proc in procs:
            parent_end, child_end = self._ctx.Pipe(duplex=True)
            process = self._ctx.Process(target=worker.main, args=(proc.spec, child_end),
                                        name=f"stage-planner:{proc.name}", daemon=True)
            process.start()
            child_end.close()  # so that the worker's death reads as EOF here
            proc.process, proc.conn, proc.pid = process, parent_end, process.pid
            proc.state, proc.building, proc.build_error = "starting", None, None
            proc.started = False
            proc.in_flight, proc.depths, proc.cuda_allocated = set(), {}, None
            proc.holding, proc.shm = set(), (0, 0, 0)

    # -- supervisor loop -------------------------------------------------------------------------
    def _route_forever(self) -> None:
        while not self._router_stop.is_set():
            with self._lock:
                live = [p for p in self._procs.values() if p.process is not None]
            waitables = {}
            for p in live:
                waitables[p.conn] = (p, "conn")
                waitables[p.process.sentinel] = (p, "dead")
            try:
                ready = mpc.wait(list(waitables), timeout=POLL_S) if waitables else []
            except OSError:
                ready = []
            if not waitables:
                time.sleep(POLL_S)
            deaths = []
            for obj in ready:
                proc, kind = waitables[obj]
                if kind == "conn":
                    self._drain(proc)
                else:
                    deaths.append(proc)
            for proc in deaths:
                if proc.process is not None and proc.process.sentinel in waitables:
                    self._drain(proc)
                    self._on_death(proc)
            self._restart_due()

    def _drain(self, proc: _Proc) -> None:
        conn = proc.conn
        try:
            while conn is not None and conn.poll():
                self._handle(proc, conn.recv())
        except (EOFError, OSError):
            pass  # the sentinel reports the death

    def _handle(self, proc: _Proc, msg: tuple) -> None:
        kind = msg[0]
        if kind == "route":
            _, target, rid, source, chunk, last, packed = msg
            self._forward(target, rid, source, chunk, last, packed)
        elif kind == "result":
            _, rid, stage, chunk, last, packed = msg
            try:
                data = self._receiver.unpack(packed)
            except OSError as exc:
                self._fail(rid, StageFailed(f"cannot read the output of stage '{stage}' in "
                                            f"process '{proc.name}': {exc}"))
                return
            self._result(rid, stage, data, last)
        elif kind == "free":
            _, segment, lease = msg
            with self._lock:
                proc.holding.discard((segment, lease))
            self._release(segment, lease)
        elif kind == "error":
            _, rid, stage, message = msg
            self._fail(rid, StageFailed(
                f"stage '{stage}' in process '{proc.name}' failed: {message}"))
        elif kind == "released":
            with self._lock:
                proc.in_flight.discard(msg[1])
        elif kind == "stats":
            _, latencies, depths, cuda, shm = msg
            with self._lock:
                for stage, values in latencies.items():
                    hist = self._latency.setdefault(stage, Histogram())
                    for v in values:
                        hist.observe(v)
                proc.depths, proc.cuda_allocated, proc.shm = depths, cuda, shm
        elif kind == "started":
            proc.started = True
        elif kind == "building":
            proc.building = msg[1]
        elif kind == "build_error":
            _, stage, short, text = msg
            proc.build_error = (stage, short, text)
        elif kind == "ready":
            with self._lock:
                proc.state = "ready"
                proc.building = None
                if self._state == "starting" and all(
                        p.state == "ready" for p in self._procs.values()):
                    self._state = "running"
                    self._started.set()

    def _forward(self, target: str, rid: int, source: str, chunk, last, packed) -> None:
        with self._lock:
            request = self._requests.get(rid)
            dest = self._procs[self._home[target]]
            usable = request is not None and dest.state == "ready"
            lease = (packed.segment, packed.lease)
            if usable:
                dest.in_flight.add(rid)
                if packed.segment is not None:
                    dest.holding.add(lease)
        if not usable:
            self._release(*lease)
            if request is not None:
                self._fail(rid, WorkerDied(f"{dest.describe()} is {dest.state}; "
                                           f"cannot hand over from '{source}'"))
            return
        if not self._send(dest, ("deliver", target, rid, source, chunk, last, packed)):
            with self._lock:
                dest.holding.discard(lease)
            self._release(*lease)

    def _release(self, segment: str | None, lease: int) -> None:
        """Give a lent block back to the process that owns it (this incarnation of it only: a
        dead owner's blocks are swept, and its successor has never heard of them)."""
        if segment is None:
            return
        pid = ipc.owner_pid(segment)
        with self._lock:
            owner = next((p for p in self._procs.values()
                          if p.process is not None and p.pid == pid), None)
        if owner is not None:
            self._send(owner, ("free", segment, lease))

    def _send(self, proc: _Proc, msg: tuple) -> bool:
        try:
            with proc.send_lock:
                proc.conn.send(msg)
            return True
        except (OSError, ValueError, AttributeError):
            return False  # dead or closed; the sentinel path fails its requests

    def _result(self, rid: int, stage: str, data: dict[str, Any], last: bool) -> None:
        with self._lock:
            request = self._requests.get(rid)
        if request is None:
            return
        audio = data.get("audio")
        if not isinstance(audio, torch.Tensor):
            self._fail(rid, StageFailed(f"terminal stage '{stage}' returned no 'audio' tensor "
                                        f"(keys: {sorted(data)})"))
            return
        # A copy: a view would pin the worker's shared block for as long as the client keeps it.
        request._events.put(("chunk", audio.reshape(-1).to(torch.float32, copy=True)))
        if last:
            with self._lock:
                self._requests.pop(rid, None)
                self._outcomes["ok"] += 1
                self._request_latency.observe(time.monotonic() - request._t0)
            request.done = True
            request._events.put(("end", None))

    def _fail(self, rid: int, error: RequestFailed) -> None:
        with self._lock:
            request = self._requests.pop(rid, None)
            if request is None:
                return
            self._outcomes["error"] += 1
            holders = [p for p in self._procs.values() if rid in p.in_flight]
            for p in holders:
                p.in_flight.discard(rid)
        for p in holders:
            if p.state == "ready":
                self._send(p, ("cancel", rid))
        request.done = True
        request._events.put(("error", error))

    def _on_death(self, proc: _Proc) -> None:
        with self._lock:
            if proc.process is None or self._state in ("stopping", "stopped"):
                return
            code = proc.process.exitcode
            how = _exit_text(code)
            if self._state == "starting":
                if proc.build_error is not None:
                    stage, short, text = proc.build_error
                    factory = self.plan.stage(stage).factory
                    self._startup_failure = (
                        f"stage '{stage}' (factory {factory}) in process '{proc.name}' failed to "
                        f"build: {short}\n\n{text}")
                elif not proc.started and code is not None and code >= 0:
                    self._startup_failure = f"{proc.describe()} {how} {_NO_MAIN_GUARD}"
                else:
                    self._startup_failure = (
                        f"{proc.describe()} {how} while building "
                        f"{proc.building or 'its stages'}")
                self._started.set()
                return
            unit = proc.unit
            victims = self._units[unit]
            now = time.monotonic()
            log = self._restart_log.setdefault(unit, deque())
            while log and now - log[0] > RESTART_WINDOW_S:
                log.popleft()
            reason = f"{proc.describe()} {how}"
            if proc.build_error is not None:
                reason += f" (rebuilding '{proc.build_error[0]}' failed: {proc.build_error[1]})"
            give_up = len(log) >= self.max_restarts
            failed_rids = set()
            held: set[tuple[str, int]] = set()
            for p in victims:
                failed_rids |= p.in_flight
                held |= p.holding
                p.holding = set()
                p.state = "failed" if give_up else "restarting"
        for p in victims:
            if p is not proc:
                _stop_process(p, grace=0.0)
            _close_proc(p)
        # A dead reader never gives back what it was lent; its owners may reuse those blocks now.
        for lease in held:
            self._release(*lease)
        for p in victims:
            ipc.sweep(f"{self.shm_prefix}{ipc.safe_name(p.name)}.")
            # Readers drop their mappings of the dead owner's (now unlinked) blocks.
            gone = ipc.owner_prefix(self.shm_prefix, p.name, p.pid)
            self._receiver.forget(gone)
            with self._lock:
                survivors = [q for q in self._procs.values()
                             if q.process is not None and q.state == "ready"]
            for q in survivors:
                self._send(q, ("gone", gone))
        suffix = ("; restart limit reached, shutting the deployment down" if give_up
                  else "; restarting it")
        for rid in failed_rids:
            self._fail(rid, WorkerDied(f"{reason} while handling this request{suffix}"))
        if give_up:
            self._give_up(f"{reason}; more than {self.max_restarts} restarts in "
                          f"{RESTART_WINDOW_S:g} s")
            return
        with self._lock:
            log.append(now)
            delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (len(log) - 1))
            self._due_restarts[unit] = now + delay
            for p in victims:
                p.restarts += 1

    def _restart_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [u for u, t in self._due_restarts.items() if t <= now]
            for unit in due:
                del self._due_restarts[unit]
            if self._state not in ("running", "draining"):
                return
        for unit in due:
            self._start_unit(unit)

    def _give_up(self, reason: str) -> None:
        with self._lock:
            self._state = "failed"
            self._failure = reason
            pending = list(self._requests)
        for rid in pending:
            self._fail(rid, Unavailable(f"deployment failed: {reason}"))
        for p in self._procs.values():
            _stop_process(p, grace=0.0)
            _close_proc(p)
        self._receiver.forget("")
        ipc.sweep(self.shm_prefix)
        self.failed.set()

    # -- public API ------------------------------------------------------------------------------
    def submit(self, text: str, voice: str | None = None, stream: bool = False) -> SpeechRequest:
        """Start synthesising `text`. Raises `Unavailable` when the deployment cannot take it."""
        with self._lock:
            if self._state != "running":
                why = f": {self._failure}" if self._failure else ""
                raise Unavailable(f"deployment is {self._state}{why}")
            targets = [self._procs[self._home[s]] for s in self._entry]
            for p in targets:
                if p.state != "ready":
                    raise Unavailable(f"{p.describe()} is {p.state}")
            rid = next(self._ids)
            request = SpeechRequest(rid, stream, self._fail)
            request._t0 = time.monotonic()
            self._requests[rid] = request
            for p in targets:
                p.in_flight.add(rid)
        payload = ipc.Packed(None, (), {"text": text, "voice": voice})
        for stage, p in zip(self._entry, targets):
            if not self._send(p, ("deliver", stage, rid, worker.CLIENT, None, True, payload)):
                self._fail(rid, WorkerDied(f"{p.describe()} is not reachable"))
        return request

    def synthesize(self, text: str, voice: str | None = None,
                   timeout: float | None = 120.0) -> Audio:
        return self.submit(text, voice).result(timeout)

    @property
    def state(self) -> str:
        return self._state

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._requests)

    def health(self) -> dict[str, Any]:
        with self._lock:
            procs = list(self._procs.values())
            state = self._state
            if state == "running" and any(p.state != "ready" for p in procs):
                state = "degraded"
            return {
                "status": "ok" if state == "running" else state,
                "model": self.plan.model,
                "variant": self.plan.variant,
                "device": self.device,
                "note": self.note,
                "error": self._failure,
                "in_flight": len(self._requests),
                "processes": [
                    {
                        "name": p.name,
                        "pid": p.pid if p.process is not None else None,
                        "state": p.state,
                        "stages": list(p.stages),
                        "gpu": p.gpu,
                        "memory_fraction": p.spec.memory_fraction,
                        "restarts": p.restarts,
                    }
                    for p in procs
                ],
            }

    def retry_after(self) -> int:
        """Whole seconds a client refused with 503 should wait before trying again: until the
        next scheduled restart (the backoff), plus one for the new worker to build its stages."""
        with self._lock:
            due = min(self._due_restarts.values(), default=None)
        wait = 0.0 if due is None else max(0.0, due - time.monotonic())
        return 1 + math.ceil(wait)

    def metrics_text(self) -> str:
        out = [
            "# HELP stage_planner_stage_latency_seconds Time a stage spent on one invocation.",
            "# TYPE stage_planner_stage_latency_seconds histogram",
        ]
        with self._lock:
            for stage in (s.name for s in self.plan.stages):
                hist = self._latency.get(stage, Histogram())
                out += hist.lines("stage_planner_stage_latency_seconds",
                                  f'stage="{label(stage)}"')
            out += ["# HELP stage_planner_request_latency_seconds Submit to last audio chunk.",
                    "# TYPE stage_planner_request_latency_seconds histogram"]
            out += self._request_latency.lines("stage_planner_request_latency_seconds",
                                               f'model="{label(self.plan.model)}"')
            out += ["# HELP stage_planner_requests_total Finished requests by outcome.",
                    "# TYPE stage_planner_requests_total counter"]
            out += [f'stage_planner_requests_total{{outcome="{k}"}} {v}'
                    for k, v in self._outcomes.items()]
            out += ["# HELP stage_planner_requests_in_flight Requests submitted, not finished.",
                    "# TYPE stage_planner_requests_in_flight gauge",
                    f"stage_planner_requests_in_flight {len(self._requests)}",
                    "# HELP stage_planner_stage_queue_depth Payloads waiting in a stage's inbox.",
                    "# TYPE stage_planner_stage_queue_depth gauge"]
            procs = list(self._procs.values())
            for p in procs:
                for stage, depth in p.depths.items():
                    out.append(f'stage_planner_stage_queue_depth{{stage="{label(stage)}",'
                               f'process="{label(p.name)}"}} {depth}')
            out += ["# HELP stage_planner_process_rss_bytes Resident memory of a worker process.",
                    "# TYPE stage_planner_process_rss_bytes gauge"]
            for p in procs:
                rss = rss_bytes(p.pid if p.process is not None else None)
                if rss is not None:
                    out.append(f'stage_planner_process_rss_bytes{{process="{label(p.name)}"}} {rss}')
            out += ["# HELP stage_planner_process_restarts_total Restarts of a worker process.",
                    "# TYPE stage_planner_process_restarts_total counter"]
            out += [f'stage_planner_process_restarts_total{{process="{label(p.name)}"}} '
                    f"{p.restarts}" for p in procs]
            out += ["# HELP stage_planner_shm_blocks Shared-memory blocks a process sends from, "
                    "by state (lent: a reader still views it).",
                    "# TYPE stage_planner_shm_blocks gauge"]
            for p in procs:
                for state, n in zip(("lent", "free"), p.shm):
                    out.append(f'stage_planner_shm_blocks{{process="{label(p.name)}",'
                               f'state="{state}"}} {n}')
            out += ["# HELP stage_planner_shm_bytes Size of a process's shared-memory blocks.",
                    "# TYPE stage_planner_shm_bytes gauge"]
            out += [f'stage_planner_shm_bytes{{process="{label(p.name)}"}} {p.shm[2]}'
                    for p in procs]
            cuda = [p for p in procs if p.cuda_allocated is not None]
            if cuda:
                out += ["# HELP stage_planner_cuda_allocated_bytes torch.cuda.memory_allocated "
                        "of a worker.", "# TYPE stage_planner_cuda_allocated_bytes gauge"]
                out += [f'stage_planner_cuda_allocated_bytes{{process="{label(p.name)}",'
                        f'gpu="{p.gpu}"}} {p.cuda_allocated}' for p in cuda]
        return "\n".join(out) + "\n"

    def worker_pids(self) -> dict[str, int]:
        with self._lock:
            return {p.name: p.pid for p in self._procs.values()
                    if p.process is not None and p.pid is not None}

    def close(self, drain_timeout: float = 0.0) -> None:
        """Stop everything. With `drain_timeout`, first let in-flight requests finish (that long)."""
        with self._lock:
            if self._state == "stopped":
                return
            if self._state in ("running", "starting"):
                self._state = "draining"
        deadline = time.monotonic() + drain_timeout
        while drain_timeout and self.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:
            self._state = "stopping"
            pending = list(self._requests)
        for rid in pending:
            self._fail(rid, Unavailable("deployment is shutting down"))
        self._router_stop.set()
        if self._router.is_alive() and self._router is not threading.current_thread():
            self._router.join(timeout=5)
        for p in self._procs.values():
            if p.process is not None and p.conn is not None:
                self._send(p, ("stop",))
        for p in self._procs.values():
            _stop_process(p, grace=STOP_GRACE_S)
            _close_proc(p)
            p.state = "stopped"
        self._receiver.close()
        ipc.sweep(self.shm_prefix)
        with self._lock:
            self._state = "stopped"

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch(plan: Plan, device: str = "auto", *, startup_timeout: float = 120.0,
           max_restarts: int = 3, start_method: str = "forkserver",
           factory_defaults: Mapping[str, Any] | None = None) -> Deployment:
    """Start every process of `plan` and return once all stages are built.

    `device`: auto (CUDA when present, else CPU, with `Deployment.note` saying so), cpu or cuda.
    `factory_defaults`: keyword arguments offered to every factory whose signature names them
    (the plan's own `args` win); tests use `{"size": "tiny"}` to shrink the stand-ins.
    Raises `LaunchError`, after stopping whatever had started, when any stage fails to build.
    """
    if start_method not in ("forkserver", "spawn"):
        raise LaunchError("start_method must be forkserver or spawn: plain fork is unsafe with torch")
    resolved, note = resolve_device(device)
    deployment = Deployment(plan, device=resolved, note=note, start_method=start_method,
                            startup_timeout=startup_timeout, max_restarts=max_restarts,
                            factory_defaults=factory_defaults or {})
    _LIVE.add(deployment)
    deployment._start()
    return deployment


# Deployments still open at interpreter exit are closed, so a forgotten close() leaves nothing.
_LIVE: weakref.WeakSet[Deployment] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for deployment in list(_LIVE):
        deployment.close()


# -- helpers -------------------------------------------------------------------------------------
def _layout(plan: Plan, device: str, prefix: str, defaults: dict[str, Any]
            ) -> tuple[dict[str, _Proc], dict[str, str], tuple[str, ...]]:
    """Translate the plan into worker specs: which process hosts and receives each stage."""
    home: dict[str, str] = {}
    for group in plan.groups:
        for stage in group.stages:
            home[stage] = group.name
    for tp in plan.tp_processes:
        if tp.rank == 0:
            home[tp.stage] = tp.name
    for stage in plan.stages:
        if stage.name not in home:
            raise LaunchError(f"stage '{stage.name}' is in no process group of the plan")
        if not stage.factory:
            raise LaunchError(f"stage '{stage.name}' has no factory to build it from")
    preds: dict[str, list[str]] = {s.name: [] for s in plan.stages}
    succs: dict[str, list[tuple[str, bool, str]]] = {s.name: [] for s in plan.stages}
    for h in plan.handoffs:
        preds[h.target].append(h.source)
        succs[h.source].append((h.target, h.streaming, home[h.target]))
    order = [s.name for s in plan.stages]
    entry = tuple(plan.entry_stages) or tuple(s for s in order if not preds[s])
    cuda = device == "cuda"
    if cuda:
        needed = {g for s in plan.stages for g in s.gpus}
        count = torch.cuda.device_count()
        if needed and max(needed) >= count:
            raise LaunchError(f"the plan uses GPU {max(needed)} but only {count} CUDA "
                              "device(s) are visible")

    def spec(name: str, rank: int | None = None) -> worker.StageSpec:
        s = plan.stage(name)
        gpu = (s.gpus[rank or 0] if s.gpus else None) if cuda else None
        return worker.StageSpec(
            name=name, factory=s.factory, kwargs=tuple(s.factory_kwargs().items()),
            defaults=tuple(defaults.items()),
            predecessors=tuple(sorted(preds[name], key=order.index)) or (worker.CLIENT,),
            successors=tuple(succs[name]), device=f"cuda:{gpu}" if gpu is not None else "cpu",
        )

    procs: dict[str, _Proc] = {}
    for group in plan.groups:
        stages = tuple(s for s in order if s in group.stages)
        gpu = group.gpu if cuda else None
        fractions = [plan.stage(s).fraction for s in stages
                     if plan.stage(s).gpus and plan.stage(s).fraction is not None]
        wspec = worker.WorkerSpec(
            name=group.name, stages=tuple(spec(s) for s in stages), gpu=gpu,
            memory_fraction=round(sum(fractions), 6) if gpu is not None and fractions else None,
            shm_prefix=prefix,
        )
        procs[group.name] = _Proc(group.name, group.name, stages, gpu, wspec)
    backend = "nccl" if cuda else "gloo"
    for tp in plan.tp_processes:
        s = plan.stage(tp.stage)
        gpu = tp.gpu if cuda else None
        wspec = worker.WorkerSpec(
            name=tp.name, stages=(spec(tp.stage, tp.rank),), gpu=gpu,
            memory_fraction=s.fraction if gpu is not None else None, shm_prefix=prefix,
            tp=worker.TpSpec(tp.rank, s.tp_size, "", backend),
        )
        procs[tp.name] = _Proc(tp.name, f"tp:{tp.stage}", (tp.stage,), gpu, wspec)
    for unit_procs in _group_by_unit(procs):
        unit_procs.sort(key=lambda p: p.spec.tp.rank if p.spec.tp else 0)
    return procs, home, entry


def _group_by_unit(procs: dict[str, _Proc]) -> list[list[_Proc]]:
    units: dict[str, list[_Proc]] = {}
    for p in procs.values():
        units.setdefault(p.unit, []).append(p)
    return list(units.values())


def _replace_tp(spec: worker.WorkerSpec, init_method: str) -> worker.WorkerSpec:
    from dataclasses import replace

    return replace(spec, tp=replace(spec.tp, init_method=init_method))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _exit_text(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _stop_process(proc: _Proc, grace: float) -> None:
    process = proc.process
    if process is None:
        return
    process.join(grace)
    if process.is_alive():
        process.terminate()
        process.join(1.0)
    if process.is_alive():
        process.kill()
        process.join(1.0)


def _close_proc(proc: _Proc) -> None:
    if proc.conn is not None:
        proc.conn.close()
    if proc.process is not None:
        try:
            proc.process.close()
        except ValueError:
            pass  # still running only if kill failed; nothing more to do here
    proc.conn, proc.process = None, None


