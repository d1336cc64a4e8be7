"""The body of one worker process: build its stages in pipeline order, then run them.

Each stage gets a thread and an inbox. A handoff to a stage in the same process is a queue put of
the payload dict (no copy); a handoff to another process is a copy into a block of this process's
shared-memory pool plus a small control message to the supervisor, which forwards it (the
supervisor sees every cross-process handoff, so it knows where each request is and which blocks a
killed process held). The receiving process reads the tensors in place, and gives the block back
(a "free" message, routed by the supervisor to its owner) once its last view of them has died.

A tensor-parallel stage runs in `tp_size` rank processes. Rank 0 receives the payloads and
broadcasts each one to the other ranks, which run the same stage in lock step (the stage does its
own collectives) and discard the outputs.

This module is preloaded in the forkserver, so it imports torch once for every worker.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import os
import queue
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch

from . import ipc

CLIENT = "__client__"  # the source name of a request's initial payload
PARENT = "__parent__"  # destination name of a terminal stage's output
STATS_INTERVAL_S = 0.5
TP_IDLE_BROADCAST_S = 30.0  # keeps idle follower ranks inside gloo's collective timeout


@dataclass(frozen=True)
class StageSpec:
    name: str
    factory: str
    kwargs: tuple[tuple[str, Any], ...]  # from the config: always passed
    defaults: tuple[tuple[str, Any], ...]  # from the launcher: passed when the signature takes them
    predecessors: tuple[str, ...]  # (CLIENT,) for an entry stage
    successors: tuple[tuple[str, bool, str], ...]  # (stage, streaming edge, hosting process)
    device: str


@dataclass(frozen=True)
class TpSpec:
    rank: int
    world_size: int
    init_method: str
    backend: str


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    stages: tuple[StageSpec, ...]  # pipeline order
    gpu: int | None  # cuda device index when running on CUDA, else None
    memory_fraction: float | None  # sum of the process's stage fractions on `gpu`
    shm_prefix: str
    tp: TpSpec | None = None


@dataclass
class Envelope:
    request_id: int
    source: str
    chunk: int | None  # index in a chunk stream; None for a whole payload
    last: bool  # final message from `source` for this request
    data: dict[str, Any]


@dataclass
class _Inbox:
    wholes: dict[str, dict[str, Any]] = field(default_factory=dict)
    chunk_source: str | None = None
    backlog: list[Envelope] = field(default_factory=list)


_STOP = object()


def resolve_factory(path: str) -> Callable[..., Any]:
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"factory {path!r} is not of the form 'module:callable'")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"factory {path!r} is not callable")
    return obj


def build_stage(spec: StageSpec, offered: Mapping[str, Any]) -> Callable[..., Any]:
    """Call the factory with the config's args, plus each offered runtime arg it names.

    Only parameters the signature names are offered (a bare **kwargs does not count): a factory
    that forwards **kwargs to a real engine must not receive arguments it never asked for.
    """
    factory = resolve_factory(spec.factory)
    kwargs = dict(spec.kwargs)
    params = inspect.signature(factory).parameters
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for key, value in offered.items():
        if key not in kwargs and key in named:
            kwargs[key] = value
    return factory(**kwargs)


class Worker:
    def __init__(self, spec: WorkerSpec, conn) -> None:
        self.spec = spec
        self.conn = conn
        self.send_lock = threading.Lock()
        self.stages: dict[str, Callable[..., Any]] = {}
        self.inboxes: dict[str, queue.Queue] = {s.name: queue.Queue() for s in spec.stages}
        self.local = {s.name for s in spec.stages}
        self.latencies: dict[str, list[float]] = {s.name: [] for s in spec.stages}
        self.stats_lock = threading.Lock()
        # request -> stages of this process that have emitted their final output for it
        self.finished: dict[int, set[str]] = {}
        # Requests this process must drop (failed here or cancelled by the supervisor); bounded.
        self.failed: set[int] = set()
        self.failed_order: deque[int] = deque()
        self.finish_lock = threading.Lock()
        # Each key is touched by one stage thread only, so these need no lock.
        self._chunk_counters: dict[tuple[str, int], Iterator[int]] = {}
        self._held: dict[tuple[str, str, int], list] = {}
        self.pool = ipc.SegmentPool(spec.shm_prefix, spec.name)
        self.receiver = ipc.Receiver(self._give_back)

    # -- wire ------------------------------------------------------------------------------------
    def send(self, *msg: Any) -> None:
        with self.send_lock:
            self.conn.send(msg)

    def _give_back(self, segment: str, lease: int) -> None:
        self.send("free", segment, lease)

    def _receive(self) -> None:
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                os._exit(3)  # the supervisor is gone: a worker never outlives it
            if msg[0] == "deliver":
                _, target, request_id, source, chunk, last, packed = msg
                try:
                    data = self.receiver.unpack(packed)
                except OSError as exc:
                    # The sender died after handing over and the supervisor swept its blocks.
                    self._fail(target, request_id, f"cannot read the handoff from '{source}' "
                                                   f"(its process is gone?): {exc}")
                    continue
                self.inboxes[target].put(Envelope(request_id, source, chunk, last, data))
                # Not kept while waiting for the next message: it would pin a shared block.
                data = None
            elif msg[0] == "free":
                self.pool.release(msg[1], msg[2])
            elif msg[0] == "gone":
                self.receiver.forget(msg[1])
            elif msg[0] == "cancel":
                self._forget(msg[1])
            elif msg[0] == "stop":
                os._exit(0)

    # -- lifecycle -------------------------------------------------------------------------------
    def run(self) -> None:
        threading.Thread(target=self._receive, name="receiver", daemon=True).start()
        spec = self.spec
        fraction_applied = None
        if spec.gpu is not None:
            torch.cuda.set_device(spec.gpu)
            if spec.memory_fraction is not None:
                # Enforced, not just accounted: the caching allocator refuses to grow past this.
                torch.cuda.set_per_process_memory_fraction(spec.memory_fraction, spec.gpu)
                fraction_applied = spec.memory_fraction
        if spec.tp is not None:
            import torch.distributed as dist

            self.send("building", "torch.distributed", None)
            dist.init_process_group(
                spec.tp.backend, init_method=spec.tp.init_method, rank=spec.tp.rank,
                world_size=spec.tp.world_size, timeout=timedelta(seconds=120),
            )
        for stage in spec.stages:
            self.send("building", stage.name, None)
            offered = {
                **dict(stage.defaults),
                "device": stage.device,
                "total_gpu_memory_fraction": spec.memory_fraction,
                "stage_name": stage.name,
                "process_name": spec.name,
            }
            if spec.tp is not None:
                offered |= {"tp_rank": spec.tp.rank, "tp_size": spec.tp.world_size}
            try:
                self.stages[stage.name] = build_stage(stage, offered)
            except BaseException as exc:  # noqa: BLE001 - reported to the supervisor verbatim
                text = "".join(traceback.format_exception(exc)).rstrip()
                self.send("build_error", stage.name, f"{type(exc).__name__}: {exc}", text)
                os._exit(1)
        self.send("ready", os.getpid(), {"fraction": fraction_applied})
        if spec.tp is not None and spec.tp.rank > 0:
            self._follow()
            return
        for stage in spec.stages:
            threading.Thread(target=self._stage_loop, args=(stage,), name=stage.name,
                             daemon=True).start()
        while True:
            time.sleep(STATS_INTERVAL_S)
            self._send_stats()

    def _send_stats(self) -> None:
        with self.stats_lock:
            lat, self.latencies = self.latencies, {s: [] for s in self.latencies}
        cuda = None
        if self.spec.gpu is not None:
            cuda = torch.cuda.memory_allocated(self.spec.gpu)
        depths = {name: q.qsize() for name, q in self.inboxes.items()}
        self.send("stats", lat, depths, cuda, self.pool.usage())

    def _follow(self) -> None:
        """Follower rank: run whatever rank 0 broadcasts, in the same order."""
        import torch.distributed as dist

        stage = self.stages[self.spec.stages[0].name]
        threading.Thread(target=self._stats_forever, daemon=True).start()
        while True:
            box = [None]
            dist.broadcast_object_list(box, src=0)
            if box[0] is None:  # idle keep-alive
                continue
            try:
                out = stage(box[0])
                if not isinstance(out, Mapping):
                    for _ in out:
                        pass
            except Exception:  # noqa: BLE001 - rank 0 hits the same error and reports it
                pass

    def _stats_forever(self) -> None:
        while True:
            time.sleep(STATS_INTERVAL_S)
            self._send_stats()

    # -- stages ----------------------------------------------------------------------------------
    def _stage_loop(self, spec: StageSpec) -> None:
        inbox = self.inboxes[spec.name]
        pending: dict[int, _Inbox] = {}
        tp_leader = self.spec.tp is not None
        while True:
            try:
                env = inbox.get(timeout=TP_IDLE_BROADCAST_S if tp_leader else None)
            except queue.Empty:
                import torch.distributed as dist

                dist.broadcast_object_list([None], src=0)
                continue
            if env.request_id in self.failed:
                pending.pop(env.request_id, None)
                continue
            for stale in [r for r in pending if r in self.failed]:
                del pending[stale]
            for data, chunk, last in self._join(spec, pending, env):
                self._invoke(spec, env.request_id, data, chunk, last)
            # Payloads done with must not stay alive while this thread waits for the next one:
            # each pins the shared-memory block it arrived in.
            env = data = None

    def _join(self, spec: StageSpec, pending: dict[int, _Inbox], env: Envelope):
        """Yield the stage's inputs once every predecessor has spoken.

        Whole payloads from several predecessors are merged in pipeline order; a chunk stream
        (from at most one predecessor) is then fed through chunk by chunk.
        """
        box = pending.setdefault(env.request_id, _Inbox())
        if env.chunk is None:
            box.wholes[env.source] = env.data
        else:
            if box.chunk_source not in (None, env.source):
                pending.pop(env.request_id, None)
                self._fail(spec.name, env.request_id,
                           f"stage '{spec.name}' got chunk streams from both "
                           f"'{box.chunk_source}' and '{env.source}'")
                return
            box.chunk_source = env.source
            box.backlog.append(env)
        heard = set(box.wholes) | ({box.chunk_source} if box.chunk_source else set())
        if not heard >= set(spec.predecessors):
            return
        base: dict[str, Any] = {}
        for pred in spec.predecessors:
            base.update(box.wholes.get(pred, {}))
        if box.chunk_source is None:
            pending.pop(env.request_id)
            yield base, None, True
            return
        backlog, box.backlog = box.backlog, []
        for item in backlog:
            if item.last:
                pending.pop(env.request_id, None)
            yield {**base, **item.data}, item.chunk, item.last

    def _invoke(self, spec: StageSpec, request_id: int, data: dict[str, Any], chunk: int | None,
                last: bool) -> None:
        fn = self.stages[spec.name]
        started = time.perf_counter()
        try:
            if self.spec.tp is not None:
                import torch.distributed as dist

                # Received tensors are views of a shared block; pickling a view would ship the
                # whole block, so the followers get compact copies of just these tensors.
                dist.broadcast_object_list([{k: v.clone() if isinstance(v, torch.Tensor) else v
                                             for k, v in data.items()}], src=0)
            out = fn(data)
            if isinstance(out, Mapping):
                self._emit(spec, request_id, data, out, chunk, last)
            else:
                self._emit_stream(spec, request_id, data, out, last)
        except Exception as exc:  # noqa: BLE001 - a stage error fails its request, not the process
            self._chunk_counters.pop((spec.name, request_id), None)
            for key in [k for k in self._held if k[0] == spec.name and k[2] == request_id]:
                del self._held[key]
            self._fail(spec.name, request_id, f"{type(exc).__name__}: {exc}")
            return
        finally:
            with self.stats_lock:
                self.latencies[spec.name].append(time.perf_counter() - started)

    def _emit_stream(self, spec: StageSpec, request_id: int, data: dict[str, Any],
                     items: Iterator[Mapping[str, Any]], last: bool) -> None:
        counter = self._chunk_counters.setdefault((spec.name, request_id), itertools.count())
        iterator = iter(items)
        try:
            current = next(iterator)
        except StopIteration:
            raise RuntimeError(f"stage '{spec.name}' produced no output") from None
        for upcoming in itertools.chain(iterator, [_STOP]):
            final = upcoming is _STOP and last
            self._emit(spec, request_id, data, current, next(counter), final, counted=True)
            current = upcoming

    def _emit(self, spec: StageSpec, request_id: int, data: dict[str, Any],
              out: Mapping[str, Any], chunk: int | None, last: bool, counted: bool = False) -> None:
        if chunk is not None and not counted:
            counter = self._chunk_counters.setdefault((spec.name, request_id), itertools.count())
            chunk = next(counter)
        merged = {**data, **out}
        merged = {k: v for k, v in merged.items() if v is not None}
        if not spec.successors:
            packed = self.pool.pack(merged, PARENT)
            self.send("result", request_id, spec.name, chunk, last, packed)
        for target, streaming, process in spec.successors:
            if chunk is not None and not streaming:
                # A plain `next` edge hands over the complete output: hold chunks until the last.
                held = self._held.setdefault((spec.name, target, request_id), [])
                held.append((dict(merged), chunk, last))
                if not last:
                    continue
                batch = self._held.pop((spec.name, target, request_id))
            else:
                batch = [(dict(merged), chunk, last)]
            for payload, idx, fin in batch:
                self._deliver(spec.name, target, process, request_id, payload, idx, fin)
        if last:
            self._chunk_counters.pop((spec.name, request_id), None)
            self._finished(spec.name, request_id)

    def _deliver(self, source: str, target: str, process: str, request_id: int,
                 data: dict[str, Any], chunk: int | None, last: bool) -> None:
        if target in self.local:
            self.inboxes[target].put(Envelope(request_id, source, chunk, last, data))
            return
        packed = self.pool.pack(data, process)
        self.send("route", target, request_id, source, chunk, last, packed)

    def _finished(self, stage: str, request_id: int) -> None:
        with self.finish_lock:
            done = self.finished.setdefault(request_id, set())
            done.add(stage)
            if len(done) < len(self.spec.stages):
                return
            del self.finished[request_id]
        self.send("released", request_id)

    def _forget(self, request_id: int) -> None:
        with self.finish_lock:
            if request_id not in self.failed:
                self.failed.add(request_id)
                self.failed_order.append(request_id)
                if len(self.failed_order) > 4096:
                    self.failed.discard(self.failed_order.popleft())
            self.finished.pop(request_id, None)

    def _fail(self, stage: str, request_id: int, message: str) -> None:
        self._forget(request_id)
        self.send("error", request_id, stage, message)
        self.send("released", request_id)


def main(spec: WorkerSpec, conn) -> None:
    # The child got past multiprocessing's bootstrap (re-importing the launching script), so a
    # death from here on is this worker's own, not an unguarded script's.
    conn.send(("started", os.getpid()))
    # Ctrl-C reaches the whole process group; the supervisor decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set in this process
    Worker(spec, conn).run()
