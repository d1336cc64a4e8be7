"""Turn a solved assignment into the frozen Plan the renderers and the launcher read."""

from __future__ import annotations

from planner.plan import (
    CpuUsage,
    GpuUsage,
    Handoff,
    Plan,
    PlannedStage,
    PlanWarning,
    ProcessGroup,
    TpProcess,
)
from planner.problem import SCALE, Problem
from planner.solver import Assignment
from planner.topology import tp_rank_names


def groups_of(problem: Problem, process: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
    """Process groups in the order of their first stage; stages in pipeline order."""
    members: dict[str, list[str]] = {}
    for s in problem.pipeline.stage_names:
        if s in process:
            members.setdefault(process[s], []).append(s)
    return [(name, tuple(stages)) for name, stages in members.items()]


def build_plan(problem: Problem, a: Assignment) -> tuple[Plan, tuple[PlanWarning, ...], bool]:
    """The Plan, the fraction warnings, and whether anything differs from the declared topology."""
    pl = problem.pipeline
    stages = []
    for s in pl.stages:
        units = a.fraction_units.get(s.name)
        source = None
        if s.fraction is not None:
            source = "declared"
        elif units is not None:
            source = "recommended"
        stages.append(PlannedStage(
            name=s.name,
            process=a.process.get(s.name) or (s.process or s.name),
            gpus=s.gpus,
            tp_size=s.tp_size,
            fraction=s.fraction if s.fraction is not None else (
                None if units is None else units / SCALE),
            fraction_source=source,
            factory=s.factory,
            args=s.args,
            threads=problem.threads[s.name],
            gpu_compute_fraction=s.gpu_compute_fraction if s.on_gpu else None,
            host_memory_mib=s.host_memory_mib,
        ))

    declared = {(name, members) for name, members in groups_of(problem, problem.baseline.process)}
    declared_copies, declared_cpus = dict(pl.process_copies), dict(pl.process_cpus)
    groups = []
    for name, members in groups_of(problem, a.process):
        gpus = sorted({g for m in members for g in pl.stage(m).gpus})
        copies, cpus = problem.copies_of(name), problem.cpus_of(name)
        devices = problem.devices_of(name) if gpus else ()
        if gpus and devices == (gpus[0],) * len(devices):
            devices = ()  # every copy where its stages are declared: nothing to say per copy
        # Changed: other members or name, or threads, copies or CPUs other than declared.
        changed = ((name, members) not in declared or copies != declared_copies.get(name, 1)
                   or cpus != declared_cpus.get(name, ())
                   or any(problem.threads[m] != (pl.stage(m).threads or 1) for m in members))
        groups.append(ProcessGroup(name=name, stages=members,
                                   gpu=devices[0] if devices else gpus[0] if gpus else None,
                                   changed=changed, copies=copies, cpus=cpus, devices=devices))
    tp = []
    for s in problem.tp_stages:
        for rank, name in enumerate(tp_rank_names(pl, s)):
            tp.append(TpProcess(stage=s, rank=rank, name=name, gpu=pl.stage(s).gpus[rank]))

    by_name = {s.name: s for s in stages}
    gpus = []
    for g in problem.gpu_ids:
        copies = {s: problem.copies_on(s, a.process.get(s), g) for s in problem.stages_on(g)}
        on = [s for s, n in copies.items() if n]
        if not on:
            continue
        procs = ([grp.name for grp in groups if g in grp.copy_gpus()]
                 + [t.name for t in tp if t.gpu == g])
        total = sum(copies[s] * round((by_name[s].fraction or 0) * SCALE) for s in on)
        missing = ()
        if len(procs) >= 2 and pl.placement.require_memory_fraction_for_colocation:
            missing = tuple(sorted(s for s in on if by_name[s].fraction is None))
        gpus.append(GpuUsage(id=g, total=round(total / SCALE, 6),
                             limit=pl.placement.max_total_gpu_memory_fraction_per_gpu,
                             processes=tuple(procs), missing_fraction=missing))

    def proc(s: str) -> str | None:
        return None if s in problem.tp_stages else a.process[s]

    handoffs = tuple(
        Handoff(source=u, target=v, kinds=kinds,
                crosses=problem.touches_tp((u, v)) or proc(u) != proc(v))
        for (u, v), kinds in problem.handoffs.items())
    targets = {h.target for h in handoffs}
    sources = {h.source for h in handoffs}

    warnings = []
    for u, v in problem.unlisted_declared_splits:
        if a.process[u] != a.process[v]:
            warnings.append(PlanWarning(
                code="declared-split",
                message=(f"{u} -> {v} crosses processes as {pl.source or pl.name} declares it "
                         f"({u} in {a.process[u]}, {v} in {a.process[v]}), but {pl.name} does not "
                         f"list it in process_safe_edges ({pl.unsupported_reason((u, v))}); the "
                         f"declared topology is the baseline, so it is kept as declared"),
                edge=(u, v)))
    newly = [e for e in problem.splittable_edges if a.process[e[0]] != a.process[e[1]]]
    for res in pl.edge_resources:
        if res.edge not in newly:
            continue
        for stage, value in res.fractions:
            spec = pl.stage(stage)
            if spec.fraction is not None and spec.on_gpu and spec.fraction < value - 1e-9:
                warnings.append(PlanWarning(
                    code="fraction-below-recommendation",
                    message=(f"{stage} declares fraction {spec.fraction:g}, below the {value:g} that "
                             f"{pl.name} recommends when {res.edge[0]} -> {res.edge[1]} crosses "
                             f"processes; keeping {spec.fraction:g}"),
                    stage=stage))

    threads = problem.threads
    cpu = CpuUsage(
        threads=sum(grp.copies * threads[m] for grp in groups for m in grp.stages)
        + sum(threads[t.stage] for t in tp),
        cpus=problem.cpus,
        asked=problem.compute is not None and problem.compute.asked)
    if cpu.asked and cpu.oversubscribed:
        warnings.append(PlanWarning(
            code="cpu-oversubscribed",
            message=(f"the plan runs {cpu.threads} CPU threads, every copy counted, on "
                     f"{cpu.cpus} CPUs: its stages wait for cores whenever more than {cpu.cpus} "
                     f"are busy at once (fine for stages that take turns on a request; "
                     f"`planner tune` measures whether it pays)")))

    plan = Plan(
        model=pl.name,
        variant=pl.variant,
        stages=tuple(stages),
        groups=tuple(groups),
        tp_processes=tuple(tp),
        gpus=tuple(gpus),
        handoffs=handoffs,
        entry_stages=tuple(s for s in pl.stage_names if s not in targets),
        terminal_stages=tuple(s for s in pl.stage_names if s not in sources),
        sample_rate=pl.sample_rate,
        voices=pl.voices,
        word_timestamps=pl.word_timestamps,
        cpu=cpu,
        model_paths=pl.model_paths,
        placement=pl.placement,
        mps=pl.mps,
        carried=pl.carried,
    )
    changed = any(grp.changed for grp in groups) or any(
        s.fraction_source == "recommended" for s in stages) or any(
        threads[t] != (pl.stage(t).threads or 1) for t in problem.tp_stages)
    return plan, tuple(warnings), changed
