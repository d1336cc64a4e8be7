"""`planner serve`: solve, then run the plan's process groups behind the HTTP speech endpoint."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from planner.app.cli.console import console, error
from planner.app.cli.options import (
    MAX_QUEUED, ModelChoice, PlacementFlags, Scale, add_model_args, add_placement_args,
    add_scale_args, bounded_int, port,
)
from planner.app.cli.solve import solve
from launcher.logs import DEFAULT_LEVEL, LEVELS


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve", help="launch the planned process groups behind an HTTP speech endpoint",
        description="Solve the placement, then start one OS process per process group (and per "
                    "tensor-parallel rank) and serve POST /v1/audio/speech. Nothing starts when "
                    "the placement is invalid. sglang-omni's dotted stage flags (--STAGE.FIELD "
                    "VALUE, e.g. --vocoder.process vocoder) are taken beside the placement flags; "
                    "--config may be an sglang-omni config (docs/engines.md).")
    add_model_args(p, positional=True)
    add_placement_args(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on: 127.0.0.1 (default, this machine only), 0.0.0.0 "
                        "(all interfaces) or a name that resolves to an address of this machine")
    p.add_argument("--port", type=port, default=8000,
                   help="TCP port, 0 to 65535 (default 8000; 0 picks any free port)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--max-queued", type=bounded_int(1, MAX_QUEUED), metavar="N",
                   help="requests in flight per replica beyond which new ones get HTTP 429 with "
                        "Retry-After at once (default: 64 per worker process of the plan)")
    add_scale_args(p, cluster=False)
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local: the replicas run on this machine (default); ray: on a Ray "
                        "cluster, one placement group per replica on its planned node")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="the Ray cluster to run on (e.g. auto, or host:6379); without it, "
                        "--backend ray starts a local Ray instance and stops it afterwards")
    p.add_argument("--log-level", choices=LEVELS, default=DEFAULT_LEVEL,
                   help="what the server and its workers log to stderr (default warning: "
                        "warnings and errors, e.g. a stage that raised, with its traceback)")


@dataclass(frozen=True)
class ServeOptions:
    model: ModelChoice
    placement: PlacementFlags
    scale: Scale
    host: str
    port: int
    device: str
    max_queued: int | None
    backend: str
    ray_address: str | None
    log_level: str = DEFAULT_LEVEL

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServeOptions:
        return cls(ModelChoice.from_args(args), PlacementFlags.from_args(args),
                   Scale.from_args(args), args.host, args.port, args.device, args.max_queued,
                   args.backend, args.ray_address, args.log_level)


def run(args: argparse.Namespace) -> int:
    from planner.render.text import render_result

    opts = ServeOptions.from_args(args)
    if opts.ray_address is not None and opts.backend != "ray":
        return error(f"--ray-address {opts.ray_address} is for --backend ray; add --backend ray, "
                     "or leave out --ray-address to serve on this machine.")
    if opts.scale.replicas is None and opts.backend == "local":
        _, result = solve(opts.model, opts.placement, opts.scale)
        if not result.ok:
            render_result(console(stderr=True), result)
            return result.exit_code
        render_result(console(), result)
        serve = _serve_function()
        if isinstance(serve, int):
            return serve
        from planner.render.dicts import result_dict

        return serve(result.plan, result_dict(result), host=opts.host, port=opts.port,
                     device=opts.device, max_queued=opts.max_queued, log_level=opts.log_level)
    return _serve_replicas(opts)


def _serve_function():
    """`launcher.serving.serve.serve`, or the exit code of the error saying which extra is
    missing."""
    try:
        from launcher.serving.serve import serve
    except ImportError as exc:
        return error(f"`planner serve` needs the serve extra ({exc.name} is missing); install it "
                     "with `pip install 'stage-planner[serve]'`.")
    return serve


def _serve_replicas(opts: ServeOptions) -> int:
    """Replicas: pack them onto this machine (local) or the Ray cluster, and explain what does not
    fit before anything starts. On a cluster without GPUs, GPU stages run on CPU and only CPUs
    count."""
    from planner.render.text import render_result

    serve = _serve_function()
    if isinstance(serve, int):
        return serve
    from launcher.errors import LaunchError
    from launcher.serving.replica_set import launch_replicas

    session = None
    try:
        if opts.backend == "ray":
            from launcher.backends.ray_backend import RaySession

            session = RaySession(opts.ray_address)
            cluster = session.cluster()
        else:
            from planner.cluster import this_machine

            cluster = this_machine()
    except LaunchError as exc:
        return error(str(exc))
    try:
        pipeline = opts.model.load()
        from planner.api import solve_replicas

        # Counted as `planner solve --replicas` counts (GPU stages on CPU without GPUs).
        result = solve_replicas(pipeline, cluster, opts.scale.count, opts.scale.strategy,
                                opts.placement.requests())
        if not result.ok:
            render_result(console(stderr=True), result)
            return result.exit_code
        render_result(console(), result)
        if cluster.gpu_count == 0:
            where = "the Ray cluster" if opts.backend == "ray" else "this machine"
            print(f"note: {where} has no GPUs: GPU stages run on CPU and each replica needs "
                  "only its CPUs (one per process)", file=sys.stderr, flush=True)

        def start():
            return launch_replicas(result.plan, result.packing, opts.device,
                                   backend=opts.backend, session=session, cluster=cluster,
                                   max_queued=opts.max_queued)

        from planner.render.dicts import result_dict

        return serve(result.plan, result_dict(result), host=opts.host, port=opts.port,
                     device=opts.device, start=start, log_level=opts.log_level)
    finally:
        if session is not None:
            session.close()
