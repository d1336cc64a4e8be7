"""What one replica asks Ray for: a placement group with a bundle per logical GPU and a bundle per
CPU-only process, and which bundle each worker process runs in.

Pure (no Ray import), so the arithmetic is tested without a cluster.

- A logical GPU's bundle holds the GPU share of every process on it and one CPU per process, so
  the processes that share a logical GPU share one physical GPU (Ray puts a fractional bundle on
  one GPU and shows each actor in it that GPU).
- The share is the replica's use of the GPU over the planner's limit: `used / limit`. Ray never
  puts more than 1.0 on a GPU, so what lands on one physical GPU adds up to at most the limit,
  whatever Ray packs together; a logical GPU with a stage that declares no fraction takes 1.0.
- On a cluster without GPUs (`Demand.gpus` empty: GPU stages run on CPU) every process gets a CPU
  bundle of its own.
Ray counts fractional resources in steps of 1e-4: shares are rounded to that step, and an actor's
share is rounded down so that the actors of a bundle never ask for more than the bundle holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner import Plan

STEP = 1e-4  # Ray's resource granularity


@dataclass(frozen=True)
class Bundle:
    cpus: int
    gpu: float  # 0.0: a CPU-only bundle
    processes: tuple[str, ...]
    logical_gpu: int | None = None

    def resources(self) -> dict[str, float]:
        out: dict[str, float] = {"CPU": float(self.cpus)}
        if self.gpu:
            out["GPU"] = self.gpu
        return out


@dataclass(frozen=True)
class ActorShare:
    bundle: int  # index in the placement group
    cpus: float
    gpus: float


@dataclass(frozen=True)
class ReplicaBundles:
    bundles: tuple[Bundle, ...]
    actors: dict[str, ActorShare]  # worker process name -> its bundle and resources


def processes_by_gpu(plan: Plan) -> dict[str, int | None]:
    """Every worker process of the plan (each copy of each process group, tensor-parallel ranks)
    and the logical GPU it runs on (None: CPU)."""
    out: dict[str, int | None] = {c: on for g in plan.groups
                                  for c, on in zip(g.copy_names(), g.copy_gpus())}
    out |= {t.name: t.gpu for t in plan.tp_processes}
    return out


def replica_bundles(plan: Plan, gpu_units: tuple[tuple[int, int], ...], limit: int
                    ) -> ReplicaBundles:
    """`gpu_units`, `limit`: the replica's demand per logical GPU and the per-GPU limit, in the
    planner's units (`Packing.demand`); empty on a cluster without GPUs."""
    share = dict(gpu_units)
    bundles: list[Bundle] = []
    actors: dict[str, ActorShare] = {}
    on_gpu: dict[int, list[str]] = {}
    for process, gpu in processes_by_gpu(plan).items():
        if gpu is not None and gpu in share:
            on_gpu.setdefault(gpu, []).append(process)
        else:
            actors[process] = ActorShare(len(bundles), 1.0, 0.0)
            bundles.append(Bundle(1, 0.0, (process,)))
    for gpu, processes in sorted(on_gpu.items()):
        whole = round(min(1.0, share[gpu] / limit), 4)
        each = math.floor(whole / len(processes) / STEP) * STEP
        for p in processes:
            actors[p] = ActorShare(len(bundles), 1.0, round(each, 4))
        bundles.append(Bundle(len(processes), whole, tuple(processes), gpu))
    return ReplicaBundles(tuple(bundles), actors)
