"""Placement requests from the command line (`--isolate-stage`, `--stage-process`), parsed and resolved.

Request errors are diagnostics, not exceptions: every malformed, unknown or duplicate request is
reported at once, and the valid ones still go to the solver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.config import PROCESS_NAME_CHARS, name_problem
from planner.pipeline import Pipeline
from planner.plan import Diagnostic, Fix
from planner.topology import Baseline


@dataclass(frozen=True)
class PlacementRequest:
    stage: str  # resolved stage name
    process: str  # the process it is asked to run in
    alone: bool  # --isolate-stage: nothing else may share that process
    flag: str  # the flag as the user would type it, for messages and hints
    typed: str  # the name as typed (a role alias or the stage)
    noop: bool = False  # --isolate-stage on a stage that already runs alone


@dataclass(frozen=True)
class ParsedRequests:
    requests: tuple[PlacementRequest, ...]
    diagnostics: tuple[Diagnostic, ...]
    flags: tuple[str, ...]  # every placement flag as given, in order

    @property
    def any_option(self) -> bool:
        return bool(self.flags)


def isolate_flag(stage: str) -> str:
    return f"--isolate-stage {stage}"


def assign_flag(stage: str, process: str) -> str:
    return f"--stage-process {stage}={process}"


def resolve(pipeline: Pipeline, name: str) -> str | None:
    """Literal stage names win over role aliases."""
    if name in pipeline.stage_names:
        return name
    return pipeline.role_target(name)


def _unknown(pipeline: Pipeline, typed: str, flag: str) -> Diagnostic:
    roles = ", ".join(f"{a} -> {t}" for a, t in pipeline.roles) or "none"
    stages = ", ".join(pipeline.stage_names)
    first = pipeline.stage_names[-1]
    return Diagnostic(
        code="unknown-stage",
        message=f"`{flag}` names {typed!r}, which is neither a stage nor a role of {pipeline.name}",
        stages=(typed,),
        because=(f"the stages of {pipeline.name} are {stages}; its roles are {roles}",),
        hint=f"name one of those stages, e.g. `--isolate-stage {first}`",
    )


def _safe_name(text: str) -> str:
    """`text` with every character a process name cannot hold replaced by '_'."""
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", text).lstrip("-.=") or "process"


def parse_requests(pipeline: Pipeline, baseline: Baseline, isolate_stages: tuple[str, ...] | list[str],
                   stage_processes: tuple[str, ...] | list[str]) -> ParsedRequests:
    diags: list[Diagnostic] = []
    raw: list[tuple[str, str, str, bool, str]] = []  # (typed, stage, process, alone, flag)
    flags: list[str] = []

    for item in stage_processes:
        flag = f"--stage-process {item}"
        flags.append(flag)
        stage_part, sep, proc_part = item.partition("=")
        stage_part, proc_part = stage_part.strip(), proc_part.strip()
        if not sep or not stage_part or not proc_part:
            missing = "no '='" if not sep else ("an empty stage" if not stage_part else
                                               "an empty process")
            diags.append(Diagnostic(
                code="invalid-assignment",
                message=f"`{flag}` is not STAGE=PROCESS: it has {missing}",
                stages=(stage_part,) if stage_part else (),
                because=("--stage-process reads left to right: place STAGE in PROCESS",),
                hint=f"write it as `--stage-process {stage_part or 'vocoder'}="
                     f"{proc_part or 'vocoder'}`",
            ))
            continue
        bad_name = name_problem(proc_part, process=True)
        if bad_name is not None:
            diags.append(Diagnostic(
                code="invalid-assignment",
                message=f"`{flag}` names process {proc_part!r}, which is not a valid process name",
                stages=(stage_part,),
                because=(f"a process name uses {PROCESS_NAME_CHARS}",),
                hint=f"write it as `--stage-process {stage_part}={_safe_name(proc_part)}`",
            ))
            continue
        stage = resolve(pipeline, stage_part)
        if stage is None:
            diags.append(_unknown(pipeline, stage_part, flag))
            continue
        raw.append((stage_part, stage, proc_part, False, flag))

    for typed in isolate_stages:
        typed = typed.strip()
        flag = isolate_flag(typed)
        flags.append(flag)
        stage = resolve(pipeline, typed)
        if stage is None:
            diags.append(_unknown(pipeline, typed, flag))
            continue
        raw.append((typed, stage, stage, True, flag))

    by_stage: dict[str, list[tuple[str, str, str, bool, str]]] = {}
    for r in raw:
        by_stage.setdefault(r[1], []).append(r)

    requests: list[PlacementRequest] = []
    for stage in pipeline.stage_names:
        items = by_stage.get(stage)
        if not items:
            continue
        if len(items) > 1:
            named = " and ".join(f"`{r[4]}`" for r in items)
            diags.append(Diagnostic(
                code="duplicate-assignment",
                message=f"stage {stage} is placed more than once: {named}",
                stages=(stage,),
                because=(f"{named} all resolve to stage {stage}, and one stage runs in one process",),
                hint=f"keep one of them, e.g. `{items[-1][4]}`",
            ))
            continue
        typed, _, process, alone, flag = items[0]
        spec = pipeline.stage(stage)
        if spec.is_tp:
            diags.append(Diagnostic(
                code="tp-stage",
                message=f"`{flag}` moves tensor-parallel stage {stage} (tp_size {spec.tp_size})",
                stages=(stage,),
                because=(f"{stage} already runs one process per rank on GPUs "
                         f"{list(spec.gpus)}, so it cannot be placed in one process",),
                hint=f"drop `{flag}`; move the stages around it instead",
                fix=Fix(flags=tuple(f for f in flags if f != flag)),
            ))
            continue
        noop = alone and baseline.runs_alone(stage)
        if noop:
            # Already alone: keep its declared process name; nothing else changes.
            process = baseline.process[stage]
        requests.append(PlacementRequest(stage=stage, process=process, alone=alone, flag=flag,
                                         typed=typed, noop=noop))

    # Hints for request errors are best-effort: a tp-stage fix above lists the remaining flags.
    return ParsedRequests(requests=tuple(requests), diagnostics=tuple(diags), flags=tuple(flags))


def options_from_flags(flags: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """Split flags as printed in hints back into (isolate_stages, stage_processes)."""
    isolate, assign = [], []
    for f in flags:
        option, _, value = f.partition(" ")
        (isolate if option == "--isolate-stage" else assign).append(value)
    return isolate, assign
