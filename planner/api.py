"""`planner.solve`: the one entry point the CLI, the launcher and the benchmarks use.

It sits above the core and its renderers: it runs the solver and the rules (core), then words
each diagnostic (`render.prose`), so a Result always carries the sentences a person reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.assemble import build_plan
from planner.cards import load_pipeline
from planner.diagnostics import Explainer, in_report_order
from planner.errors import ConfigError
from planner.pipeline import Pipeline
from planner import compute
from planner.plan import (
    Assign,
    ComputeRequest,
    Copies,
    Diagnostic,
    Fix,
    Isolate,
    Pin,
    Plan,
    Request,
    Result,
    Threads,
)
from planner.problem import SCALE, Problem, to_units
from planner.flags import compute_only, from_options, placement_only
from planner.render.prose import describe
from planner.requests import ParsedRequests, parse_requests
from planner.solver import Assignment, NearestPlacement, PlacementModel, check_domains
from planner.topology import declared_baseline

if TYPE_CHECKING:  # replicas and clusters load on use: a plain solve never packs replicas
    from planner.cluster import Cluster
    from planner.replicas import NodeCapacity, Packing, Strategy


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
          stage_processes: Sequence[str] = (),
          requests: Sequence[Request | ComputeRequest] = (),
          cpus: int | Sequence[int] | None = None) -> Result:
    """Plan the placement of a pipeline under the given requests. Never raises for user mistakes.

    Requests are typed (`requests=[Isolate("vocoder"), Assign("tts_engine", "engine"),
    Threads("vocoder", 2), Copies("vocoder", 2)]`) or given as the flags' values:
    `isolate_stages=["vocoder"]`, `stage_processes=["vocoder=audio"]` (one string per flag;
    assignments are read first, then isolations, then `requests`). A stage's threads times its
    process's copies are counted against `cpus` (default: this machine's CPUs; a count, or the
    CPU ids of the node, which `--process-cpus` pins must name). A bare string
    where a sequence is expected is a programming error and raises TypeError (it would otherwise
    be read one character at a time). Everything a user wrote (config, names, requests) comes back
    as diagnostics in the Result.
    """
    given = _requests(isolate_stages, stage_processes, requests)
    try:
        pipeline = load(model_path=model_path, config=config, variant=variant)
    except ConfigError as err:
        return config_error_result(err, variant)
    try:
        return solve_pipeline(pipeline, requests=given, cpus=cpus)
    except ConfigError as err:  # the solver's time limit (`limits.SOLVER_TIME_LIMIT_S`)
        return config_error_result(err, variant)


def load(model_path: str | None = None, config: str | Path | dict[str, Any] | None = None,
         variant: str | None = None, overrides: dict[str, Any] | None = None) -> Pipeline:
    """The validated pipeline of a card (name, model path or architecture), a config overlay on
    one, or a complete pipeline config; `overrides`: stage fields over it, as sglang-omni's
    dotted flags give them (`{"stages": {"vocoder": {"gpu_memory_fraction": 0.1}}}`). Raises
    ConfigError (one paragraph) for anything invalid."""
    return load_pipeline(model_path=model_path, config=config, variant=variant,
                         overrides=overrides)


def as_pipeline(model: Pipeline | str, variant: str | None = None) -> Pipeline:
    """A Pipeline as it is, or a model (card name, model path or architecture) loaded with
    `load`: what every public function that works on a pipeline accepts, as `solve` does."""
    if isinstance(model, Pipeline):
        if variant is not None and variant != model.variant:
            raise ValueError(f"variant={variant!r} applies to a model name; this Pipeline is "
                             f"already variant {model.variant!r} (pass planner.load(name, "
                             f"variant={variant!r}))")
        return model
    if isinstance(model, str):
        return load(model, variant=variant)
    raise TypeError(f"expected a model name such as 'qwen3-tts' or a Pipeline from "
                    f"planner.load(), not {type(model).__name__}")


def _strings(name: str, value: Any) -> tuple[str, ...]:
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


def _requests(isolate_stages: Any, stage_processes: Any,
              requests: Any) -> tuple[Request | ComputeRequest, ...]:
    kinds = (Isolate, Assign, Threads, Copies, Pin)
    if isinstance(requests, kinds + (str, bytes)):
        raise TypeError(f"requests must be a list of Isolate/Assign/Threads/Copies/Pin, not a single "
                        f"{type(requests).__name__}: pass [{requests!r}]")
    typed = tuple(requests)
    for item in typed:
        if not isinstance(item, kinds):
            raise TypeError(f"requests must hold Isolate, Assign, Threads, Copies or Pin values; it "
                            f"holds {item!r}")
    return from_options(_strings("isolate_stages", isolate_stages),
                        _strings("stage_processes", stage_processes)) + typed


def worded(diagnostic: Diagnostic) -> Diagnostic:
    """A diagnostic's typed conflict put into sentences: the library's edge, where the values the
    solver and the rules produce become what a person reads (`render.prose`)."""
    if diagnostic.conflict is None:  # a request or config error, worded where it was found
        return diagnostic
    prose = describe(diagnostic.conflict, diagnostic.fix)
    return dataclasses.replace(diagnostic, message=prose.message, because=prose.because,
                               hint=prose.hint)


def solve_pipeline(pipeline: Pipeline, isolate_stages: Sequence[str] = (),
                   stage_processes: Sequence[str] = (),
                   requests: Sequence[Request | ComputeRequest] = (),
                   cpus: int | Sequence[int] | None = None, count_cpus: bool = True) -> Result:
    """`solve` for an already loaded Pipeline; the request arguments are checked the same way.
    Threads are counted against `cpus` and pins checked against them (default: this machine's;
    a count stands for CPUs 0 to count - 1), neither without `count_cpus`."""
    problem, parsed = _problem(pipeline, _requests(isolate_stages, stage_processes, requests),
                               cpus, count_cpus)
    model = PlacementModel(problem, check_domains(problem))
    assignment, cores, truncated = model.solve_all()

    explainer = Explainer(problem, NearestPlacement(problem))
    placement = [worded(explainer.explain(core)) for core in cores]
    diagnostics = in_report_order(map(worded, parsed.diagnostics)) + in_report_order(placement)
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
                  plan=plan, warnings=warnings, diagnostics=diagnostics,
                  declared_by=pipeline.declared_by)


def _problem(pipeline: Pipeline, given: Sequence[Request | ComputeRequest],
             cpus: int | Sequence[int] | None,
             count_cpus: bool) -> tuple[Problem, ParsedRequests]:
    """The placement problem the requests pose, and the requests as parsed (with the
    diagnostics of those that could not be taken)."""
    baseline = declared_baseline(pipeline)
    parsed = parse_requests(pipeline, baseline, placement_only(given))
    problem = Problem(pipeline=pipeline, baseline=baseline, requests=parsed.requests,
                      any_option=parsed.any_option, duplicates=parsed.duplicates)
    cpu_ids = _node_cpus(cpus) if count_cpus else None
    asked, compute_diags = compute.resolve(pipeline, problem.target, compute_only(given), cpu_ids)
    problem = dataclasses.replace(problem, compute=asked, cpu_ids=cpu_ids,
                                  cpus=None if cpu_ids is None else len(cpu_ids))
    return problem, dataclasses.replace(parsed, diagnostics=parsed.diagnostics + compute_diags)


def _node_cpus(cpus: int | Sequence[int] | None) -> tuple[int, ...]:
    """The CPUs of the node a plan is for: this machine's (those this process may run on) by
    default, 0 to `cpus` - 1 for a count, or the CPUs named."""
    if cpus is None:
        from planner.cpus import usable_cpu_ids

        return usable_cpu_ids()
    if isinstance(cpus, int):
        return tuple(range(cpus))
    return tuple(sorted(set(cpus)))


def accepted_plan(pipeline: Pipeline, requests: Sequence[Request | ComputeRequest],
                  cpus: int | Sequence[int] | None = None) -> Plan | None:
    """The plan `solve_pipeline` gives for these requests (threads counted against `cpus`,
    default this machine's), or None where it would not give one, without explaining why
    (enumerating placements and compute settings asks this of every candidate)."""
    problem, parsed = _problem(pipeline, tuple(requests), cpus, True)
    if parsed.diagnostics:
        return None
    assignment = PlacementModel(problem, check_domains(problem)).solve_one()
    return None if assignment is None else build_plan(problem, assignment)[0]


def declared_plan(pipeline: Pipeline | str, variant: str | None = None) -> Plan:
    """The declared topology as a Plan, as it is, without checking it (what `planner show`
    draws; `solve` with no request checks it). `pipeline`: a Pipeline or a model name."""
    pipeline = as_pipeline(pipeline, variant)
    baseline = declared_baseline(pipeline)
    problem = Problem(pipeline=pipeline, baseline=baseline, requests=(), any_option=False)
    fractions = {s.name: (to_units(s.fraction) if s.fraction is not None else None)
                 for s in pipeline.stages if s.on_gpu}
    plan, _, _ = build_plan(problem, Assignment(process=dict(baseline.process),
                                                fraction_units=fractions, alone_kept=set()))
    return plan


def solve_replicas(pipeline: Pipeline, cluster: Cluster, replicas: int | None,
                   strategy: Strategy = "pack", requests: Sequence[Request] = (),
                   gpus: bool | None = None) -> Result:
    """`solve_pipeline`, then pack `replicas` copies (None: as many as fit) onto `cluster`.

    Single-replica diagnostics come first and stop here; too many replicas (or none at all for
    `max`) is one `insufficient-capacity` diagnostic with the largest number that fits and hints
    that fit. `planner solve` and `planner serve` both count this way: on a cluster without
    GPUs, GPU stages run on CPU and only CPUs count (`planner.replicas.stages_on_gpus`); `gpus`
    overrides that."""
    from planner.replicas import pack

    # A replica lives on one node: its threads are counted against the largest node's CPUs (not
    # at all where a node does not say how many it has).
    limited = all(n.cpus is not None for n in cluster.nodes)
    largest = max(cluster.nodes, key=lambda n: n.cpus or 0)
    result = solve_pipeline(pipeline, requests=requests,
                            cpus=(largest.cpu_ids or largest.cpus) if limited else None,
                            count_cpus=limited)
    if not result.ok:
        return dataclasses.replace(result, cluster=cluster)
    packing = pack(result.plan, cluster, replicas, strategy, gpus)
    if packing.fits:
        return dataclasses.replace(result, cluster=cluster, packing=packing)
    diagnostic = _capacity_diagnostic(pipeline, result, cluster, packing, strategy, requests)
    return dataclasses.replace(result, status="infeasible", plan=None, cluster=cluster,
                               packing=packing, diagnostics=result.diagnostics + (diagnostic,))


def _capacity_diagnostic(pipeline: Pipeline, result: Result, cluster: Cluster, packing: Packing,
                         strategy: Strategy, requests: Sequence[Request]) -> Diagnostic:
    from planner.conflicts import CardTarget, InsufficientCapacity, NodeShortfall
    from planner.replicas import fraction_hint, pack

    kinds: dict[tuple[int, int | None], list[NodeCapacity]] = {}
    for c in packing.capacity:
        kinds.setdefault((c.node.gpus, c.node.cpus), []).append(c)
    shortfall = tuple(NodeShortfall(tuple(c.node.name for c in cs), g, cpus, cs[0].most,
                                    cs[0].by_gpu, cs[0].by_cpu)
                      for (g, cpus), cs in kinds.items())
    sharing = fraction_hint(result.plan) if packing.demand.gpus else None
    sharing_most = None
    fix = Fix(config=None)
    if sharing:
        shared = dataclasses.replace(pipeline, stages=tuple(
            dataclasses.replace(s, fraction=sharing[s.name]) if s.name in sharing else s
            for s in pipeline.stages))
        again = solve_pipeline(shared, requests=requests)
        if again.ok:
            sharing_most = pack(again.plan, cluster, None, strategy).most
        if sharing_most is not None and sharing_most >= (packing.requested or 0):
            fix = Fix(config={"stages": [
                {"name": s, "runtime": {"resources": {"total_gpu_memory_fraction": v}}}
                for s, v in sharing.items()]})
    card = CardTarget(pipeline.name, pipeline.variant) if pipeline.source.startswith("card ") \
        else None
    conflict = InsufficientCapacity(
        model=pipeline.name, requested=packing.requested, most=packing.most,
        proved=packing.proved,
        gpu_need=tuple((l, d / SCALE) for l, d in packing.demand.gpus),
        cpu_need=packing.demand.cpus, cluster=cluster.source, shortfall=shortfall,
        sharing=tuple(sharing.items()) if sharing else None, sharing_most=sharing_most,
        card=card)
    prose = describe(conflict)
    return Diagnostic(code=conflict.code, message=prose.message, because=prose.because,
                      hint=prose.hint, fix=fix if fix.config else None,
                      rule="the replicas fit the cluster's GPUs and CPUs", conflict=conflict)
