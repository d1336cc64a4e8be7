"""`planner solve`: the topology a placement request produces, or every reason it cannot work."""

from __future__ import annotations

import argparse
from pathlib import Path

from planner.api import config_error_result, solve_pipeline
from planner.app.cli.console import FORMATS, console, error
from planner.app.cli.options import (
    ModelChoice, PlacementFlags, Scale, add_model_args, add_placement_args, add_scale_args,
)
from planner.errors import ConfigError
from planner.app.cli.engine_file import FILE_FORMATS


def add_parser(sub) -> None:
    p = sub.add_parser(
        "solve", help="preview the topology a placement request produces, or why it cannot work",
        description="Apply --isolate-stage / --stage-process to the declared topology, check "
                    "process-safe handoffs and GPU memory fractions with a constraint solver, and "
                    "print the resulting process groups or every conflict with a hint. "
                    "sglang-omni's dotted stage flags (--STAGE.FIELD VALUE, e.g. "
                    "--vocoder.process vocoder) are taken beside them; --config may be an "
                    "sglang-omni config (docs/engines.md).")
    add_model_args(p, positional=True)
    add_placement_args(p)
    add_scale_args(p)
    p.add_argument("--format", choices=FORMATS + FILE_FORMATS, default="table",
                   help="table (default), json, dot, or the config file an engine takes: "
                        "sglang-omni, vllm-omni, ray-serve (what it cannot express is said in "
                        "the file and on stderr)")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="with an engine --format: write the file here instead of stdout")


def solve(model: ModelChoice, placement: PlacementFlags, scale: Scale):
    """(pipeline or None, result): config errors are a result too, as `planner.solve` gives."""
    try:
        pipeline = model.load()
        requests = placement.requests()
        if not scale.requested:
            return pipeline, solve_pipeline(pipeline, requests=requests)
        from planner.api import solve_replicas

        cluster = _cluster(scale.cluster)
    except ConfigError as err:
        return None, config_error_result(err, model.variant)
    return pipeline, solve_replicas(pipeline, cluster, scale.count, scale.strategy, requests)


def _cluster(spec: str | None):
    """`--cluster`: a running Ray cluster is joined by the runtime; a file or this machine is read
    by the planner."""
    if spec == "ray":
        from launcher.backends.ray_cluster import cluster_from_ray

        return cluster_from_ray()
    from planner.cluster import load_cluster

    return load_cluster(spec)


def run(args: argparse.Namespace) -> int:
    if args.output and args.format not in FILE_FORMATS:
        return error(f"--output writes an engine's config file; add --format "
                     f"{' or --format '.join(FILE_FORMATS)}, or drop --output (--format "
                     f"{args.format} prints on stdout).")
    model, placement = ModelChoice.from_args(args), PlacementFlags.from_args(args)
    pipeline, result = solve(model, placement, Scale.from_args(args))
    if args.format in FILE_FORMATS:
        return _engine_file(args, model, placement, result)
    if args.format == "json":
        from planner.render.dicts import result_json  # each format loads its own renderer

        print(result_json(result))
    elif args.format == "dot" and result.ok:
        from planner.render.dot import plan_dot

        print(plan_dot(result.plan, pipeline))
    else:
        from planner.render.text import render_result

        render_result(console(), result)
    return result.exit_code


def _engine_file(args: argparse.Namespace, model: ModelChoice, placement: PlacementFlags,
                 result) -> int:
    """The plan in an engine's config language, on stdout or in --output; an infeasible or
    invalid request prints its diagnostics on stderr and writes nothing."""
    from planner.app.cli.engine_file import engine_file, notes, save
    from planner.render.text import render_result

    err = console(stderr=True)
    if not result.ok:
        render_result(err, result)
        return result.exit_code
    written = engine_file(args.format, model, placement.requests(), result)
    if isinstance(written, str):
        return error(written)
    if args.output:
        if (problem := save(written, Path(args.output))) is not None:
            return error(f"--output {problem}")
    else:
        print(written.text, end="")
    for line in notes(written):
        err.print(line, markup=False, highlight=False)
    if args.output:
        err.print(f"wrote {args.output}", markup=False, highlight=False)
    return result.exit_code
