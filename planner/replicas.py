"""Pack replicas of a solved placement onto a cluster (CP-SAT), or prove how many fit.

A replica is the solved plan: its GPU ids are logical. Each replica lives on one node (its
handoffs use shared memory) and maps its logical GPUs to distinct physical GPUs there; on every
physical GPU the fractions of all replicas add up to at most the limit (a logical GPU whose stages
declare no fraction takes its physical GPU whole: sharing it would break the single-replica rule
that every stage on a shared GPU declares a fraction); every copy of a process group takes as
many CPUs as its widest stage has threads (one by default) where the node
says how many it has.

Replicas never span nodes, so nodes are independent: the most replicas a node holds is proved by
CP-SAT once per kind of node (GPUs, CPUs), and the cluster's maximum is their sum. Placing N
replicas: `pack` fills the fewest nodes, the biggest first, each with the fewest GPUs; `spread`
gives every node and GPU an even share. Within a node, CP-SAT places each replica's logical GPUs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

from ortools.sat.python import cp_model

from planner.cluster import Cluster, Node
from planner.plan import Plan
from planner.problem import SCALE, to_units

Strategy = Literal["pack", "spread"]
TIME_LIMIT_S = 10.0


def stages_on_gpus(cluster: Cluster) -> bool:
    """Whether a replica's GPU stages run on GPUs on `cluster`: the one rule `planner solve
    --replicas` and `planner serve --replicas` both count by. A cluster with no GPU at all runs
    them on CPU (as the launcher does), so a replica needs only its CPUs there."""
    return cluster.gpu_count > 0


@dataclass(frozen=True)
class Demand:
    """What one replica needs: per logical GPU the memory share (units), and CPUs."""

    gpus: tuple[tuple[int, int], ...]  # (logical GPU id, fraction units)
    cpus: int
    limit: int  # per physical GPU, units

    @classmethod
    def of(cls, plan: Plan, gpus: bool = True) -> Demand:
        """`gpus=False`: the cluster has no GPUs and GPU stages run on CPU, so a replica needs
        only its CPUs."""
        limit = to_units(plan.gpus[0].limit) if plan.gpus else SCALE
        if not gpus:
            return cls((), plan.cpu_demand(), limit)
        per_gpu = []
        for g in plan.gpus:
            on = [plan.stage(s) for s in plan.gpu_stages(g.id)]
            whole = any(s.fraction is None for s in on)
            per_gpu.append((g.id, limit if whole else min(limit, to_units(g.total))))
        return cls(tuple(per_gpu), plan.cpu_demand(), limit)


@dataclass(frozen=True)
class Replica:
    index: int
    node: str
    gpus: tuple[tuple[int, int], ...]  # (logical GPU, physical GPU index on the node)


@dataclass(frozen=True)
class GpuLoad:
    node: str
    id: int
    total: float  # fraction of the GPU's memory the replicas on it take
    limit: float
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class NodeCapacity:
    node: Node
    most: int  # replicas it holds, proved (unless `proved` is False)
    proved: bool
    by_gpu: int | None  # the most its GPUs alone allow (CPUs ignored; None: needs no GPU)
    by_cpu: int | None  # the most its CPUs allow (None: not limited)


@dataclass(frozen=True)
class Packing:
    requested: int | None  # None: as many as fit
    replicas: tuple[Replica, ...]
    loads: tuple[GpuLoad, ...]
    capacity: tuple[NodeCapacity, ...]
    demand: Demand

    @property
    def most(self) -> int:
        return sum(c.most for c in self.capacity)

    @property
    def proved(self) -> bool:
        return all(c.proved for c in self.capacity)

    @property
    def fits(self) -> bool:
        """The replicas asked for fit; `max` (None) asks for at least one."""
        return (1 if self.requested is None else self.requested) <= self.most


def _solver() -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.random_seed = 0
    s.parameters.max_time_in_seconds = TIME_LIMIT_S
    return s


@functools.lru_cache(maxsize=256)
def _place_on_node(demand: Demand, gpus: int, k: int, strategy: Strategy
                   ) -> tuple[int, tuple[tuple[tuple[int, int], ...], ...] | None]:
    """k replicas on one node with `gpus` GPUs: (cp_model status, per replica the logical ->
    physical GPU map) or None when they do not fit."""
    logical = [l for l, _ in demand.gpus]
    if k == 0 or not logical:  # nothing to place on GPUs (none asked for, or no replica)
        return cp_model.OPTIMAL, tuple(() for _ in range(k))
    if len(logical) > gpus:
        return cp_model.INFEASIBLE, None
    m = cp_model.CpModel()
    z = {(r, l, g): m.new_bool_var("") for r in range(k) for l in logical for g in range(gpus)}
    for r in range(k):
        for l in logical:
            m.add_exactly_one(z[r, l, g] for g in range(gpus))
        for g in range(gpus):
            m.add_at_most_one(z[r, l, g] for l in logical)  # a replica's GPUs are distinct
    load = []
    for g in range(gpus):
        used = sum(d * z[r, l, g] for r in range(k) for l, d in demand.gpus)
        m.add(used <= demand.limit)
        load.append(used)
    # Replicas are interchangeable: order them by the physical GPU of their first logical GPU.
    first = [sum(g * z[r, logical[0], g] for g in range(gpus)) for r in range(k)]
    for a, b in zip(first, first[1:]):
        m.add(a <= b)
    busy = [m.new_bool_var("") for _ in range(gpus)]
    for g in range(gpus):
        on_g = [z[r, l, g] for r in range(k) for l in logical]
        for v in on_g:
            m.add_implication(v, busy[g])
        m.add_bool_or(on_g).only_enforce_if(busy[g])  # busy exactly when something is on it
    for a, b in zip(busy, busy[1:]):  # GPUs are interchangeable too: use the first ones first
        m.add(a >= b)
    if strategy == "pack":
        m.minimize(sum(busy))
    else:
        peak = m.new_int_var(0, demand.limit, "peak")
        for used in load:
            m.add(used <= peak)
        m.minimize(peak * (gpus + 1) - sum(busy))  # the lowest peak, then the most GPUs
    solver = _solver()
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return status, None
    maps = tuple(tuple((l, next(g for g in range(gpus) if solver.boolean_value(z[r, l, g])))
                       for l in logical) for r in range(k))
    return status, maps


def _upper_bound(demand: Demand, node: Node) -> int:
    if not demand.gpus:
        return node.cpus // demand.cpus if node.cpus is not None else 1 << 16
    total = sum(d for _, d in demand.gpus)
    bound = node.gpus * demand.limit // total if total else 1 << 16
    for _, d in demand.gpus:
        bound = min(bound, node.gpus * (demand.limit // d if d else 1 << 16))
    return bound


@functools.lru_cache(maxsize=64)
def node_capacity(demand: Demand, node: Node) -> NodeCapacity:
    """The most replicas `node` holds: CP-SAT proves k fits and k + 1 does not."""
    by_cpu = node.cpus // demand.cpus if node.cpus is not None else None
    if demand.gpus and len(demand.gpus) > node.gpus:
        return NodeCapacity(node, 0, True, 0, by_cpu)
    by_gpu = _upper_bound(demand, node)
    proved = True
    if demand.gpus:
        k = by_gpu
        while k > 0:
            status, maps = _place_on_node(demand, node.gpus, k, "pack")
            if maps is not None:
                break
            proved &= status == cp_model.INFEASIBLE
            k -= 1
        by_gpu = k
    else:
        by_gpu = None  # a replica needs no GPU: only CPUs limit it
    most = min(b for b in (by_gpu, by_cpu, 1 << 16) if b is not None)
    return NodeCapacity(node, most, proved, by_gpu, by_cpu)


def _counts(capacity: list[NodeCapacity], n: int, strategy: Strategy) -> list[int]:
    counts = [0] * len(capacity)
    if strategy == "pack":
        order = sorted(range(len(capacity)), key=lambda i: -capacity[i].most)  # stable
        for i in order:
            counts[i] = min(capacity[i].most, n - sum(counts))
    else:  # one at a time to the node with the lowest share of its capacity
        for _ in range(n):
            open_ = [i for i in range(len(capacity)) if counts[i] < capacity[i].most]
            i = min(open_, key=lambda i: ((counts[i] + 1) / capacity[i].most, counts[i], i))
            counts[i] += 1
    return counts


def pack(plan: Plan, cluster: Cluster, replicas: int | None,
         strategy: Strategy = "pack", gpus: bool | None = None) -> Packing:
    """Place `replicas` copies of `plan` (None: as many as fit) on `cluster`. `gpus`: whether
    its GPU stages take GPUs; by default `stages_on_gpus(cluster)` (on a cluster without GPUs
    they run on CPU and only CPUs count)."""
    demand = Demand.of(plan, stages_on_gpus(cluster) if gpus is None else gpus)
    capacity = [node_capacity(demand, node) for node in cluster.nodes]
    most = sum(c.most for c in capacity)
    n = most if replicas is None else replicas
    if n > most:
        return Packing(replicas, (), (), tuple(capacity), demand)
    counts = _counts(capacity, n, strategy)
    placed: list[Replica] = []
    loads: list[GpuLoad] = []
    for cap, k in zip(capacity, counts):
        _, maps = _place_on_node(demand, cap.node.gpus, k, strategy)
        assert maps is not None, "a node took fewer replicas than it was proved to hold"
        first = len(placed)
        for r, mapping in enumerate(maps):
            placed.append(Replica(first + r, cap.node.name, mapping))
        share = dict(demand.gpus)
        for g in range(cap.node.gpus):
            on = [first + r for r, mapping in enumerate(maps) for _, p in mapping if p == g]
            total = sum(share[l] for mapping in maps for l, p in mapping if p == g)
            loads.append(GpuLoad(cap.node.name, g, total / SCALE, demand.limit / SCALE,
                                 tuple(on)))
    return Packing(replicas, tuple(placed), tuple(loads), tuple(capacity), demand)


def fraction_hint(plan: Plan) -> dict[str, float] | None:
    """Fractions (stage -> value) that let two replicas share every GPU: each logical GPU over
    half the limit is scaled to fit in half. None when none is over, or a TP stage is involved
    (its per-rank fraction is not the planner's to split)."""
    demand = Demand.of(plan)
    half = demand.limit / SCALE / 2
    out: dict[str, float] = {}
    for l, d in demand.gpus:
        if 2 * d <= demand.limit:
            continue
        on = [plan.stage(s) for s in plan.gpu_stages(l)]
        if any(s.is_tp for s in on) or any(g.devices for g in plan.groups):
            return None
        known = {s.name: s.fraction or 0.0 for s in on}
        total = sum(known.values())
        if not total or any(v == 0.0 for v in known.values()):
            out.update({s: math.floor(half / len(on) * 1000) / 1000 for s in known})
        else:
            out.update({s: math.floor(v / total * half * 1000) / 1000 for s, v in known.items()})
    return out or None
