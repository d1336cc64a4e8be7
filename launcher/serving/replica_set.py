"""Replicas of one plan behind one front door: `launch_replicas(plan, packing, ...)`.

Each replica is a `Deployment` of its own (its supervisor, its processes, its restarts) on the
node and GPUs the planner packed it onto; `ReplicaSet` has the `Deployment` facade, so the HTTP
server and `serve` take either. A request goes to the replica with the fewest requests in flight
(ties: the one that took a request longest ago) among those that would take it now: every
process ready (a replica with a process restarting, or with one dead whose death is not noticed
yet, gets nothing while another is healthy) and below its admission bound. When none would, the
least busy of the rest refuses it (429 when all are full, 503 otherwise), and the refusal is
counted on that replica's /metrics. The set fails only when every replica failed; until then
/health says "degraded".
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from planner import Cluster, Packing, Plan

from launcher.control import metrics
from launcher.audio import Audio
from launcher.control.admission import Refusal
from launcher.control.states import DeploymentState
from launcher.deployment import Deployment, launch
from launcher.errors import LaunchError, Unavailable
from launcher.control.request_table import SpeechRequest
from launcher.facade import DeploymentFacade

BackendName = Literal["local", "ray"]
# Best first: would take it; only full; a process restarting; not running at all.
_PREFERENCE = {None: 0, Refusal.QUEUE_FULL: 1, Refusal.RESTARTING: 2, Refusal.NOT_RUNNING: 3}

log = logging.getLogger(__name__)


class _AllFailed:
    """`Deployment.failed` for a set: set once every replica gave up."""

    def __init__(self, replicas: list[Deployment]) -> None:
        self._replicas = replicas

    def is_set(self) -> bool:
        return all(d.failed.is_set() for d in self._replicas)


class ReplicaSet(DeploymentFacade):
    def __init__(self, plan: Plan, replicas: list[Deployment], nodes: list[str],
                 backend: BackendName, on_close: Any = None) -> None:
        self.plan, self.replicas, self.nodes, self.backend = plan, replicas, nodes, backend
        self.device = replicas[0].device
        self.note = replicas[0].note
        self.failed = _AllFailed(replicas)
        self._turn = itertools.count(1)  # 0: never given a request
        self._last = [0] * len(replicas)
        self._lock = threading.Lock()
        self._on_close = on_close
        self._closed = False

    # -- requests --------------------------------------------------------------------------------
    def submit(self, text: str, voice: str | None = None, stream: bool = False,
               options: Mapping[str, Any] | None = None) -> SpeechRequest:
        with self._lock:
            i = self._choose()
            self._last[i] = next(self._turn)
        try:
            return self.replicas[i].submit(text, voice, stream, options)
        except Unavailable as exc:
            if not any(d.state == DeploymentState.RUNNING for d in self.replicas):
                raise Unavailable("no replica is running: " + "; ".join(
                    f"replica {i} is {d.state}" for i, d in enumerate(self.replicas))) from exc
            raise

    def _choose(self) -> int:
        """The replica for the next request (see the module's docstring)."""
        why = [d.refusal() for d in self.replicas]
        return min(range(len(self.replicas)), key=lambda i: (
            _PREFERENCE[why[i]], self.replicas[i].in_flight, self._last[i]))

    def synthesize(self, text: str, voice: str | None = None,
                   timeout: float | None = 120.0) -> Audio:
        return self.submit(text, voice).result(timeout)

    # -- state -----------------------------------------------------------------------------------
    def refusal(self) -> Refusal | None:
        """The refusal of the replica the next request would go to (None: it would be taken)."""
        return min((d.refusal() for d in self.replicas), key=_PREFERENCE.__getitem__)

    @property
    def state(self) -> DeploymentState:
        states = {d.state for d in self.replicas}
        return states.pop() if len(states) == 1 else DeploymentState.DEGRADED

    @property
    def in_flight(self) -> int:
        return sum(d.in_flight for d in self.replicas)

    def health(self) -> dict[str, Any]:
        reports = [d.health() for d in self.replicas]
        ok = sum(r["status"] == "ok" for r in reports)
        status = "ok" if ok == len(reports) else (
            DeploymentState.FAILED if self.failed.is_set() else DeploymentState.DEGRADED)
        errors = [f"replica {i}: {r['error']}" for i, r in enumerate(reports) if r["error"]]
        return {
            "status": status,
            "model": self.plan.model,
            "variant": self.plan.variant,
            "device": self.device,
            "note": self.note,
            "error": "; ".join(errors) or None,
            "in_flight": sum(r["in_flight"] for r in reports),
            "backend": self.backend,
            "replicas": [{"index": i, "node": node, **r}
                         for i, (node, r) in enumerate(zip(self.nodes, reports))],
        }

    def retry_after(self) -> int:
        return min(d.retry_after() for d in self.replicas)

    def metrics_text(self) -> str:
        return self.metrics()[0]

    def metrics(self, accept: str | None = None) -> tuple[str, str]:
        return metrics.render_all([d.sample() for d in self.replicas], accept)

    def worker_pids(self) -> dict[str, int]:
        return {f"r{i}/{name}": pid for i, d in enumerate(self.replicas)
                for name, pid in d.worker_pids().items()}

    def summary(self) -> str:
        k = len(self.replicas)
        return (f"{k} replica{'s' if k != 1 else ''} on {self.backend}, "
                f"{self.replicas[0].summary()} each")

    # -- stop ------------------------------------------------------------------------------------
    def close(self, drain_timeout: float = 0.0) -> None:
        """Close every replica (in parallel: each waits for its own drain), then the backend's
        session (a local Ray instance stops with it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with ThreadPoolExecutor(len(self.replicas)) as pool:
            list(pool.map(lambda d: d.close(drain_timeout), self.replicas))
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> ReplicaSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch_replicas(plan: Plan, packing: Packing, device: str = "auto", *,
                    backend: BackendName = "local", session: Any = None,
                    cluster: Cluster | None = None, **launch_kwargs: Any) -> ReplicaSet:
    """Start every replica of `packing` (all at once) and return when all are ready.

    `backend="ray"` needs `session` (a `ray_backend.RaySession`, closed with the set) and the
    `cluster` the packing was made for (its nodes carry their Ray ids); each replica reserves its
    placement group on its planned node first. A replica that fails to
    start stops the others, and the `LaunchError` names it."""
    nodes = {n.name: n for n in (cluster.nodes if cluster is not None else ())}
    if backend != "local":
        from launcher.backends.ray_backend import RayBackend
        from launcher.backends.ray_bundles import replica_bundles

        bundles = replica_bundles(plan, packing.demand.gpus, packing.demand.limit)

    def start(replica) -> Deployment:
        gpus: Mapping[int, int] = dict(replica.gpus)
        if backend == "local":
            return launch(plan, device, gpu_map=gpus or None, **launch_kwargs)
        node = nodes[replica.node]
        return launch(plan, device, gpu_map={logical: 0 for logical in gpus} or None,
                      backend=lambda: RayBackend(session, node, bundles, replica.index),
                      **launch_kwargs)

    started: list[Deployment | None] = [None] * len(packing.replicas)
    failures: list[str] = []

    def attempt(i: int) -> None:
        try:
            started[i] = start(packing.replicas[i])
        except LaunchError as exc:
            failures.append(f"replica {i} (node {packing.replicas[i].node}): {exc}")
            log.info("replica %d failed to start; stopping the others", i)

    with ThreadPoolExecutor(max(1, len(packing.replicas))) as pool:
        list(pool.map(attempt, range(len(packing.replicas))))
    if failures:
        for d in started:
            if d is not None:
                d.close()
        if session is not None:
            session.close()
        raise LaunchError("; ".join(sorted(failures)))
    return ReplicaSet(plan, [d for d in started if d is not None],
                      [r.node for r in packing.replicas], backend,
                      on_close=session.close if session is not None else None)
