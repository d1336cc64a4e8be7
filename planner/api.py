"""`planner.solve`: the one entry point the CLI, the launcher and the benchmarks use."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planner.assemble import build_plan
from planner.cards import load_pipeline
from planner.diagnostics import Explainer, in_report_order
from planner.errors import ConfigError
from planner.pipeline import Pipeline
from planner.plan import Diagnostic, Result
from planner.problem import Problem
from planner.requests import parse_requests
from planner.solver import NearestPlacement, PlacementModel, check_domains
from planner.topology import declared_baseline


def config_error_result(err: ConfigError, variant: str | None = None) -> Result:
    """A config the planner cannot use, as a Result (exit 2)."""
    return Result(model=None, variant=variant, status="error",
                  diagnostics=(_config_diagnostic(err),))


def _config_diagnostic(err: ConfigError) -> Diagnostic:
    # The paragraph already says where, what and what is allowed; a separate hint repeats it.
    return Diagnostic(code="invalid-config", message=err.paragraph().rstrip("."),
                      hint="fix the entries named above and run again")


def solve(model_path: str | None = None, config: str | Path | dict[str, Any] | None = None,
          variant: str | None = None, isolate_stages: Sequence[str] = (),
          stage_processes: Sequence[str] = ()) -> Result:
    """Plan the placement of a pipeline under the given requests. Never raises for user mistakes.

    `isolate_stages` and `stage_processes` are sequences of strings, one per flag, e.g.
    `isolate_stages=["vocoder"]`, `stage_processes=["vocoder=audio"]`. A bare string is a
    programming error and raises TypeError (it would otherwise be read one character at a time).
    Everything a user wrote (config, names, requests) comes back as diagnostics in the Result.
    """
    isolate_stages = _requests_arg("isolate_stages", isolate_stages)
    stage_processes = _requests_arg("stage_processes", stage_processes)
    try:
        pipeline = load_pipeline(model_path=model_path, config=config, variant=variant)
    except ConfigError as err:
        return config_error_result(err, variant)
    return solve_pipeline(pipeline, isolate_stages, stage_processes)


def _requests_arg(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, not a single {type(value).__name__}: "
                        f"pass [{value!r}]")
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be a list of strings, got {type(value).__name__}") from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{name} must be a list of strings; it holds {item!r} "
                            f"({type(item).__name__})")
    return items


def solve_pipeline(pipeline: Pipeline, isolate_stages: Sequence[str] = (),
                   stage_processes: Sequence[str] = ()) -> Result:
    """`solve` for an already loaded Pipeline; the request arguments are checked the same way."""
    isolate_stages = _requests_arg("isolate_stages", isolate_stages)
    stage_processes = _requests_arg("stage_processes", stage_processes)
    baseline = declared_baseline(pipeline)
    parsed = parse_requests(pipeline, baseline, tuple(isolate_stages), tuple(stage_processes))
    problem = Problem(pipeline=pipeline, baseline=baseline, requests=parsed.requests,
                      any_option=parsed.any_option)
    model = PlacementModel(problem, check_domains(problem))
    assignment, cores, truncated = model.solve_all()

    explainer = Explainer(problem, NearestPlacement(problem))
    placement = [explainer.explain(core) for core in cores]
    diagnostics = in_report_order(parsed.diagnostics) + in_report_order(placement)
    if truncated:
        diagnostics += (Diagnostic(
            code=placement[-1].code, message="more conflicts were found than are listed here",
            hint="fix the ones above and run again"),)

    if parsed.diagnostics:
        status = "error"
    elif cores:
        status = "infeasible"
    else:
        status = "ok"
    if assignment is None or status != "ok":
        return Result(model=pipeline.name, variant=pipeline.variant, status=status,
                      diagnostics=diagnostics)
    plan, warnings, changed = build_plan(problem, assignment)
    return Result(model=pipeline.name, variant=pipeline.variant, status="ok", changed=changed,
                  plan=plan, warnings=warnings, diagnostics=diagnostics)
