"""The body of one worker process: build its stages in pipeline order, then run them.

The worker talks through a `backend.Channel`: lifecycle, results and bookkeeping to the
supervisor, payloads and leases straight to its peers. One thread receives (`_dispatch`), one
thread per stage runs it (`stages.StageRunner`), the main thread reports stats.

Shared memory (see `ipc`): this process sends from its own pool of blocks; a reader gives a block
back to its owner directly, once its last view of it has died. When a peer dies, the blocks lent
to it are reclaimed and its blocks are unmapped here (`PeerGone`).

A tensor-parallel stage runs in `tp_size` rank processes. Rank 0 receives the payloads and
broadcasts each one to the other ranks, which run the same stage in lock step (the stage does its
own collectives) and discard the outputs.

The worker exits when the supervisor goes away (its control pipe closes) or says `Stop`, and
unlinks its blocks first, also on SIGTERM. It ignores SIGINT: Ctrl-C is the supervisor's.
It logs to its stderr (`launcher.logs`), each record naming it, at the level its spec says.
This module is preloaded in the fork server and imports no torch: a process loads torch only
where its stages (their factory modules), its GPU or tensor parallelism need it.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from launcher import logs
from launcher.wire import ipc
from launcher.worker import gpu_share, tp
from launcher.wire.backend import Channel
from launcher.wire.protocol import (
    BuildError, Building, Cancel, Deliver, Free, PeerGone, Ready, Started, Stats, Stop,
)
from launcher.wire.specs import StageSpec, WorkerSpec
from launcher.worker.stages import StageRunner

STATS_INTERVAL_S = 0.5

log = logging.getLogger(__name__)


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


# Offered arguments the plan decides: they win over a config's `args` of the same name, so that
# what runs is what `planner solve` showed.
PLANNED = ("threads",)


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
        if key in named and (key not in kwargs or key in PLANNED):
            kwargs[key] = value
    return factory(**kwargs)


class Worker:
    def __init__(self, spec: WorkerSpec, channel: Channel) -> None:
        self.spec, self.channel = spec, channel
        self.pool = ipc.SegmentPool(spec.shm_prefix, spec.name, inline_bytes=spec.inline_bytes)
        self.receiver = ipc.Receiver(self._give_back)
        self.stages: dict[str, Callable[..., Any]] = {}
        self.runner = StageRunner(spec, self.stages, channel, self.pool, self.receiver,
                                  self._give_back, lambda: self.exit(3))

    # -- lifecycle -------------------------------------------------------------------------------
    def run(self) -> None:
        threading.Thread(target=self._dispatch, name="receiver", daemon=True).start()
        spec = self.spec
        if spec.gpu is not None:
            gpu_share.apply(spec.gpu_compute_percentage)  # before the CUDA context exists
            import torch

            torch.cuda.set_device(spec.gpu)
            if spec.memory_fraction is not None:
                # Enforced, not just accounted: the caching allocator refuses to grow past this.
                torch.cuda.set_per_process_memory_fraction(spec.memory_fraction, spec.gpu)
        if spec.tp is not None:
            import torch.distributed as dist

            self.channel.to_supervisor(Building("torch.distributed"))
            dist.init_process_group(
                spec.tp.backend, init_method=spec.tp.init_method, rank=spec.tp.rank,
                world_size=spec.tp.world_size, timeout=timedelta(seconds=120),
            )
        for stage in spec.stages:
            self.channel.to_supervisor(Building(stage.name))
            offered = {
                **dict(stage.defaults),
                "device": stage.device,
                "total_gpu_memory_fraction": spec.memory_fraction,
                "stage_name": stage.name,
                "process_name": spec.name,
                "threads": stage.threads,
            }
            if spec.tp is not None:
                offered |= {"tp_rank": spec.tp.rank, "tp_size": spec.tp.world_size}
            try:
                self.stages[stage.name] = build_stage(stage, offered)
            except BaseException as exc:  # noqa: BLE001 - reported to the supervisor verbatim
                log.error("stage '%s' failed to build", stage.name, exc_info=exc)
                text = "".join(traceback.format_exception(exc)).rstrip()
                self.channel.to_supervisor(
                    BuildError(stage.name, f"{type(exc).__name__}: {exc}", text))
                self.exit(1)
        # A factory module that loaded torch just now: its pool takes the planned width before
        # the first request (where torch came with the process, `main` set it already).
        torch_threads(spec.threads)
        if spec.tp is not None and spec.tp.rank > 0:
            self.channel.to_supervisor(Ready())
            threading.Thread(target=self._stats_forever, daemon=True).start()
            tp.follow(self.stages[spec.stages[0].name])
        self.runner.start()
        self.channel.listen()  # peers can hand payloads over from now on
        log.debug("ready: stages %s built", ", ".join(s.name for s in spec.stages))
        self.channel.to_supervisor(Ready())
        self._stats_forever()

    def exit(self, code: int) -> None:
        """Leave nothing behind: unlink this process's blocks (by name: no lock, so this is safe
        in a signal handler), and its listening socket's name, then exit at once."""
        self.pool.abandon()
        self.channel.unlisten()
        os._exit(code)

    def _stats_forever(self) -> None:
        while True:
            time.sleep(STATS_INTERVAL_S)
            cuda = None
            if self.spec.gpu is not None:
                cuda = sys.modules["torch"].cuda.memory_allocated(self.spec.gpu)
            depths = {name: q.qsize() for name, q in self.runner.inboxes.items()}
            latencies, core_waits = self.runner.take_timings()
            try:
                self.channel.to_supervisor(
                    Stats(latencies, depths, cuda, self.pool.usage(), core_waits))
            except EOFError:
                self.exit(3)  # the supervisor is gone

    # -- messages --------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while True:
            try:
                message = self.channel.receive()
            except (EOFError, OSError):
                self.exit(3)  # the supervisor is gone: a worker never outlives it
            match message:
                case Deliver(target):  # from the client, through the supervisor
                    if (env := self.runner.arrive(message)) is not None:
                        self.runner.put(target, env)
                case Free(segment, lease):
                    self.pool.release(segment, lease)
                case Cancel(request_id):
                    self.runner.cancel(request_id)
                case PeerGone(process, pid):
                    self.pool.reclaim(f"{process}:{pid}")
                    self.receiver.forget(ipc.owner_prefix(self.spec.shm_prefix, process, pid))
                case Stop():
                    self.exit(0)
                case _:
                    raise TypeError(f"unexpected message {message!r}")

    def _give_back(self, segment: str, lease: int) -> None:
        pid = ipc.owner_pid(segment)
        if pid is not None:
            try:
                self.channel.to_peer(pid, Free(segment, lease))
            except ConnectionError:
                pass  # the owner died; its blocks are swept


_torch_sized = False


def torch_threads(threads: int) -> None:
    """The planned width of torch's pool, where this process has loaded torch (never loads it):
    a process whose stages do not use torch has no pool to size."""
    global _torch_sized
    torch = sys.modules.get("torch")
    if torch is None or _torch_sized:
        return
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set in this process
    _torch_sized = True


def pin_cpus(cpus: tuple[int, ...]) -> None:
    """Keep every thread of this process, those started later too, on the planned CPUs (none
    planned: the OS places them). Each thread already running is pinned one by one, since
    affinity is a thread's own; threads started later inherit it."""
    if not cpus:
        return
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            pass  # a thread that ended meanwhile
        except OSError as exc:  # a node without those CPUs (the launcher checks its own)
            raise RuntimeError(f"cannot pin this process to CPUs {list(cpus)}: {exc.strerror}; "
                               f"this node lets it run on {sorted(os.sched_getaffinity(0))}"
                               ) from None


def main(spec: WorkerSpec, channel: Channel) -> None:
    logs.configure(spec.log_level, process=spec.name)
    # The child got past multiprocessing's bootstrap (re-importing the launching script), so a
    # death from here on is this worker's own, not an unguarded script's.
    channel.to_supervisor(Started(os.getpid()))
    # Ctrl-C reaches the whole process group; the supervisor decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pin_cpus(spec.cpus)  # before any pool starts its threads: they inherit it
    torch_threads(spec.threads)  # before the stages build, where the fork server preloaded torch
    worker = Worker(spec, channel)
    signal.signal(signal.SIGTERM, lambda *_: worker.exit(143))
    try:
        worker.run()
    except EOFError:
        worker.exit(3)  # the supervisor is gone: a worker never outlives it
