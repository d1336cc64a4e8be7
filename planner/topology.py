"""Process topology facts derived from a pipeline: declared (baseline) process names and TP ranks."""

from __future__ import annotations

from dataclasses import dataclass

from planner.pipeline import Pipeline


def tp_rank_names(pipeline: Pipeline, stage: str) -> tuple[str, ...]:
    s = pipeline.stage(stage)
    base = s.process or s.name
    return tuple(f"{base}_tp{r}" for r in range(s.tp_size))


@dataclass(frozen=True)
class Baseline:
    """The declared topology: the process of every non-TP stage, fused groups unified."""

    process: dict[str, str]  # non-TP stage -> process name
    fused_group: dict[str, tuple[str, ...]]  # stage -> its fused group (only for fused stages)

    def members(self, process: str) -> tuple[str, ...]:
        return tuple(s for s, p in self.process.items() if p == process)

    def runs_alone(self, stage: str) -> bool:
        return stage in self.process and self.members(self.process[stage]) == (stage,)


def declared_baseline(pipeline: Pipeline) -> Baseline:
    process = {s.name: s.process for s in pipeline.stages if not s.is_tp and s.process}
    fused_of: dict[str, tuple[str, ...]] = {}
    taken = set(process.values()) | {
        n for s in pipeline.stages if s.is_tp for n in tp_rank_names(pipeline, s.name)}
    for group in pipeline.fused_stages:
        declared = {process[m] for m in group}
        if len(declared) == 1:
            name = declared.pop()
        else:
            # Members disagree: the fused group gets a generated name that no other process uses.
            base = "fused_" + "_".join(group)
            name, n = base, 2
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            taken.add(name)
        for m in group:
            process[m] = name
            fused_of[m] = group
    return Baseline(process=process, fused_group=fused_of)
