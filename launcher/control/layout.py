"""From a `Plan` to what the backend starts: one worker spec per copy of each process group and
per tensor-parallel rank, grouped into units that restart together (a copy is a unit of its own:
it dies and restarts alone). Placement is the plan's; nothing here re-decides it."""

from __future__ import annotations

import logging
import math
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only named: the fork server preloads this module, and planner is ortools
    from planner import Plan

from launcher.wire.backend import Unit
from launcher.errors import LaunchError
from launcher.wire.specs import CLIENT, StageSpec, Successor, TpSpec, WorkerSpec


@dataclass(frozen=True)
class Layout:
    units: tuple[Unit, ...]
    home: Mapping[str, str]  # stage -> the process group (or TP rank 0) receiving its payloads
    entry: tuple[str, ...]  # stages a request is submitted to
    # process group -> its copies' process names (`ProcessGroup.copy_names`); a group with one
    # copy is its own process. A request is bound to one copy of each (`copies.CopyChooser`).
    copies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def workers(self) -> dict[str, WorkerSpec]:
        return {w.name: w for u in self.units for w in u.workers}

    def unit_of(self) -> dict[str, str]:
        return {w.name: u.name for u in self.units for w in u.workers}


def resolve_device(requested: str) -> tuple[str, str | None]:
    """('cpu' | 'cuda', a note for the operator or None)."""
    if requested not in ("auto", "cpu", "cuda"):
        raise LaunchError(f"device must be auto, cpu or cuda, not {requested!r}")
    if requested == "cpu":
        return "cpu", None
    try:
        import torch
    except ImportError:  # stages on onnxruntime or numpy need no torch; CUDA here is torch's
        if requested == "cuda":
            raise LaunchError("device cuda was requested but torch is not installed (pip install "
                              "-c constraints.txt -e '.[serve]' brings it)") from None
        return "cpu", None

    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise LaunchError("device cuda was requested but torch sees no CUDA device")
    if available:
        return "cuda", None
    return "cpu", ("CUDA is not available: running every stage on CPU "
                   "(GPU ids and memory fractions are not enforced)")


def gpu_compute_percentage(shares: Iterable[float | None]) -> int | None:
    """CUDA MPS's active-thread percentage for a process whose GPU stages take `shares` of the
    GPU's compute (None: a stage with no share takes the whole GPU, so the process does)."""
    shares = list(shares)
    if not shares or any(s is None for s in shares):
        return None
    # Rounded up: a stage never gets less than its share; MPS takes 1-100.
    return max(1, min(100, math.ceil(round(100 * sum(shares), 6))))


def layout(plan: Plan, device: str, shm_prefix: str, defaults: Mapping[str, Any],
           inline_bytes: int = 0, gpu_map: Mapping[int, int] | None = None,
           log_level: int = logging.WARNING) -> Layout:
    """Which process hosts and receives each stage, and the spec of every process.

    `gpu_map`: the CUDA device each of the plan's logical GPUs is (a replica's physical GPUs on
    its node; on Ray, 0 for all, since Ray shows each actor only the GPU it assigned it). By
    default a logical GPU id is its device index. `log_level`: what every worker logs."""
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
    succs: dict[str, list[Successor]] = {s.name: [] for s in plan.stages}
    for h in plan.handoffs:
        preds[h.target].append(h.source)
        succs[h.source].append(Successor(h.target, h.streaming, home[h.target],
                                         copied=plan.copies_of(h.target) > 1))
    order = [s.name for s in plan.stages]
    entry = tuple(plan.entry_stages) or tuple(s for s in order if not preds[s])
    cuda = device == "cuda"

    def cuda_index(logical: int | None) -> int | None:
        if logical is None or not cuda:
            return None
        return logical if gpu_map is None else gpu_map[logical]

    if cuda:
        import torch

        needed = {cuda_index(g) for s in plan.stages for g in s.gpus}
        needed |= {cuda_index(g) for grp in plan.groups for g in grp.devices}
        count = torch.cuda.device_count()
        if needed and max(needed) >= count:
            raise LaunchError(f"the plan uses GPU {max(needed)} but only {count} CUDA "
                              "device(s) are visible")

    def spec(name: str, rank: int | None = None, copy_gpu: int | None = None) -> StageSpec:
        hosted_by = home[name]
        s = plan.stage(name)
        # A copy the plan places on its own GPU (`ProcessGroup.devices`) runs its stages there.
        gpu = cuda_index(copy_gpu if copy_gpu is not None and s.gpus
                         else s.gpus[rank or 0] if s.gpus else None)
        return StageSpec(
            name=name, factory=s.factory, kwargs=tuple(s.factory_kwargs().items()),
            defaults=tuple(defaults.items()),
            predecessors=tuple(sorted(preds[name], key=order.index)) or (CLIENT,),
            successors=tuple(succs[name]), device=f"cuda:{gpu}" if gpu is not None else "cpu",
            remote_inputs=any(home[p] != hosted_by for p in preds[name]),
            threads=s.threads,
        )

    units: list[Unit] = []
    for group in plan.groups:
        stages = tuple(s for s in order if s in group.stages)
        gpu = cuda_index(group.gpu)
        fractions = [plan.stage(s).fraction for s in stages
                     if plan.stage(s).gpus and plan.stage(s).fraction is not None]
        shares = [plan.stage(s).gpu_compute_fraction for s in stages if plan.stage(s).gpus]
        # Each copy a process of its own on its GPU (the group's, or the one the plan names for
        # that copy) and its share of the group's pinned CPUs, with the group's fraction and
        # compute share: the planner counted the fraction once per copy on the GPU it runs on.
        units += [Unit(name, (WorkerSpec(
            name=name, stages=tuple(spec(s, copy_gpu=on) for s in stages),
            gpu=cuda_index(on),
            memory_fraction=round(sum(fractions), 6) if gpu is not None and fractions else None,
            shm_prefix=shm_prefix, inline_bytes=inline_bytes,
            gpu_compute_percentage=gpu_compute_percentage(shares) if gpu is not None else None,
            cpus=cpus, log_level=log_level,
        ),)) for name, on, cpus in zip(group.copy_names(), group.copy_gpus(), group.copy_cpus())]
    backend = "nccl" if cuda else "gloo"
    ranks: dict[str, list[WorkerSpec]] = {}
    for tp in sorted(plan.tp_processes, key=lambda t: t.rank):
        s = plan.stage(tp.stage)
        gpu = cuda_index(tp.gpu)
        ranks.setdefault(tp.stage, []).append(WorkerSpec(
            name=tp.name, stages=(spec(tp.stage, tp.rank),), gpu=gpu,
            memory_fraction=s.fraction if gpu is not None else None, shm_prefix=shm_prefix,
            inline_bytes=inline_bytes, tp=TpSpec(tp.rank, s.tp_size, "", backend),
            gpu_compute_percentage=gpu_compute_percentage([s.gpu_compute_fraction])
            if gpu is not None else None, log_level=log_level,
        ))
    units += [Unit(f"tp:{stage}", tuple(workers)) for stage, workers in ranks.items()]
    copies = {g.name: g.copy_names() for g in plan.groups}
    return Layout(tuple(units), home, entry, copies)


def with_fresh_rendezvous(unit: Unit) -> Unit:
    """The unit with a fresh torch.distributed rendezvous address for its ranks (new per start:
    a restarted unit must not meet its dead incarnation's port). Its ranks run on one machine."""
    if not unit.workers or unit.workers[0].tp is None:
        return unit
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        init_method = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    return replace(unit, workers=tuple(
        replace(w, tp=replace(w.tp, init_method=init_method)) for w in unit.workers))
