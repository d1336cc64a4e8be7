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
- A stage that raised fails its request (`StageFailed`, HTTP 500) with the worker's traceback
  attached; the failure is logged here naming the stage, the request and the process, and
  counted per stage and process on /metrics. A request that had ended already (cancelled: its
  client went away) is not an error.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.audio import SAMPLE_RATE
from launcher.wire import ipc
from launcher.control.outputs import terminal_output
from launcher.control.admission import Refusal, Refusals
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
from launcher.control.request_table import Closed, Outcome, RequestTable, SpeechRequest
from launcher.control.restart import RestartPolicy
from launcher.control.states import DeploymentState, ProcessState
from launcher.wire.specs import CLIENT

POLL_S = 0.1

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessView:
    """One worker process as the supervisor sees it at one moment (a copy: safe to keep)."""

    name: str  # a copy's name for a group run in several copies (`vocoder.1`)
    group: str  # the process group it runs (a copy's group; a TP rank's unit)
    pid: int | None  # None unless it is starting or ready
    state: ProcessState
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

    state: DeploymentState
    failure: str | None
    in_flight: int
    processes: tuple[ProcessView, ...]


@dataclass(frozen=True)
class Tallies:
    """What /metrics counts, copied under the supervisor's lock."""

    stage_latency: dict[str, Histogram]
    request_latency: Histogram
    outcomes: dict[str, int]
    refusals: dict[Refusal, int]
    stage_core_wait_s: dict[str, float]  # seconds each stage's thread waited for a core
    stage_failures: dict[tuple[str, str], int]  # (stage, process) -> requests it failed


class Supervisor:
    def __init__(self, layout: Layout, backend: Backend, policy: RestartPolicy, stages: list[str],
                 shm_prefix: str, max_queued: int, sample_rate: int = SAMPLE_RATE) -> None:
        self.layout, self.backend, self.policy = layout, backend, policy
        self.sample_rate = sample_rate  # the plan's: each handle's audio is at this rate
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
        # Every stage in every process that runs it, from zero: a rate over them is defined.
        self.stage_failures = {(s.name, p.name): 0 for p in self.procs.values()
                               for s in p.spec.stages}
        self.state = DeploymentState.STARTING
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
            p.state, p.pid, p.started = ProcessState.STARTING, pid, False
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
            log.critical("%s; the deployment stops", reason, exc_info=exc)
            with self.lock:
                self.state, self.failure = DeploymentState.FAILED, reason
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
                if self.state in (DeploymentState.RUNNING, DeploymentState.DRAINING):
                    log.info("restarting '%s' (its backoff is over)", unit)
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
                           self.refusals.snapshot(), dict(self.stage_core_wait_s),
                           dict(self.stage_failures))

    def refusal_reason(self) -> Refusal | None:
        """Why a request submitted now would be refused, or None."""
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
            if self.state in (DeploymentState.RUNNING, DeploymentState.STARTING):
                self.state = DeploymentState.DRAINING
        deadline = time.monotonic() + drain_timeout
        while drain_timeout and len(self.table) and time.monotonic() < deadline:
            time.sleep(0.02)
        with self.lock:
            if self.state != DeploymentState.FAILED:
                self.state = DeploymentState.STOPPING
        for request_id in self.table.pending():
            self.finish(request_id, Unavailable("deployment is shutting down"))
        self.stop()

    def stopped(self) -> None:
        with self.lock:
            if self.state != DeploymentState.FAILED:
                self.state = DeploymentState.STOPPED

    # -- requests --------------------------------------------------------------------------------
    def submit(self, text: str, voice: str | None, stream: bool,
               options: Mapping[str, Any] | None = None) -> SpeechRequest:
        with self.lock:
            self._admit()
            request_id = next(self._ids)
            try:
                route = self.chooser.bind(request_id, self._up)
            except NoCopyUp as exc:  # only when a copy died since `_admit` looked
                self.refusals.count(Refusal.RESTARTING)
                raise Unavailable(f"{exc}; retry shortly") from None
            copy = dict(route)
            targets = [self.procs[copy.get(g, g)]
                       for g in (self.layout.home[s] for s in self.layout.entry)]
            handle = SpeechRequest(request_id, stream, self.finish, self.sample_rate)
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
        return self.procs[process].state == ProcessState.READY and self.backend.alive(process)

    def refusal(self) -> tuple[Refusal, RequestFailed] | None:
        """Why a new request would be refused now (reason, error), or None. A request needs all
        its stages: every process must be up (`_up`), or, for a group run in several copies,
        one of its copies."""
        if self.state != DeploymentState.RUNNING:
            why = f": {self.failure}" if self.failure else ""
            return Refusal.NOT_RUNNING, Unavailable(f"deployment is {self.state}{why}")
        for names in self._needed:
            if any(self._up(c) for c in names):
                continue
            p = self.procs[names[0]]
            if len(names) > 1:
                return Refusal.RESTARTING, Unavailable(
                    f"every copy of process group '{self._group[p.name]}' is down "
                    f"({p.describe()} {self._down(p)}, ...)")
            return Refusal.RESTARTING, Unavailable(f"{p.describe()} {self._down(p)}")
        if len(self.table) >= self.max_queued:
            return Refusal.QUEUE_FULL, Overloaded(
                f"the deployment holds {len(self.table)} requests, its limit (--max-queued "
                f"{self.max_queued}); retry shortly")
        return None

    @staticmethod
    def _down(p: Proc) -> str:
        return f"is {p.state}" if p.state != ProcessState.READY else "has just died"

    def _admit(self) -> None:
        """Raise (and count) the refusal of a new request, if it is refused."""
        refused = self.refusal()
        if refused is not None:
            self.refusals.count(refused[0])
            raise refused[1]

    def finish(self, request_id: int, error: RequestFailed, outcome: Outcome = "error") -> None:
        """Fail or cancel a request: its caller gets `error`, and every process drops it (its
        holders, and any that has it but is not on record yet: bookkeeping may lag)."""
        closed = self._close(request_id, outcome)
        if closed is None:
            return
        for p in self.procs.values():
            if p.running:
                self.backend.send(p.name, Cancel(request_id))
        closed.handle._fail(error)

    def _close(self, request_id: int, outcome: Outcome) -> Closed | None:
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
        try:
            audio, words = terminal_output(data, msg.stage, msg.packed.segment is not None)
        except StageFailed as exc:
            self.finish(msg.request_id, exc)
            return
        handle._chunk(audio, words)
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
            case StageError():
                self._stage_failed(proc, msg)
            case Undeliverable(request_id, source, process, _):
                dest = self.procs[process]
                if dest.state == ProcessState.READY and not self._up(process) \
                        and self.table.hold_for_exit(request_id, process):
                    # It died a moment ago: its exit, read next on this thread, fails the
                    # request saying how it ended (killed, crashed) rather than "not reachable".
                    return
                if dest.state == ProcessState.READY:
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
                    proc.state, proc.building = ProcessState.READY, None
                    if self.state == DeploymentState.STARTING and all(
                            p.state == ProcessState.READY for p in self.procs.values()):
                        self.state = DeploymentState.RUNNING
                        self.ready.set()
                log.debug("%s is ready", proc.describe())
            case _:
                raise TypeError(f"unexpected message from {proc.describe()}: {msg!r}")

    def _stage_failed(self, proc: Proc, msg: StageError) -> None:
        """A stage raised on a request (or could not take it in): named and counted here, the
        request failed with the worker's traceback."""
        where = (f"stage '{msg.stage}' in process '{proc.name}' (pid {proc.pid}) failed request "
                 f"{msg.request_id}: {msg.message}")
        if self.table.get(msg.request_id) is None:
            log.debug("%s (it had ended: cancelled, or failed elsewhere)", where)
            return
        with self.lock:
            key = (msg.stage, proc.name)
            self.stage_failures[key] = self.stage_failures.get(key, 0) + 1
        if not msg.traceback:
            log.error("%s", where)
        elif self.backend.shares_stderr:
            log.error("%s (its traceback is in the worker's log)", where)
        else:  # the worker's log is on its own node: the traceback is shown here
            log.error("%s\n%s", where, msg.traceback)
        self.finish(msg.request_id, StageFailed(
            f"stage '{msg.stage}' in process '{proc.name}' failed: {msg.message}",
            worker_traceback=msg.traceback))

    # -- deaths ----------------------------------------------------------------------------------
    def _on_exit(self, proc: Proc, exitcode: int | None) -> None:
        how = exit_text(exitcode)
        with self.lock:
            if self.state.over:
                return
            if self.state == DeploymentState.STARTING:
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
                p.state = ProcessState.RESTARTING if delay is not None else ProcessState.FAILED
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
        log.info("%s%s", reason, suffix)  # `planner serve` prints it on its console too
        for request_id in held:
            self.finish(request_id, WorkerDied(f"{reason} while handling this request{suffix}"))
        if delay is None:
            self.give_up(f"{reason}; {self.policy.limit_text()}")

    def give_up(self, reason: str) -> None:
        log.error("the deployment gives up: %s", reason)
        with self.lock:
            self.state, self.failure = DeploymentState.FAILED, reason
        for request_id in self.table.pending():
            self.finish(request_id, Unavailable(f"deployment failed: {reason}"))
        self.backend.stop(list(self.procs), grace=0.0)
        self._receiver.forget("")
        self.failed.set()

