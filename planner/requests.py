"""Placement requests from the command line (`--isolate-stage`, `--stage-process`), parsed and resolved.

Request errors are diagnostics, not exceptions: every malformed, unknown or duplicate request is
reported at once, and the valid ones still go to the solver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from planner.config import PROCESS_NAME_CHARS, name_problem
from planner.pipeline import Pipeline
from planner.plan import Assign, Diagnostic, Fix, Isolate, Request
from planner.flags import flag
from planner.topology import Baseline


@dataclass(frozen=True)
class PlacementRequest:
    """A request resolved against a pipeline: which stage goes where."""

    stage: str  # resolved stage name
    process: str  # the process it is asked to run in
    request: Request  # as the user gave it (a role alias or the stage)
    noop: bool = False  # --isolate-stage on a stage that already runs alone

    @property
    def alone(self) -> bool:
        """--isolate-stage: nothing else may share that process."""
        return isinstance(self.request, Isolate)

    @property
    def typed(self) -> str:
        return self.request.stage

    @property
    def flag(self) -> str:
        return flag(self.request)


@dataclass(frozen=True)
class ParsedRequests:
    requests: tuple[PlacementRequest, ...]
    diagnostics: tuple[Diagnostic, ...]
    given: tuple[Request, ...]  # every request as given, in order
    # (stage, request) of the requests that name a stage another request names too: none of
    # them is taken (`duplicate-assignment`), so a fix that places the stage drops them all.
    duplicates: tuple[tuple[str, Request], ...] = ()

    @property
    def any_option(self) -> bool:
        return bool(self.given)


def resolve(pipeline: Pipeline, name: str) -> str | None:
    """Literal stage names win over role aliases."""
    if name in pipeline.stage_names:
        return name
    return pipeline.role_target(name)


def _unknown(pipeline: Pipeline, r: Request) -> Diagnostic:
    roles = ", ".join(f"{a} -> {t}" for a, t in pipeline.roles) or "none"
    stages = ", ".join(pipeline.stage_names)
    instead = _renamed(r, pipeline.stage_names[-1])
    return Diagnostic(
        code="unknown-stage",
        message=f"`{flag(r)}` names {r.stage!r}, which is neither a stage nor a role of "
                f"{pipeline.name}",
        stages=(r.stage,),
        because=(f"the stages of {pipeline.name} are {stages}; its roles are {roles}",),
        hint=f"name one of those stages, e.g. `{flag(instead)}`",
        fix=Fix(drop=(r,), add=(instead,)),
    )


def _renamed(r: Request, stage: str) -> Request:
    return Isolate(stage) if isinstance(r, Isolate) else Assign(stage, r.process)


def _safe_name(text: str) -> str:
    """`text` with every character a process name cannot hold replaced by '_'."""
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", text).lstrip("-.=") or "process"


def _malformed(r: Assign, example: str) -> Diagnostic | None:
    """invalid-assignment: no '=', an empty part, or a process name the planner cannot use."""
    f = flag(r)
    if not r.has_separator or not r.stage or not r.process:
        missing = "no '='" if not r.has_separator else (
            "an empty stage" if not r.stage else "an empty process")
        instead = Assign(r.stage or example, r.process or r.stage or example)
        return Diagnostic(
            code="invalid-assignment",
            message=f"`{f}` is not STAGE=PROCESS: it has {missing}",
            stages=(r.stage,) if r.stage else (),
            because=("--stage-process reads left to right: place STAGE in PROCESS",),
            hint=f"write it as `{flag(instead)}`",
            fix=Fix(drop=(r,), add=(instead,)),
        )
    if name_problem(r.process, process=True) is not None:
        instead = Assign(r.stage, _safe_name(r.process))
        return Diagnostic(
            code="invalid-assignment",
            message=f"`{f}` names process {r.process!r}, which is not a valid process name",
            stages=(r.stage,),
            because=(f"a process name uses {PROCESS_NAME_CHARS}",),
            hint=f"write it as `{flag(instead)}`",
            fix=Fix(drop=(r,), add=(instead,)),
        )
    return None


def parse_requests(pipeline: Pipeline, baseline: Baseline,
                   given: Sequence[Request]) -> ParsedRequests:
    """Resolve requests against the pipeline; every request error is a diagnostic."""
    diags: list[Diagnostic] = []
    resolved: list[tuple[Request, str, str]] = []  # (request, stage, process)
    for r in given:
        if isinstance(r, Assign):
            problem = _malformed(r, pipeline.stage_names[-1])
            if problem is not None:
                diags.append(problem)
                continue
        stage = resolve(pipeline, r.stage)
        if stage is None:
            diags.append(_unknown(pipeline, r))
            continue
        resolved.append((r, stage, r.process if isinstance(r, Assign) else stage))

    by_stage: dict[str, list[tuple[Request, str, str]]] = {}
    for item in resolved:
        by_stage.setdefault(item[1], []).append(item)

    requests: list[PlacementRequest] = []
    duplicates: list[tuple[str, Request]] = []
    for stage in pipeline.stage_names:
        items = by_stage.get(stage)
        if not items:
            continue
        if len(items) > 1:
            named = " and ".join(f"`{flag(r)}`" for r, _, _ in items)
            diags.append(Diagnostic(
                code="duplicate-assignment",
                message=f"stage {stage} is placed more than once",
                stages=(stage,),
                because=(f"{named} {'both' if len(items) == 2 else 'all'} resolve to stage "
                         f"{stage}, and one stage runs in one process",),
                hint="keep one of them: drop "
                     + " and ".join(f"`{flag(r)}`" for r, _, _ in items[:-1]),
                fix=Fix(drop=tuple(r for r, _, _ in items[:-1])),
            ))
            duplicates += [(stage, r) for r, _, _ in items]
            continue
        r, _, process = items[0]
        spec = pipeline.stage(stage)
        if spec.is_tp:
            diags.append(Diagnostic(
                code="tp-stage",
                message=f"`{flag(r)}` moves tensor-parallel stage {stage} (tp_size {spec.tp_size})",
                stages=(stage,),
                because=(f"{stage} already runs one process per rank on GPUs "
                         f"{list(spec.gpus)}, so it cannot be placed in one process",),
                hint=f"drop `{flag(r)}`; move the stages around it instead",
                fix=Fix(drop=(r,)),
            ))
            continue
        noop = isinstance(r, Isolate) and baseline.runs_alone(stage)
        if noop:
            # Already alone: keep its declared process name; nothing else changes.
            process = baseline.process[stage]
        requests.append(PlacementRequest(stage=stage, process=process, request=r, noop=noop))

    return ParsedRequests(requests=tuple(requests), diagnostics=tuple(diags), given=tuple(given),
                          duplicates=tuple(duplicates))
