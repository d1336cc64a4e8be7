"""The control plane: starts the units, takes requests in and results out, knows who holds what,
notices deaths and restarts. Payloads between workers never pass through here (see `stages`).

- Ready only when every process has built all its stages; a failure names the process, the
  stage and the factory's error. A process that exits before it starts building points at the
  usual cause: a launching script without an `if __name__ == "__main__":` guard.
- A dead process is noticed within `POLL_S` (0.1 s). The requests it held (`RequestTable`) fail
  with `WorkerDied` (HTTP 503) naming the process and its stages; its peers are told
  (`PeerGone`: they reclaim what they lent it and unmap its blocks); the backend unlinks its
  blocks; its unit is restarted as `RestartPolicy` says, or the deployment gives up.
- A cancelled or failed request is cancelled in every process (`Cancel`): the ones that hold
  it drop it, the others will if it reaches them.
- A group run in several copies: each request is bound at admission to one copy of it
  (`copies.CopyChooser`: least in flight, skipping copies that are down) and its `Deliver`s
  carry that route. Each copy is a unit of its own: its death fails the requests it held, and
  those bound to it that reach it before it is back; the other copies keep serving, and a
  request is refused only while every copy of some group is down.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from launcher.wire import ipc
from launcher.control.admission import Refusals
from launcher.control.copies import CopyChooser, NoCopyUp
from launcher.wire.backend import Backend, Exited, Received, Unit
from launcher.errors import Overloaded, RequestFailed, StageFailed, Unavailable, WorkerDied
from launcher.control.layout import Layout
from launcher.control.metrics import Histogram
from launcher.control.procs import Proc, exit_text, startup_failure
from launcher.wire.protocol import (
    BuildError, Building, Cancel, Deliver, Free, HandedOver, PassedOn, PeerGone, Ready, Released,
    Result, StageError, Started, Stats, Undeliverable,
)
from launcher.control.request_table import Closed, RequestTable, SpeechRequest
from launcher.control.restart import RestartPolicy
from launcher.wire.specs import CLIENT

POLL_S = 0.1


@dataclass(frozen=True)
class ProcessView:
    """One worker process as the supervisor sees it at one moment (a copy: safe to keep)."""

    name: str  # a copy's name for a group run in several copies (`vocoder.1`)
    group: str  # the process group it runs (a copy's group; a TP rank's unit)
    pid: int | None  # None unless it is starting or ready
    state: str  # starting | ready | restarting | failed | stopped
    stages: tuple[str, ...]
    gpu: int | None
    memory_fraction: float | None
    restarts: int
    reports: int  # timing reports received (see `Proc.reports`)
    death: str | None  # how its last incarnation ended
    building: str | None
    depths: Mapping[str, int]
    shm: ipc.PoolUsage
    cuda_allocated: int | None
    in_flight: int | None  # requests bound to it, not finished (None: a TP rank, every request)
    served: int | None  # requests ever bound to it (None: a TP rank)

    def describe(self) -> str:
        return f"process '{self.name}' (pid {self.pid}, stages: {', '.join(self.stages)})"


@dataclass(frozen=True)
class Snapshot:
    """What the deployment reports (/health, /metrics), taken under the supervisor's lock: the
    supervisor owns its state, and everyone else reads it through this."""

    state: str  # starting | running | draining | stopping | stopped | failed
    failure: str | None
    in_flight: int
    processes: tuple[ProcessView, ...]


@dataclass(frozen=True)
class Tallies:
    """What /metrics counts, copied under the supervisor's lock."""

    stage_latency: dict[str, Histogram]
    request_latency: Histogram
    outcomes: dict[str, int]
    refusals: dict[str, int]  # by `admission.REASONS`
    stage_core_wait_s: dict[str, float]  # seconds each stage's thread waited for a core


class Supervisor:
    def __init__(self, layout: Layout, backend: Backend, policy: RestartPolicy, stages: list[str],
                 shm_prefix: str, max_queued: int) -> None:
        self.layout, self.backend, self.policy = layout, backend, policy
        self.shm_prefix = shm_prefix
        self.max_queued = max_queued  # admission control (`admission`)
        self.refusals = Refusals()
        self.lock = threading.RLock()
        self.units: dict[str, Unit] = {u.name: u for u in layout.units}
        self.procs = {w.name: Proc(w, u.name) for u in layout.units for w in u.workers}
        self.table = RequestTable()
        self.chooser = CopyChooser(layout.copies)
        self._group = {c: g for g, names in layout.copies.items() for c in names}
        # What a request needs up: one copy of each group, and every other process (TP ranks).
        self._needed = tuple(layout.copies.values()) + tuple(
            (name,) for name in self.procs if name not in self._group)
        self.stage_latency = {s: Histogram() for s in stages}
        self.stage_core_wait_s = {s: 0.0 for s in stages}
        self.request_latency = Histogram()
        self.state = "starting"  # starting | running | draining | stopping | stopped | failed
        self.failure: str | None = None  # why it gave up
        self.startup_failure: str | None = None
        self.ready, self.failed = threading.Event(), threading.Event()
        self._ids = itertools.count(1)
        self._receiver = ipc.Receiver(self._give_back)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supervisor", daemon=True)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        for unit in self.units.values():
            self._start_unit(unit)
        self._thread.start()

    def _start_unit(self, unit: Unit) -> None:
        for name, pid in self.backend.start(unit).items():
            p = self.procs[name]
            p.state, p.pid, p.started = "starting", pid, False
            p.building, p.build_error = None, None
            p.depths, p.cuda_allocated, p.shm = {}, None, ipc.PoolUsage()

    def stop(self) -> None:
        """End the loop (the caller then closes the backend)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._receiver.close()

    def _loop(self) -> None:
        """The supervisor's thread. Should it ever die of a bug, the deployment fails with the
        reason (so /health says so and `serve` exits non-zero) instead of serving nothing."""
        try:
            self._watch()
        except BaseException as exc:  # noqa: BLE001 - reported, then the deployment stops
            reason = f"the supervisor thread died: {type(exc).__name__}: {exc}"
            with self.lock:
                self.state, self.failure = "failed", reason
            try:
                self.give_up(reason)
            finally:
                self.failed.set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            for event in self.backend.events(POLL_S):
                match event:
                    case Received(process, pid, message) if self.procs[process].pid == pid:
                        self._on_message(self.procs[process], message)
                    case Exited(process, pid, exitcode) if self.procs[process].pid == pid:
                        self._on_exit(self.procs[process], exitcode)
            for unit in self.policy.due():
                if self.state in ("running", "draining"):
                    self._start_unit(self.units[unit])

    # -- what the deployment asks -----------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            bound, served = self.chooser.in_flight(), self.chooser.served()
            return Snapshot(self.state, self.failure, len(self.table), tuple(
                ProcessView(p.name, self._group.get(p.name, p.unit), p.pid if p.running else None,
                            p.state, tuple(s.name for s in p.spec.stages), p.spec.gpu,
                            p.spec.memory_fraction, p.restarts, p.reports, p.death, p.building,
                            dict(p.depths), p.shm, p.cuda_allocated, bound.get(p.name),
                            served.get(p.name))
                for p in self.procs.values()))

    def tallies(self) -> Tallies:
        with self.lock:
            return Tallies({s: h.copy() for s, h in self.stage_latency.items()},
                           self.request_latency.copy(), dict(self.table.outcomes),
                           self.refusals.snapshot(), dict(self.stage_core_wait_s))

    def refusal_reason(self) -> str | None:
        """Why a request submitted now would be refused (an `admission.REASONS` entry), or None."""
        with self.lock:
            refused = self.refusal()
        return refused[0] if refused is not None else None

    def restart_wait_s(self) -> float:
        """Seconds until the next scheduled restart (0 when none is due)."""
        with self.lock:
            return self.policy.wait_s()

    def shut_down(self, drain_timeout: float = 0.0) -> None:
        """Take no new request; let those in flight finish for up to `drain_timeout` s; fail the
        rest with `Unavailable` (503); end the loop. The caller then closes the backend and
        calls `stopped`."""
        with self.lock:
            if self.state in ("running", "starting"):
                self.state = "draining"
        deadline = time.monotonic() + drain_timeout
        while drain_timeout and len(self.table) and time.monotonic() < deadline:
            time.sleep(0.02)
        with self.lock:
            if self.state != "failed":
                self.state = "stopping"
        for request_id in self.table.pending():
            self.finish(request_id, Unavailable("deployment is shutting down"))
        self.stop()

    def stopped(self) -> None:
        with self.lock:
            if self.state != "failed":
                self.state = "stopped"

    # -- requests --------------------------------------------------------------------------------
    def submit(self, text: str, voice: str | None, stream: bool,
               options: Mapping[str, Any] | None = None) -> SpeechRequest:
        with self.lock:
            self._admit()
            request_id = next(self._ids)
            try:
                route = self.chooser.bind(request_id, self._up)
            except NoCopyUp as exc:  # only when a copy died since `_admit` looked
                self.refusals.count("restarting")
                raise Unavailable(f"{exc}; retry shortly") from None
            copy = dict(route)
            targets = [self.procs[copy.get(g, g)]
                       for g in (self.layout.home[s] for s in self.layout.entry)]
            handle = SpeechRequest(request_id, stream, self.finish)
            handle.copies = copy
            self.table.open(handle, {p.name for p in targets})
        # `stream` tells the stages which audio is asked for: a whole response needs no chunks.
        payload = ipc.Packed(None, (), {"text": text, "voice": voice, **(options or {}),
                                        "stream": stream})
        for stage, p in zip(self.layout.entry, targets):
            if not self.backend.send(p.name, Deliver(stage, handle.id, CLIENT, None, True,
                                                     payload, route)):
                self.finish(handle.id, WorkerDied(f"{p.describe()} is not reachable"))
        return handle

    def _up(self, process: str) -> bool:
        """Ready and alive: one that died a moment ago (not yet noticed: up to `POLL_S`) would
        only fail the request."""
        alive = getattr(self.backend, "alive", None)
        return self.procs[process].state == "ready" and (alive is None or alive(process))

    def refusal(self) -> tuple[str, RequestFailed] | None:
        """Why a new request would be refused now (reason, error), or None. A request needs all
        its stages: every process must be up (`_up`), or, for a group run in several copies,
        one of its copies."""
        if self.state != "running":
            why = f": {self.failure}" if self.failure else ""
            return "not_running", Unavailable(f"deployment is {self.state}{why}")
        for names in self._needed:
            if any(self._up(c) for c in names):
                continue
            p = self.procs[names[0]]
            if len(names) > 1:
                return "restarting", Unavailable(
                    f"every copy of process group '{self._group[p.name]}' is down "
                    f"({p.describe()} {self._down(p)}, ...)")
            return "restarting", Unavailable(f"{p.describe()} {self._down(p)}")
        if len(self.table) >= self.max_queued:
            return "queue_full", Overloaded(
                f"the deployment holds {len(self.table)} requests, its limit (--max-queued "
                f"{self.max_queued}); retry shortly")
        return None

    @staticmethod
    def _down(p: Proc) -> str:
        return f"is {p.state}" if p.state != "ready" else "has just died"

    def _admit(self) -> None:
        """Raise (and count) the refusal of a new request, if it is refused."""
        refused = self.refusal()
        if refused is not None:
            self.refusals.count(refused[0])
            raise refused[1]

    def finish(self, request_id: int, error: RequestFailed, outcome: str = "error") -> None:
        """Fail or cancel a request: its caller gets `error`, and every process drops it (its
        holders, and any that has it but is not on record yet: bookkeeping may lag)."""
        closed = self._close(request_id, outcome)
        if closed is None:
            return
        for p in self.procs.values():
            if p.running:
                self.backend.send(p.name, Cancel(request_id))
        closed.handle._fail(error)

    def _close(self, request_id: int, outcome: str) -> Closed | None:
        """Take the request out of flight: out of the table, and off the copies it was bound
        to."""
        closed = self.table.close(request_id, outcome)
        self.chooser.release(request_id)
        return closed

    def _result(self, proc: Proc, msg: Result) -> None:
        handle = self.table.get(msg.request_id)
        if handle is None:  # cancelled meanwhile: stop its stream there too
            if msg.packed.segment is not None:
                self._give_back(msg.packed.segment, msg.packed.lease)
            if not msg.last:
                self.backend.send(proc.name, Cancel(msg.request_id))
            return
        try:
            data = self._receiver.unpack(msg.packed)
        except OSError as exc:
            self.finish(msg.request_id, StageFailed(
                f"cannot read the output of stage '{msg.stage}' in process '{proc.name}': {exc}"))
            return
        audio = _own_samples(data.pop("audio", None), msg.packed.segment is not None)
        if audio is None:
            self.finish(msg.request_id, StageFailed(
                f"terminal stage '{msg.stage}' returned no 'audio' tensor (keys: {sorted(data)})"))
            return
        handle._chunk(audio)
        del audio, data
        if msg.last:
            closed = self._close(msg.request_id, "ok")
            if closed is not None:
                with self.lock:
                    self.request_latency.observe(closed.seconds)
                handle._end()

    def _give_back(self, segment: str, lease: int) -> None:
        """A lease the supervisor read (a terminal stage's output) goes back to its owner."""
        pid = ipc.owner_pid(segment)
        owner = next((p for p in self.procs.values() if p.pid == pid and p.running), None)
        if owner is not None:
            self.backend.send(owner.name, Free(segment, lease))

    # -- messages --------------------------------------------------------------------------------
    def _on_message(self, proc: Proc, msg: object) -> None:
        match msg:
            case Result():
                self._result(proc, msg)
            case HandedOver(request_id, process, pid) | PassedOn(request_id, process, pid):
                target = self.procs[process]
                if not (target.pid == pid and target.running):
                    self.finish(request_id, WorkerDied(
                        f"{target.death or target.describe() + ' died'} while handling this "
                        "request"))
                elif type(msg) is PassedOn:
                    self.table.passed(request_id, proc.name, process)
                else:
                    self.table.handed(request_id, process)  # False: it ended meanwhile
            case Released(request_id):
                self.table.released(request_id, proc.name)
            case StageError(request_id, stage, message):
                self.finish(request_id, StageFailed(
                    f"stage '{stage}' in process '{proc.name}' failed: {message}"))
            case Undeliverable(request_id, source, process, _):
                dest = self.procs[process]
                if dest.state == "ready" and not self._up(process) \
                        and self.table.hold_for_exit(request_id, process):
                    # It died a moment ago: its exit, read next on this thread, fails the
                    # request saying how it ended (killed, crashed) rather than "not reachable".
                    return
                if dest.state == "ready":
                    why = f"{dest.describe()} is not reachable"
                elif dest.death is not None:
                    # Its exit was read first (it held nothing then): say how it ended.
                    why = f"{dest.death}; it is {dest.state}"
                else:
                    why = f"{dest.describe()} is {dest.state}"
                self.finish(request_id, WorkerDied(f"{why}; cannot hand over from '{source}'"))
            case Stats(latencies, depths, cuda_allocated, shm, core_wait_s):
                with self.lock:
                    for stage, values in latencies.items():
                        self.stage_latency[stage].observe_all(values)
                    for stage, seconds in core_wait_s.items():
                        self.stage_core_wait_s[stage] += seconds
                    proc.depths, proc.cuda_allocated, proc.shm = dict(depths), cuda_allocated, shm
                    proc.reports += 1
            case Started():
                proc.started = True
            case Building(what):
                proc.building = what
            case BuildError():
                proc.build_error = msg
            case Ready():
                with self.lock:
                    proc.state, proc.building = "ready", None
                    if self.state == "starting" and all(
                            p.state == "ready" for p in self.procs.values()):
                        self.state = "running"
                        self.ready.set()
            case _:
                raise TypeError(f"unexpected message from {proc.describe()}: {msg!r}")

    # -- deaths ----------------------------------------------------------------------------------
    def _on_exit(self, proc: Proc, exitcode: int | None) -> None:
        how = exit_text(exitcode)
        with self.lock:
            if self.state in ("stopping", "stopped", "failed"):
                return
            if self.state == "starting":
                self.startup_failure = startup_failure(proc, exitcode, how)
                self.ready.set()
                return
            victims = [self.procs[w.name] for w in self.units[proc.unit].workers]
            reason = f"{proc.describe()} {how}"
            if proc.build_error is not None:
                reason += f" (rebuilding '{proc.build_error.stage}' failed: " \
                          f"{proc.build_error.summary})"
            delay = self.policy.died(proc.unit)
            for p in victims:
                p.state = "restarting" if delay is not None else "failed"
                p.death = reason if p is proc else f"{p.describe()} was stopped with {proc.name}"
                if delay is not None:
                    p.restarts += 1
            held = self.table.held_by(p.name for p in victims)
        self.backend.stop([p.name for p in victims if p is not proc], grace=0.0)
        survivors = [p for p in self.procs.values() if p.running]
        for p in victims:
            self._receiver.forget(ipc.owner_prefix(self.shm_prefix, p.name, p.pid))
            for q in survivors:
                self.backend.send(q.name, PeerGone(p.name, p.pid))
        suffix = ("; restarting it" if delay is not None
                  else "; restart limit reached, shutting the deployment down")
        for request_id in held:
            self.finish(request_id, WorkerDied(f"{reason} while handling this request{suffix}"))
        if delay is None:
            self.give_up(f"{reason}; {self.policy.limit_text()}")

    def give_up(self, reason: str) -> None:
        with self.lock:
            self.state, self.failure = "failed", reason
        for request_id in self.table.pending():
            self.finish(request_id, Unavailable(f"deployment failed: {reason}"))
        self.backend.stop(list(self.procs), grace=0.0)
        self._receiver.forget("")
        self.failed.set()


def _own_samples(audio: Any, shared: bool) -> Any:
    """The terminal stage's audio as 1-D float32 samples the client may keep, of the kind it came
    as (a numpy array, or a torch tensor); None when it is neither.

    A view of a shared block would pin the worker's block for as long as the client keeps it:
    copied. A payload that came inside its message already is this process's own copy (at most
    `inline_bytes` of it stays pinned): float32 audio of it is used as it is. Every torch call
    here also lets the client threads take the GIL, so the fewer the better.
    """
    if isinstance(audio, np.ndarray):
        if audio.ndim != 1:
            audio = audio.reshape(-1)
        if shared or audio.dtype != np.float32:
            audio = audio.astype(np.float32, copy=True)
        return audio
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(audio, torch.Tensor):
        return None
    if audio.dim() != 1:
        audio = audio.reshape(-1)
    if shared or audio.dtype != torch.float32:
        audio = audio.to(torch.float32, copy=True)
    return audio
