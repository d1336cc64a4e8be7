"""A process group's replica on Ray Serve: the launcher's worker for the group, fed by the
deployments upstream, read by the one downstream.

A request flows by calls made from its end: the front door calls the group holding the terminal
stage; each group calls, once per request, every group that hands it payloads (`upstream`), and
gives what they yield (`Deliver`s for its stages, chunk by chunk where the handoff streams) to its
worker; what its worker hands on (a `Deliver` for the group downstream, or the terminal stage's
`Result`) is what its own call yields. So each handoff goes straight from one group's replica to
the next, as a stream, and each group runs once per request. This needs the process groups to
form a tree into the terminal group (each group hands on to at most one other group), and no
tensor-parallel stage (the replica is one process): `upstream_groups` refuses other plans.

The plan a replica runs is the plan with every copy a replica of its own (Ray Serve's
`num_replicas`) and without CPU pins (Ray schedules by count): `as_served`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from launcher.control import preflight
from launcher.control.admission import default_max_queued, registry_size
from launcher.control.layout import layout, resolve_device
from launcher.errors import LaunchError, RequestFailed, StageFailed, WorkerDied
from launcher.ray_serve.channel import hosted
from launcher.wire.ipc import ALL_INLINE, Packed
from launcher.wire.protocol import (
    Cancel, Deliver, PassedOn, Released, Result, StageError, Undeliverable,
)
from launcher.wire.specs import CLIENT, WorkerSpec

if TYPE_CHECKING:
    from planner import Plan

log = logging.getLogger(__name__)

SHM_PREFIX = "stageplanner-serve-"  # never used for a block: every payload travels inline


def as_served(plan: Plan) -> Plan:
    """The plan as each replica runs it: one copy per group (the copies are Ray Serve replicas),
    no CPU pins (Ray Serve has none)."""
    groups = tuple(dataclasses.replace(g, copies=1, cpus=()) for g in plan.groups)
    return dataclasses.replace(plan, groups=groups)


def terminal_group(plan: Plan) -> str:
    """The group holding the terminal stages (`upstream_groups` checks there is one)."""
    return _terminal_groups(plan)[0]


def upstream_groups(plan: Plan) -> dict[str, tuple[str, ...]]:
    """The groups that hand each group payloads, in pipeline order; raises `LaunchError` (one
    paragraph) for a plan this application cannot run."""
    if plan.tp_processes:
        stages = sorted({t.stage for t in plan.tp_processes})
        raise LaunchError(
            f"stage {', '.join(stages)} is tensor-parallel; a Ray Serve replica is one process and "
            "this application starts no rank actors: serve it with `planner serve` (add "
            "`--backend ray` for a Ray cluster), or plan it with tp_size 1")
    downstream: dict[str, list[str]] = {g.name: [] for g in plan.groups}
    for h in plan.handoffs:
        a, b = _group(plan, h.source), _group(plan, h.target)
        if a != b and b not in downstream[a]:
            downstream[a].append(b)
    forks = {a: to for a, to in downstream.items() if len(to) > 1}
    if forks:
        a, to = next(iter(forks.items()))
        raise LaunchError(
            f"process group '{a}' hands payloads to {len(to)} groups ({', '.join(to)}); on Ray "
            "Serve each group runs once per request, called by the one group it feeds: keep the "
            f"stages that '{a}' feeds in one process (`--stage-process STAGE={to[0]}` for each)")
    ends = _terminal_groups(plan)
    if len(ends) != 1 or downstream[ends[0]]:
        raise LaunchError(
            f"the terminal stages are in process groups {', '.join(ends)}; on Ray Serve the "
            "front door calls one group, which must hold every terminal stage and hand on to no "
            "other group: place the terminal stages in one process")
    order = [g.name for g in plan.groups]
    return {g: tuple(a for a in order if g in downstream[a]) for g in order}


def _group(plan: Plan, stage: str) -> str:
    group = plan.group_of(stage)
    if group is None:
        raise LaunchError(f"stage '{stage}' is in no process group of the plan")
    return group.name


def _terminal_groups(plan: Plan) -> list[str]:
    sources = {h.source for h in plan.handoffs}
    terminal = plan.terminal_stages or tuple(s.name for s in plan.stages if s.name not in sources)
    return list(dict.fromkeys(_group(plan, s) for s in terminal))


def group_spec(plan: Plan, group: str,
               factory_defaults: Mapping[str, Any] | None = None) -> WorkerSpec:
    """The worker spec of `group` as `planner serve` lays it out (`layout`), for a replica: on
    the GPU Ray gave it (index 0 of the devices it sees), every payload inline.
    `factory_defaults`: as `launcher.launch` takes them."""
    served = as_served(plan)
    stages = [served.stage(s) for s in served.groups[_index(served, group)].stages]
    device, note = ("cpu", None)
    if any(s.gpus for s in stages):
        device, note = resolve_device("auto")
    if note:
        log.warning("process group '%s': %s", group, note)
    defaults = {"max_prepared": registry_size(default_max_queued(plan)),
                **(factory_defaults or {})}
    gpu_map = {g: 0 for s in served.stages for g in s.gpus}
    planned = layout(served, device, f"{SHM_PREFIX}{os.getpid()}-", defaults, ALL_INLINE, gpu_map)
    return planned.workers()[group]


def _index(plan: Plan, group: str) -> int:
    for i, g in enumerate(plan.groups):
        if g.name == group:
            return i
    raise LaunchError(f"the plan has no process group '{group}'; it has "
                      f"{', '.join(g.name for g in plan.groups)}")


def request_failure(exc: BaseException, where: str) -> RequestFailed:
    """What a failed call downstream of `where` means for the request: a stage's own error as it
    was raised (Ray wraps it: `cause`), a Ray failure (a replica died, none is up) as 503."""
    cause = getattr(exc, "cause", None)
    cause = cause if isinstance(cause, BaseException) else exc
    if isinstance(cause, RequestFailed):
        return cause
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    what = f"{where}: {type(cause).__name__}{': ' + text if text else ''}"
    if type(cause).__module__.startswith("ray."):
        return WorkerDied(what)
    return StageFailed(what)


@dataclasses.dataclass(frozen=True)
class _UpstreamFailed:
    error: RequestFailed


class GroupReplica:
    """One replica of process group `group`: builds its stages in `__init__` (raising
    `LaunchError` when a stage cannot be built), then serves `run` for any number of requests at
    once, as a worker process does. `upstream`: a Ray Serve handle per group upstream. Its
    worker lives as long as the process (a replica's)."""

    def __init__(self, plan: Plan, group: str, upstream: Mapping[str, Any],
                 build_timeout: float | None = None,
                 factory_defaults: Mapping[str, Any] | None = None) -> None:
        self.name = group
        wanted = upstream_groups(plan)[group]
        missing = [g for g in wanted if g not in upstream]
        if missing:
            raise LaunchError(f"process group '{group}' needs a handle to {', '.join(missing)}")
        self.upstream = {g: upstream[g] for g in wanted}
        own = set(plan.groups[_index(plan, group)].stages)
        served = as_served(plan)
        try:
            preflight.check(dataclasses.replace(
                served, stages=tuple(s for s in served.stages if s.name in own)))
        except preflight.SetupError as exc:
            raise LaunchError(str(exc)) from None
        spec = group_spec(plan, group, factory_defaults)
        self.entry = tuple(s.name for s in spec.stages if s.predecessors == (CLIENT,))
        self.channel = hosted(spec, build_timeout)
        self._ids = itertools.count()

    def check(self) -> None:
        """Raise `LaunchError` when the worker has stopped (Ray Serve's health check: it then
        replaces the replica)."""
        if self.channel.stopped is not None:
            raise LaunchError(self.channel.stopped)

    async def run(self, payload: Mapping[str, Any]) -> AsyncIterator[Deliver | Result]:
        """Run one request through this group: yields what it hands downstream, in order;
        raises a `RequestFailed` when a stage here or upstream fails. Closing it early cancels
        the request here and upstream."""
        request_id = next(self._ids)
        outbox = self.channel.open(request_id)
        pulls = [asyncio.ensure_future(self._pull(g, h, payload, request_id, outbox))
                 for g, h in self.upstream.items()]
        over = False
        try:
            for stage in self.entry:
                self.channel.give(Deliver(stage, request_id, CLIENT, None, True,
                                          Packed(None, (), dict(payload))))
            while True:
                message = await outbox.get()
                match message:
                    case Deliver():
                        yield message
                    case Result(last=last):
                        yield message
                        if last:  # the request's end (the worker sends no Released after it)
                            over = True
                            return
                    case Released() | PassedOn():
                        over = True
                        return
                    case StageError(stage=stage, message=text):
                        over = True  # the worker has dropped it already
                        raise StageFailed(f"stage '{stage}' in process group '{self.name}' "
                                          f"failed: {text}")
                    case Undeliverable(source=source):
                        raise WorkerDied(f"process group '{self.name}' could not hand on from "
                                         f"'{source}'")
                    case _UpstreamFailed(error=error):
                        raise error
        finally:
            for pull in pulls:
                pull.cancel()
            if not over:
                self.channel.give(Cancel(request_id))
            self.channel.close(request_id)

    async def _pull(self, group: str, handle: Any, payload: Mapping[str, Any], request_id: int,
                    outbox: asyncio.Queue) -> None:
        """Feed what `group` yields for this request to this group's stages."""
        try:
            async for message in handle.options(stream=True).run.remote(dict(payload)):
                self.channel.give(dataclasses.replace(message, request_id=request_id))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure upstream fails the request here
            outbox.put_nowait(_UpstreamFailed(request_failure(exc, f"process group '{group}'")))
