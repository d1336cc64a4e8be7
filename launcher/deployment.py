"""Run a `Plan`: `launch(plan) -> Deployment`, a small facade over the supervisor.

One OS process per process group and per tensor-parallel rank (the `local` backend), each
building its stages in pipeline order; handoffs go straight from worker to worker; the
supervisor (`supervisor`) keeps the control plane. `Deployment` is what a caller uses: submit,
synthesize, health, metrics, retry_after, close.

Stop means stopped: `close()` returns only once every process the deployment started (workers,
and the fork server and resource tracker when it started them) has exited and every
shared-memory block it created is unlinked. Workers exit by themselves, unlinking their blocks,
when this process dies, even by SIGKILL; a later launch sweeps blocks whose owner is dead.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import secrets
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from planner import Plan

from launcher import logs
from launcher.wire import ipc
from launcher.control import metric_names, metrics
from launcher.control import preflight
from launcher.control.admission import Refusal, default_max_queued, registry_size
from launcher.audio import Audio
from launcher.wire.backend import Backend
from launcher.errors import LaunchError
from launcher.control.layout import layout, resolve_device
from launcher.backends import forkserver
from launcher.backends.local import LocalBackend
from launcher.control.request_table import SpeechRequest
from launcher.control.restart import RestartPolicy
from launcher.control.states import DeploymentState, ProcessState
from launcher.control.supervisor import Supervisor
from launcher.facade import DeploymentFacade

SHM_PREFIX = "stageplanner-"
# A payload up to this size crosses inside its message: cheaper than a shared block's lease and
# give-back below some tens of KiB (benchmarks/launcher_overhead.py --inline measures it).
INLINE_BYTES = 64 << 10

log = logging.getLogger(__name__)


class Deployment(DeploymentFacade):
    """A running plan. Create with `launch(...)`; always `close()` (or use it as a context
    manager)."""

    def __init__(self, plan: Plan, *, device: str, note: str | None, start_method: str,
                 startup_timeout: float, max_restarts: int, factory_defaults: Mapping[str, Any],
                 inline_bytes: int = INLINE_BYTES, backend: Callable[[], Backend] | None = None,
                 gpu_map: Mapping[int, int] | None = None, max_queued: int | None = None) -> None:
        self.plan, self.device, self.note = plan, device, note
        self.max_queued = max_queued if max_queued is not None else default_max_queued(plan)
        # Stage registries hold whatever admission lets in (`admission.registry_size`).
        factory_defaults = {"max_prepared": registry_size(self.max_queued), **factory_defaults}
        self.startup_timeout = startup_timeout
        self.shm_prefix = f"{SHM_PREFIX}{os.getpid()}-{secrets.token_hex(3)}-"
        if swept := ipc.sweep_orphans(SHM_PREFIX):  # of deployments killed before they cleaned up
            log.info("removed %d shared-memory blocks that dead deployments left behind", swept)
        self._close_lock = threading.Lock()
        self._closed = False
        self._backend = backend() if backend is not None else LocalBackend(
            start_method, forkserver.preload_for(s.factory for s in plan.stages))
        if not self._backend.shares_memory:
            inline_bytes = ipc.ALL_INLINE  # a replica elsewhere cannot lend shared memory
        try:
            planned = layout(plan, device, self.shm_prefix, factory_defaults, inline_bytes,
                             gpu_map, log_level=logs.worker_level())
        except LaunchError:
            self._backend.close()
            raise
        self._supervisor = Supervisor(planned, self._backend, RestartPolicy(max_restarts),
                                      [s.name for s in plan.stages], self.shm_prefix,
                                      self.max_queued, plan.sample_rate)
        self.failed = self._supervisor.failed  # set when the deployment gave up (restart limit)

    def _start(self) -> None:
        sup = self._supervisor
        sup.start()
        if not sup.ready.wait(self.startup_timeout):
            waiting = [f"{p.describe()}: building {p.building or 'nothing yet'}"
                       for p in sup.snapshot().processes if p.state != "ready"]
            self.close()
            raise LaunchError(f"startup timed out after {self.startup_timeout:g} s; not ready: "
                              + "; ".join(waiting))
        if sup.startup_failure is not None:
            self.close()
            raise LaunchError(sup.startup_failure)
        log.info("%s is running: %s (%s)", self.plan.model, self.summary(),
                 ", ".join(f"{name} pid {pid}" for name, pid in self.worker_pids().items()))

    # -- requests --------------------------------------------------------------------------------
    def submit(self, text: str, voice: str | None = None, stream: bool = False,
               options: Mapping[str, Any] | None = None) -> SpeechRequest:
        """Start synthesising `text`. Raises `Unavailable` when the deployment cannot take it.
        `options`: more fields of the entry stages' payload (e.g. `speed`)."""
        return self._supervisor.submit(text, voice, stream, options)

    def synthesize(self, text: str, voice: str | None = None,
                   timeout: float | None = 120.0) -> Audio:
        return self.submit(text, voice).result(timeout)

    # -- state -----------------------------------------------------------------------------------
    @property
    def state(self) -> DeploymentState:
        return self._supervisor.state

    @property
    def in_flight(self) -> int:
        return self._supervisor.snapshot().in_flight

    def refusal(self) -> Refusal | None:
        """Why a request submitted now would be refused, or None when it would be taken: what a
        router asks before choosing this deployment."""
        return self._supervisor.refusal_reason()

    def health(self) -> dict[str, Any]:
        snap = self._supervisor.snapshot()
        # A process that died a moment ago is not ready, though the supervisor has not noticed
        # yet (up to its poll interval): /health says so at once.
        states = {p.name: ProcessState.EXITED if p.state == ProcessState.READY
                  and not self._backend.alive(p.name) else p.state for p in snap.processes}
        state = snap.state
        helpers = self._backend.helpers()
        if state == DeploymentState.RUNNING and (
                any(s != ProcessState.READY for s in states.values())
                or any(h.get("state") != "ok" for h in helpers.values())):
            state = DeploymentState.DEGRADED
        return {
            "status": "ok" if state == DeploymentState.RUNNING else state,
            "model": self.plan.model,
            "variant": self.plan.variant,
            "device": self.device,
            "note": self.note,
            "error": snap.failure,
            "in_flight": snap.in_flight,
            "processes": [
                {
                    "name": p.name,  # a copy's own name: `vocoder.1`
                    "group": p.group,
                    "pid": p.pid,
                    "state": states[p.name],
                    "stages": list(p.stages),
                    "gpu": p.gpu,
                    "memory_fraction": p.memory_fraction,
                    "restarts": p.restarts,
                    "death": p.death,  # how it last died, as the supervisor saw it
                    # requests bound to it and not finished, and ever (a TP rank: not counted)
                    **({"in_flight": p.in_flight, "served": p.served}
                       if p.served is not None else {}),
                    **self._backend.where(p.name),
                }
                for p in snap.processes
            ],
            **({"helpers": helpers} if helpers else {}),
        }

    def retry_after(self) -> int:
        """Whole seconds a client refused with 503 should wait before trying again: until the
        next scheduled restart (the backoff), plus one for the new worker to build its stages."""
        return 1 + math.ceil(self._supervisor.restart_wait_s())

    def metrics_text(self) -> str:
        """Prometheus text exposition (see `metric_names`)."""
        return self.metrics()[0]

    def metrics(self, accept: str | None = None) -> tuple[str, str]:
        """(exposition, content type) in the format an HTTP Accept header asks for."""
        return metrics.render(self.sample(), accept)

    def sample(self) -> metrics.Sample:
        """The numbers /metrics shows, taken now."""
        sup = self._supervisor
        counts, snap = sup.tallies(), sup.snapshot()
        return metrics.Sample(
            model=self.plan.model, stage_latency=counts.stage_latency,
            request_latency=counts.request_latency, outcomes=counts.outcomes,
            refusals=counts.refusals, in_flight=snap.in_flight,
            stage_core_wait_s=counts.stage_core_wait_s, stage_failures=counts.stage_failures,
            processes=tuple(metrics.ProcessSample(
                p.name, p.pid, p.gpu, p.restarts, dict(p.depths), p.shm, p.cuda_allocated,
                p.reports, p.in_flight, p.served)
                for p in snap.processes),
        )

    def settled_sample(self, timeout_s: float = 5.0) -> metrics.Sample:
        """`sample`, once every stage timing the workers recorded before the call is in it (it
        waits on their timing reports: `metric_names.settled`), or after `timeout_s` (a worker
        that stopped reporting is not waited for longer)."""
        def read() -> tuple[metrics.Sample, dict[str, int]]:
            sample = self.sample()
            return sample, {p.name: p.reports for p in sample.processes}

        return metric_names.settled(read, timeout_s)

    def worker_pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in self._supervisor.snapshot().processes if p.pid is not None}

    def summary(self) -> str:
        n = self.plan.process_count()
        return f"{n} process{'es' if n != 1 else ''}"

    # -- stop ------------------------------------------------------------------------------------
    def close(self, drain_timeout: float = 0.0) -> None:
        """Stop everything. With `drain_timeout`, first let in-flight requests finish (that long,
        no new ones are taken); whatever is still in flight then fails with `Unavailable` (503).
        Returns once every process it started has exited. Safe to call from any thread, twice."""
        with self._close_lock:
            if self._closed:
                return
            self._supervisor.shut_down(drain_timeout)
            self._backend.close()
            ipc.sweep(self.shm_prefix)
            self._supervisor.stopped()
            self._closed = True
        log.info("%s stopped", self.plan.model)

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch(plan: Plan, device: str = "auto", *, startup_timeout: float = 120.0,
           max_restarts: int = 3, start_method: str = "forkserver",
           factory_defaults: Mapping[str, Any] | None = None,
           inline_bytes: int = INLINE_BYTES, backend: Callable[[], Backend] | None = None,
           gpu_map: Mapping[int, int] | None = None,
           max_queued: int | None = None) -> Deployment:
    """Start every process of `plan` and return once all stages are built.

    `device`: auto (CUDA when present, else CPU, with `Deployment.note` saying so), cpu or cuda.
    `factory_defaults`: keyword arguments offered to every factory whose signature names them
    (the plan's own `args` win); tests use `{"size": "tiny"}` to shrink the stand-ins.
    `inline_bytes`: a handoff whose tensors take at most this many bytes travels inside its
    message; larger ones go through shared memory (0: always shared memory).
    `backend`: makes the backend that runs the processes (default: `LocalBackend`, this
    machine); `gpu_map`: the CUDA device of each logical GPU (see `layout.layout`).
    `max_queued`: requests in flight beyond which a new one is refused with 429 (`admission`;
    default: `admission.default_max_queued(plan)`).
    Raises `LaunchError`, after stopping whatever had started, when any stage fails to build.
    """
    if start_method not in ("forkserver", "spawn"):
        raise LaunchError("start_method must be forkserver or spawn: plain fork is unsafe with "
                          "torch")
    try:
        preflight.check(plan)
    except preflight.SetupError as exc:
        raise LaunchError(str(exc)) from None
    if device == "auto" and not any(s.gpus for s in plan.stages):
        resolved, note = "cpu", None  # nothing to place on a GPU: no need to load torch to look
    else:
        resolved, note = resolve_device(device)
    deployment = Deployment(plan, device=resolved, note=note, start_method=start_method,
                            startup_timeout=startup_timeout, max_restarts=max_restarts,
                            factory_defaults=factory_defaults or {}, inline_bytes=inline_bytes,
                            backend=backend, gpu_map=gpu_map, max_queued=max_queued)
    _LIVE.add(deployment)
    deployment._start()
    return deployment


# Deployments still open at interpreter exit are closed, so a forgotten close() leaves nothing.
_LIVE: weakref.WeakSet[Deployment] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for deployment in list(_LIVE):
        deployment.close()
