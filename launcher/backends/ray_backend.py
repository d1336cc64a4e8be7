"""The Ray backend: every worker process is a Ray actor in its replica's placement group.

- `RaySession` is the connection for one deployment: to a running cluster (`--ray-address`), or
  to a local instance it starts and stops itself.
- `RayBackend` runs one replica. It reserves the replica's placement group (`ray_bundles`) on
  the node the planner chose, pinned by Ray's node-id label, before anything starts; then each
  worker runs as an actor in its bundle, hosting the very worker code the local backend runs
  (`worker.main` over a `links.LocalChannel`).
- The actor dials back: two authenticated TCP connections to this backend's listener (control and
  bookkeeping, as the local backend's two pipes), and says who it is (pid, node, actor id, the GPU
  ids Ray assigned it). Workers of one replica are on one node, so they hand payloads to each
  other over Unix sockets and shared memory exactly as local workers do.
- A death is the control connection's end of file (or, for an actor that died before it dialled
  back, its finished task). `stop` kills the actors with `ray.kill` (a Ray-intended exit) and
  unlinks the blocks they left; `close` also removes the placement group.
The front door reads a terminal stage's output in place when the replica's node is this machine;
on another node every payload of that replica travels inside its message (`shares_memory`).
"""

from __future__ import annotations

import itertools
import json
import logging
import multiprocessing.connection as mpc
import os
import queue
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from planner import Cluster, Node

from launcher.wire import ipc
from launcher.backends import links
from launcher.wire.backend import (
    Backend, Deaths, Event, Exited, Unit, hung_up, read_frames, send_frame, unregister,
)
from launcher.errors import LaunchError
from launcher.control.layout import with_fresh_rendezvous
from launcher.wire.protocol import FrameReader, ToWorker
from launcher.backends.ray_bundles import ReplicaBundles
from launcher.backends.ray_cluster import cluster_from_ray, ray_auth_problem
from launcher.wire.specs import WorkerSpec

log = logging.getLogger(__name__)

EXITS_S = 0.1  # how often actors that never dialled back are checked
START_TIMEOUT_S = 120.0  # for Ray to start an actor in a reserved bundle


def _ray():
    try:
        import ray
    except ImportError:
        raise LaunchError("--backend ray needs Ray; install it with "
                          "`pip install 'stage-planner[ray]'`") from None
    return ray


class RaySession:
    """One deployment's connection to Ray. Without `address`, a local Ray instance is started
    here and stopped by `close`; with one, `close` only disconnects."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        """`num_cpus`: the CPUs a local instance declares (default: this machine's)."""
        ray = _ray()
        self._ours = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
            if address is None:
                # "local": a new instance even when an old cluster's address file is around.
                options |= {"address": "local", "include_dashboard": False,
                            "num_cpus": num_cpus}
            else:
                options["address"] = address
            problem = ray_auth_problem(address) if address is not None else None
            if problem is not None:
                raise LaunchError(f"--ray-address {address}: {problem}")
            try:
                ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError,
                    ray.exceptions.AuthenticationError) as exc:
                raise LaunchError(
                    f"cannot connect to the Ray cluster at {address!r} ({exc}); start one with "
                    "`ray start --head`, or leave out --ray-address to start a local one for "
                    "this deployment") from None
            self._ours = True
        self.ip = ray.util.get_node_ip_address()
        self.here = ray.get_runtime_context().get_node_id()

    def cluster(self) -> Cluster:
        """The cluster's nodes as the planner packs onto them (with their Ray node ids)."""
        return cluster_from_ray()

    def close(self) -> None:
        if self._ours:
            self._ours = False
            _ray().shutdown()


@dataclass
class _Actor:
    spec: WorkerSpec
    actor: Any
    task: Any  # the `run` call: finishes (with an error) when the actor dies
    pid: int
    control: mpc.Connection | None = None
    notes: mpc.Connection | None = None
    reader: FrameReader | None = None
    notes_reader: FrameReader | None = None
    where: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)



def _last_words(a: _Actor, out: list[Event]) -> None:
    """What a dead actor's control connection still holds (it is closed: reading cannot wait)."""
    if a.reader is not None:
        read_frames(a.spec.name, a.pid, a.reader, out, drain=True)

class RayBackend(Backend):
    """`backend.Backend` for one replica on a Ray cluster. As for the local backend, `events`,
    `start` and `stop` are called from the supervisor's thread and `send` from any."""

    # The actors' output stays in their node's Ray session logs (`log_to_driver` is off).
    shares_stderr = False

    def __init__(self, session: RaySession, node: Node, bundles: ReplicaBundles, replica: int,
                 ready_timeout: float = START_TIMEOUT_S) -> None:
        ray = _ray()
        from ray.util.placement_group import placement_group

        self.token = secrets.token_hex(6)
        self._authkey = secrets.token_bytes(32)
        self.bundles = bundles
        self.shares_memory = node.ray_id == session.here or _same_host(session, node)
        resources = [b.resources() for b in bundles.bundles]
        self._pg = placement_group(
            resources, strategy="STRICT_PACK", name=f"stage-planner-{self.token}-r{replica}",
            bundle_label_selector=[{"ray.io/node-id": node.ray_id}] * len(resources))
        try:
            ray.get(self._pg.ready(), timeout=ready_timeout)
        except Exception as exc:  # noqa: BLE001 - GetTimeoutError, or the group was removed
            ray.util.remove_placement_group(self._pg)
            raise LaunchError(
                f"Ray did not reserve replica {replica}'s resources {resources} on node "
                f"{node.name} within {ready_timeout:g} s ({type(exc).__name__}); something "
                "else holds them (`ray status` shows what is in use)") from None
        self._listener = mpc.Listener((session.ip, 0), authkey=self._authkey, backlog=64)
        self._address = self._listener.address
        self._attached: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._actors: dict[str, _Actor] = {}
        self._incarnations = itertools.count()
        self._exits_read = 0.0
        self._deaths = Deaths()
        self._closed = False
        threading.Thread(target=self._accept_forever, name="ray-accept", daemon=True).start()

    # -- Backend ---------------------------------------------------------------------------------
    def start(self, unit: Unit) -> dict[str, int]:
        ray = _ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        unit = with_fresh_rendezvous(unit)
        started = []
        for spec in unit.workers:
            self._forget(spec.name)
            share = self.bundles.actors[spec.name]
            # Named (operators find them with `ray list actors`), a new name per incarnation:
            # the dead one's may not be released yet.
            name = f"stage-planner-{self.token}-{spec.name}-{next(self._incarnations)}"
            actor = _host().options(
                num_cpus=share.cpus, num_gpus=share.gpus, max_restarts=0, name=name,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    self._pg, placement_group_bundle_index=share.bundle),
            ).remote()
            # A Ray actor runs its calls in order: `pid` answers before `run` takes it over.
            asked = actor.pid.remote()
            task = actor.run.remote(spec, self._address, self._authkey, self.token)
            started.append((spec, name, actor, asked, task))
        pids = {}
        for spec, name, actor, asked, task in started:
            try:
                pid = ray.get(asked, timeout=START_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - it died or never started: `events` says
                log.debug("actor %s did not answer: %s: %s", name, type(exc).__name__, exc)
                pid = -1
            self._actors[spec.name] = _Actor(spec, actor, task, pid,
                                             where={"ray_actor_name": name})
            pids[spec.name] = pid
        return pids

    def send(self, process: str, message: ToWorker) -> bool:
        a = self._actors.get(process)
        if a is None or a.control is None:
            return False  # not there, or not dialled back yet: it holds nothing to be told
        return send_frame(a.control, a.lock, message)

    def events(self, timeout: float) -> list[Event]:
        out: list[Event] = []
        gone: list[_Actor] = []
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._adopt()
                continue
            a = key.data
            if self._actors.get(a.spec.name) is not a:
                continue
            if not read_frames(a.spec.name, a.pid, a.reader, out, drain=False):
                gone.append(a)
        now = time.monotonic()
        if now - self._exits_read >= EXITS_S:
            self._exits_read = now
            gone += self._died_unattached()
        return self._deaths.report(
            out, gone,
            notes=[(a.spec.name, a.pid, a.notes_reader) for a in self._actors.values()],
            last_words=_last_words, exited=lambda a: Exited(a.spec.name, a.pid, None),
            forget=lambda a: self._forget(a.spec.name))

    def stop(self, processes: Iterable[str], grace: float) -> None:
        # No Stop message: a worker that exits by itself is an error in Ray's eyes (and its
        # log); `ray.kill` is the intended way. Its blocks are unlinked here (`_forget`).
        ray = _ray()
        victims = [a for name in processes if (a := self._actors.get(name)) is not None]
        for a in victims:
            self._unregister(a)
            ray.kill(a.actor, no_restart=True)
        if victims:
            ray.wait([a.task for a in victims], num_returns=len(victims), timeout=10.0)
        if self.shares_memory:  # this machine: return once the processes are gone, as locally
            deadline = time.monotonic() + 5.0
            running = [a.pid for a in victims if a.pid > 0]
            while any(map(ipc.pid_alive, running)) and time.monotonic() < deadline:
                time.sleep(0.02)
        for a in victims:
            self._forget(a.spec.name)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop(list(self._actors), grace=0.0)
        _ray().util.remove_placement_group(self._pg)
        self._listener.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        links.remove_socket_dir(self.token)  # the workers' sockets, when they ran on this host

    def alive(self, process: str) -> bool:
        """Whether the process runs, asked now (any thread), where that can be told without
        Ray: its control connection hung up (`hung_up`: on any node), or on this machine its
        pid gone; otherwise its death is known when `events` says."""
        a = self._actors.get(process)
        if a is None:
            return False
        if a.control is not None and hung_up(a.control):
            return False
        return not (self.shares_memory and a.pid > 0) or ipc.pid_alive(a.pid)

    def where(self, process: str) -> dict[str, Any]:
        """Where Ray runs `process`: node, actor name and id, and the GPU ids it assigned."""
        a = self._actors.get(process)
        return dict(a.where) if a is not None else {}

    # -- helpers ---------------------------------------------------------------------------------
    def _accept_forever(self) -> None:
        """Authenticate each dial-back off the supervisor's thread (a slow actor must not stall
        it), then hand it to `events`."""
        while True:
            try:
                conn = self._listener.accept()
                _no_delay(conn)
                hello = json.loads(conn.recv_bytes())
            except (OSError, EOFError, ValueError, mpc.AuthenticationError):
                if self._closed:
                    return
                continue
            self._attached.put((hello, conn))
            try:
                self._wake_w.send(b"x")
            except OSError:
                return

    def _adopt(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                hello, conn = self._attached.get_nowait()
            except queue.Empty:
                return
            a = self._actors.get(hello["process"])
            if a is None or a.pid != hello["pid"]:
                conn.close()  # an incarnation that was stopped meanwhile
                continue
            if hello["role"] == "control":
                log.debug("process '%s' (pid %d) runs on node %s", a.spec.name, a.pid,
                          hello["node"])
                a.control, a.reader = conn, FrameReader(conn.fileno())
                a.where |= {k: hello[k] for k in ("node", "ray_actor_id", "ray_gpu_ids")}
                self._selector.register(conn, selectors.EVENT_READ, a)
            else:
                os.set_blocking(conn.fileno(), False)
                a.notes, a.notes_reader = conn, FrameReader(conn.fileno())

    def _died_unattached(self) -> list[_Actor]:
        waiting = [a for a in self._actors.values() if a.control is None]
        if not waiting:
            return []
        done, _ = _ray().wait([a.task for a in waiting], num_returns=len(waiting), timeout=0)
        return [a for a in waiting if a.task in done or a.pid == -1]

    def _unregister(self, a: _Actor) -> None:
        if a.control is not None:
            unregister(self._selector, a.control)

    def _forget(self, name: str) -> None:
        a = self._actors.pop(name, None)
        if a is None:
            return
        self._unregister(a)
        for conn in (a.control, a.notes):
            if conn is not None:
                conn.close()
        if self.shares_memory and a.pid > 0:
            ipc.sweep(ipc.owner_prefix(a.spec.shm_prefix, a.spec.name, a.pid))


def _same_host(session: RaySession, node: Node) -> bool:
    """Nodes of one machine (a local test cluster) share its memory."""
    ray = _ray()
    return any(n["NodeID"] == node.ray_id and n.get("NodeManagerAddress") == session.ip
               for n in ray.nodes())


def _no_delay(conn: mpc.Connection) -> None:
    """Small control messages leave at once: Nagle's algorithm would hold one back until the
    previous one is acknowledged, which costs tens of ms under load."""
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


_HOST = None


def _host():
    """The actor class, defined on first use so that importing this module needs no Ray."""
    global _HOST
    if _HOST is None:
        ray = _ray()

        @ray.remote
        class WorkerHost:
            def pid(self) -> int:
                return os.getpid()

            def run(self, spec: WorkerSpec, address: Any, authkey: bytes, token: str) -> None:
                host_worker(spec, address, authkey, token)

        _HOST = WorkerHost
    return _HOST


def host_worker(spec: WorkerSpec, address: Any, authkey: bytes, token: str) -> None:
    """Inside the actor: dial back to the supervisor, then run the worker as the local backend
    does. Returns only when the worker exits (it ends the process)."""
    import ray

    from launcher.worker import main as worker
    from launcher.backends.links import LocalChannel

    ctx = ray.get_runtime_context()
    who = {"process": spec.name, "pid": os.getpid(), "node": ctx.get_node_id(),
           "ray_actor_id": ctx.get_actor_id(), "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
    conns = []
    for role in ("control", "notes"):
        conn = mpc.Client(address, authkey=authkey)
        _no_delay(conn)
        conn.send_bytes(json.dumps(who | {"role": role}).encode())
        conns.append(conn)
    worker.main(spec, LocalChannel(spec.name, conns[0], conns[1], token, authkey))
