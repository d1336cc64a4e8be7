"""One placement question: a pipeline, its declared topology and the user's requests."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from planner.compute import Compute
from planner.pipeline import Pipeline, StageConfig
from planner.plan import Request
from planner.requests import PlacementRequest
from planner.topology import Baseline, tp_rank_names

SCALE = 1_000_000  # fractions as integers; exact for any value with up to six decimals


def to_units(fraction: float) -> int:
    return round(fraction * SCALE)


@dataclass(frozen=True)
class Problem:
    pipeline: Pipeline
    baseline: Baseline
    requests: tuple[PlacementRequest, ...]
    any_option: bool  # recommendations apply only when a placement option is present
    compute: Compute | None = None  # threads and copies as asked (None: as the config declares)
    cpus: int | None = None  # the node's CPUs that threads are counted against (None: unknown)
    cpu_ids: tuple[int, ...] | None = None  # which CPUs those are, that pins may name
    # Requests not taken because another names the same stage: (stage, request as given).
    duplicates: tuple[tuple[str, Request], ...] = ()

    @functools.cached_property
    def threads(self) -> dict[str, int]:
        """Every stage's CPU threads."""
        if self.compute is not None:
            return dict(self.compute.threads)
        return {s.name: s.threads or 1 for s in self.pipeline.stages}

    def copies_of(self, process: str) -> int:
        if self.compute is not None:
            return self.compute.copies_of(process)
        return dict(self.pipeline.process_copies).get(process, 1)

    def cpus_of(self, process: str) -> tuple[int, ...]:
        if self.compute is not None:
            return self.compute.cpus_of(process)
        return dict(self.pipeline.process_cpus).get(process, ())

    def devices_of(self, process: str) -> tuple[int, ...]:
        """The GPU of each copy of `process` where the config names one (`gpus`, sglang-omni's
        `replica_devices`); () where every copy runs on its stages' declared GPU."""
        if self.compute is not None:
            return self.compute.devices_of(process)
        return dict(self.pipeline.process_gpus).get(process, ())

    def copies_on(self, stage: str, process: str | None, gpu: int) -> int:
        """How many copies of `stage` hold memory on `gpu` when it runs in `process` (None: a
        TP stage, whose ranks count once on each of their GPUs): the copies the config puts
        there, else every copy of the process when the stage is declared on that GPU."""
        spec = self._specs[stage]
        if not spec.on_gpu:
            return 0
        if process is None or spec.is_tp:
            return int(gpu in spec.gpus)
        devices = self.devices_of(process)
        if devices:
            return devices.count(gpu)
        return self.copies_of(process) if gpu in spec.gpus else 0

    @functools.cached_property
    def request_of(self) -> dict[str, PlacementRequest]:
        return {r.stage: r for r in self.requests}

    @functools.cached_property
    def target(self) -> dict[str, str]:
        """Where each non-TP stage is asked to run: its request, else its declared process."""
        out = dict(self.baseline.process)
        for r in self.requests:
            out[r.stage] = r.process
        return out

    @functools.cached_property
    def tp_stages(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.pipeline.stages if s.is_tp)

    @functools.cached_property
    def rank_names(self) -> dict[str, list[str]]:
        """Rank process name -> TP stages producing it (two entries = a conflict)."""
        out: dict[str, list[str]] = {}
        for s in self.tp_stages:
            for n in tp_rank_names(self.pipeline, s):
                out.setdefault(n, []).append(s)
        return out

    @functools.cached_property
    def handoffs(self) -> dict[tuple[str, str], tuple[str, ...]]:
        return self.pipeline.handoffs()

    def touches_tp(self, edge: tuple[str, str]) -> bool:
        return edge[0] in self.tp_stages or edge[1] in self.tp_stages

    def crosses_in_baseline(self, edge: tuple[str, str]) -> bool:
        if self.touches_tp(edge):
            return True
        return self.baseline.process[edge[0]] != self.baseline.process[edge[1]]

    @functools.cached_property
    def splittable_edges(self) -> tuple[tuple[str, str], ...]:
        """Edges that a request may newly split: the only ones checked and recommended for."""
        return tuple(e for e in self.handoffs if not self.crosses_in_baseline(e))

    @functools.cached_property
    def declared_unsafe_splits(self) -> tuple[tuple[str, str], ...]:
        """Unsafe handoffs that an overlay or variant of a built-in card splits (it moved a stage
        away from the card's declared topology): checked like a request, never recommended for.
        Empty for a complete pipeline, whose declared topology is the baseline. Edges touching a
        TP stage are left out, as for requests."""
        if not self.pipeline.over_card:
            return ()
        return tuple(e for e in self.handoffs if not self.touches_tp(e)
                     and self.crosses_in_baseline(e)
                     and self.pipeline.unsupported_reason(e) is not None)

    @functools.cached_property
    def unlisted_declared_splits(self) -> tuple[tuple[str, str], ...]:
        """Handoffs a complete pipeline's own layout splits without listing them in
        `process_safe_edges`: the baseline, so not checked, only warned about."""
        if self.pipeline.over_card:
            return ()
        return tuple(e for e in self.handoffs if not self.touches_tp(e)
                     and self.crosses_in_baseline(e)
                     and self.pipeline.unsupported_reason(e) is not None)

    @functools.cached_property
    def recommendations(self) -> dict[str, list[tuple[tuple[str, str], int]]]:
        """GPU stage -> [(edge, fraction units)] from edges that a request may newly split."""
        out: dict[str, list[tuple[tuple[str, str], int]]] = {}
        if not self.any_option:
            return out
        splittable = set(self.splittable_edges)
        for res in self.pipeline.edge_resources:
            if res.edge not in splittable:
                continue
            for stage, value in res.fractions:
                if self.pipeline.stage(stage).on_gpu:
                    out.setdefault(stage, []).append((res.edge, to_units(value)))
        return out

    @functools.cached_property
    def _specs(self) -> dict[str, StageConfig]:
        return {s.name: s for s in self.pipeline.stages}

    @functools.cached_property
    def _on_gpu(self) -> dict[int, tuple[str, ...]]:
        """GPU -> the stages that may hold memory on it: declared there, or in a process
        (declared or requested) that puts a copy there; pipeline order."""
        out: dict[int, list[str]] = {}
        for s in self.pipeline.stages:
            if not s.on_gpu:
                continue
            if s.is_tp:
                on = set(s.gpus)
            else:
                procs = dict.fromkeys((self.baseline.process[s.name], self.target[s.name]))
                on = {g for p in procs for g in (self.devices_of(p) or s.gpus)}
            for g in on:
                out.setdefault(g, []).append(s.name)
        return {g: tuple(v) for g, v in sorted(out.items())}

    @property
    def gpu_ids(self) -> tuple[int, ...]:
        return tuple(self._on_gpu)

    def stages_on(self, gpu: int) -> tuple[str, ...]:
        return self._on_gpu.get(gpu, ())

    @property
    def limit_units(self) -> int:
        return to_units(self.pipeline.placement.max_total_gpu_memory_fraction_per_gpu)
