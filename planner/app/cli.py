"""`planner`: the command line, a thin layer over `planner.solve` and the launcher.

User mistakes end here as one paragraph and exit code 2 (1 for an infeasible placement); nothing
below this layer prints or exits.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from planner.api import config_error_result, declared_plan, solve_pipeline
from planner.cards import all_cards, load_pipeline
from planner.errors import ConfigError
from planner.limits import MAX_CONCURRENCY, MAX_COUNT, MAX_MS, MAX_RATE, MIN_RATE
from planner.plan import EXIT_INVALID, EXIT_OK
from planner.render.dicts import models_dict, result_json, show_dict
from planner.render.dot import plan_dot
from planner.flags import from_options

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("table", "json", "dot")


def _console(stderr: bool = False) -> Console:
    from rich.console import Console  # on use: `--format json` never pays for rich

    # Piped output gets a wide fixed width so tables and hints are not folded mid-flag.
    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal:
        # Piped or captured: never fold a sentence or a flag mid-way; tables keep 120 columns.
        console = Console(highlight=False, stderr=stderr, width=120, soft_wrap=True)
    return console


def _err(message: str) -> int:
    # The message quotes what the user wrote, which must not be read as rich markup.
    from rich.markup import escape

    _console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", markup=True)
    return EXIT_INVALID


def _add_model_args(p: argparse.ArgumentParser, positional: bool = False) -> None:
    if positional:
        p.add_argument("model", nargs="?", metavar="MODEL",
                       help="card name, model path or architecture (see `planner models`)")
    p.add_argument("--model-path", "-m", metavar="MODEL",
                   help="card name, model path (e.g. Qwen/Qwen3-TTS-12Hz-0.6B-Base) or architecture")
    p.add_argument("--config", "-c", metavar="FILE",
                   help="YAML config: an overlay on a card (`model:`) or a complete pipeline")
    p.add_argument("--variant", metavar="V", help="card variant (default: the card's default)")


def _add_placement_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--isolate-stage", action="append", default=[], metavar="STAGE",
                   help="run STAGE alone in a process of its own (repeatable; a role such as "
                        "`vocoder` works too)")
    p.add_argument("--stage-process", action="append", default=[], metavar="STAGE=PROCESS",
                   help="place STAGE in PROCESS; repeat one PROCESS to group stages (repeatable)")


def _port(text: str) -> int:
    """argparse type of --port: a TCP port, checked before anything starts."""
    port = int(text) if text.isascii() and text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a TCP port; give a number from 0 to 65535 (0 picks any free port)")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="planner",
        description="Plan, check and run the process placement of multi-stage (TTS) serving "
                    "pipelines. Exit codes: 0 ok, 1 infeasible placement, 2 invalid request or "
                    "config.")
    from planner import __version__

    parser.add_argument("--version", action="version", version=f"planner (stage-planner) "
                        f"{__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("models", help="list the built-in model cards",
                       description="List the built-in model cards with their variants and the "
                                   "model paths and architectures that select them.")
    p.add_argument("--format", choices=("table", "json"), default="table")

    p = sub.add_parser("show", help="show a pipeline's stages, handoffs and declared topology",
                       description="Show stages, handoffs (process-safe or why not), the declared "
                                   "process groups, fractions and per-GPU totals.")
    _add_model_args(p, positional=True)
    p.add_argument("--format", choices=FORMATS, default="table")

    p = sub.add_parser(
        "solve", help="preview the topology a placement request produces, or why it cannot work",
        description="Apply --isolate-stage / --stage-process to the declared topology, check "
                    "process-safe handoffs and GPU memory fractions with a constraint solver, and "
                    "print the resulting process groups or every conflict with a hint.")
    _add_model_args(p, positional=True)
    _add_placement_args(p)
    _add_scale_args(p)
    p.add_argument("--format", choices=FORMATS, default="table")

    p = sub.add_parser(
        "serve", help="launch the planned process groups behind an HTTP speech endpoint",
        description="Solve the placement, then start one OS process per process group (and per "
                    "tensor-parallel rank) and serve POST /v1/audio/speech. Nothing starts when "
                    "the placement is invalid.")
    _add_model_args(p, positional=True)
    _add_placement_args(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on: 127.0.0.1 (default, this machine only), 0.0.0.0 "
                        "(all interfaces) or a name that resolves to an address of this machine")
    p.add_argument("--port", type=_port, default=8000,
                   help="TCP port, 0 to 65535 (default 8000; 0 picks any free port)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--max-queued", type=_bounded_int(1, MAX_QUEUED), metavar="N",
                   help="requests in flight per replica beyond which new ones get HTTP 429 with "
                        "Retry-After at once (default: 64 per worker process of the plan)")
    _add_scale_args(p, cluster=False)
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local: the replicas run on this machine (default); ray: on a Ray "
                        "cluster, one placement group per replica on its planned node")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="the Ray cluster to run on (e.g. auto, or host:6379); without it, "
                        "--backend ray starts a local Ray instance and stops it afterwards")

    _add_bench_parser(sub)
    _add_tune_parser(sub)
    return parser


MAX_QUEUED = 1_000_000
EXIT_BROKEN_PIPE = 141  # what a shell reports for a writer ended by SIGPIPE


def _bounded_int(low: int, high: int):
    """An argparse type: a whole number from `low` to `high`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low}..{high}")
        return value
    return parse


def _positive(kind, high: float = MAX_COUNT, low: float | None = None):
    """An argparse type: a finite number above 0 (at least `low`), at most `high`."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:  # also an int past Python's digit limit
            value = 0
        if not value > 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite positive "
                                             f"{'whole number' if kind is int else 'number'}")
        if value > high or (low is not None and value < low):
            within = f"from {low:g} to {high:g}" if low is not None else f"at most {high:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number {within}")
        return value
    return parse


def _add_tune_parser(sub) -> None:
    p = sub.add_parser(
        "tune", help="recommend the placement for a workload from a measured profile",
        description="Profile the declared pipeline's stages on this machine (or read --profile), "
                    "predict every placement the planner accepts under the workload, and rank "
                    "them; --verify K serves the top K and the declared topology to compare.")
    _add_model_args(p, positional=True)
    p.add_argument("--concurrency", type=_positive(int, MAX_CONCURRENCY), action="append",
                   metavar="C", help="closed-loop clients (repeatable; default 1 and 4)")
    p.add_argument("--rate", type=_positive(float, MAX_RATE, MIN_RATE), action="append",
                   metavar="R",
                   help="open-loop Poisson arrivals in requests/s (repeatable)")
    p.add_argument("--objective", choices=("throughput", "latency", "ttfa"), default="throughput")
    p.add_argument("--slo-p99-ms", type=_positive(float, MAX_MS), metavar="X",
                   help="leave out placements whose predicted p99 exceeds X ms at any workload")
    p.add_argument("--max-processes", type=_positive(int), metavar="N")
    p.add_argument("--profile", metavar="FILE", help="a profile.json from an earlier run")
    p.add_argument("--profile-requests", type=_positive(int), default=12, metavar="N",
                   help="requests per profiling pass (default 12)")
    p.add_argument("--cores", type=_positive(int), metavar="N",
                   help="predict for a machine with N cores (default: the profiled machine's)")
    p.add_argument("--verify", type=_positive(int), metavar="K",
                   help="serve the top K and the declared topology under the same load")
    p.add_argument("--requests", type=_positive(int), default=96, metavar="N",
                   help="measured requests per placement and workload when verifying (default "
                        "96, as planner bench: --verify can change the recommendation, and 48 "
                        "left a placement 5-15%% apart between runs)")
    p.add_argument("--rounds", type=_positive(int), default=3, metavar="N",
                   help="with --verify: measure in N interleaved rounds, as planner bench "
                        "--rounds (default 3: on a shared machine the speed drifts by more than "
                        "the gaps --verify has to judge, and rounds spread the drift over every "
                        "placement alike)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--output", metavar="DIR",
                   help="where profile.json and tune.json go (default tune-results/MODEL)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stand-in-size", choices=("tiny", "small", "base"),
                   help="size offered to the built-in stand-in stages (default: theirs)")
    p.set_defaults(handler=cmd_tune)


def _add_bench_parser(sub) -> None:
    p = sub.add_parser(
        "bench", help="compare placements of one model under the same HTTP load",
        description="Serve each placement in turn, drive the same HTTP load against it at each "
                    "load level (closed loop: C concurrent clients; open loop: seeded arrivals at "
                    "a rate), and compare throughput, goodput, latency, time to first audio, "
                    "real-time factor, processes and memory, with ratios against the declared "
                    "topology measured in the same run. Without --placement: the declared "
                    "topology and each single feasible isolation. Writes results.json, "
                    "results.md and PNG charts to --output. Exit 1 when every request of a "
                    "placement at some load failed.")
    _add_model_args(p, positional=True)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--placement", action="append", default=[], metavar="NAME='FLAGS'",
                       help="a placement to compare, e.g. split='--isolate-stage vocoder' "
                            "(repeatable; the declared topology is always measured too)")
    which.add_argument("--all-feasible", action="store_true",
                       help="compare every feasible partition of the stages into processes")
    p.add_argument("--max", type=int, metavar="N",
                   help="with --all-feasible: at most N placements, the declared one included")
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("--requests", type=int, metavar="N",
                        help="measured requests per placement and load (default 96)")
    amount.add_argument("--duration", type=float, metavar="S",
                        help="measure for S seconds per placement and load instead (open loop: "
                             "the R x S requests that rate offers in S seconds)")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int, action="append", metavar="C",
                      help="closed loop: C concurrent clients, each sending its next request "
                           "when its last one ended (repeatable; default 1)")
    load.add_argument("--rate", type=float, action="append", metavar="R",
                      help="open loop: R requests per second arriving whatever the server does "
                           "(repeatable, for a sweep across the saturation point)")
    p.add_argument("--arrivals", choices=("poisson", "gamma", "constant"),
                   help="with --rate: gaps between arrivals (default poisson; seeded by --seed)")
    p.add_argument("--burstiness", type=float, metavar="B",
                   help="with --arrivals gamma: the gamma shape; 1 is Poisson, below 1 "
                        "burstier, above 1 more regular (default 1)")
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="split each placement's requests (or --duration) into N rounds, measured "
                        "in turn across the placements (A B C, A B C, ...) and merged, so that a "
                        "shared machine's drift in speed falls on every placement alike; the "
                        "report says how far one placement's rounds disagreed (default 1)")
    p.add_argument("--warmup", type=int, default=4, metavar="W",
                   help="unmeasured requests after startup (default 4)")
    p.add_argument("--input-chars", type=int, default=100, metavar="K",
                   help="characters per request text (default 100)")
    p.add_argument("--stream", action="store_true",
                   help="stream the audio and measure time to first audio and stream continuity")
    p.add_argument("--slo-ttfa-ms", type=float, metavar="MS",
                   help="goodput counts only requests whose first audio came within MS ms "
                        "(needs --stream)")
    p.add_argument("--slo-p99-ms", type=float, metavar="MS",
                   help="goodput counts only requests that finished within MS ms (the latency "
                        "objective a p99 target sets for every request)")
    p.add_argument("--output", "-o", metavar="DIR",
                   help="where results go (default: bench-results/MODEL)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the request texts and arrival times: the same seed sends the "
                        "same texts on the same schedule")
    p.add_argument("--stand-in-size", choices=("tiny", "small", "base"),
                   help="size offered to the built-in stand-in stages (default: theirs, base); "
                        "factories that take no `size` ignore it")


def cmd_models(args: argparse.Namespace) -> int:
    cards = all_cards()
    if args.format == "json":
        print(json.dumps(models_dict(cards), indent=2))
    else:
        from planner.render.text import render_models

        render_models(_console(), cards)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    pipeline = load_pipeline(model_path=args.model_path, config=args.config, variant=args.variant)
    plan = declared_plan(pipeline)
    if args.format == "json":
        print(json.dumps(show_dict(pipeline, plan), indent=2))
    elif args.format == "dot":
        print(plan_dot(plan, pipeline))
    else:
        from planner.render.text import render_show

        render_show(_console(), pipeline, plan)
    return EXIT_OK


def _solve(args: argparse.Namespace):
    try:
        pipeline = load_pipeline(model_path=args.model_path, config=args.config,
                                 variant=args.variant)
        requests = from_options(args.isolate_stage, args.stage_process)
        if getattr(args, "replicas", None) is None and getattr(args, "cluster", None) is None:
            return pipeline, solve_pipeline(pipeline, requests=requests)
        from planner.api import solve_replicas
        from planner.cluster import load_cluster

        cluster = load_cluster(args.cluster)
    except ConfigError as err:
        return None, config_error_result(err, args.variant)
    return pipeline, solve_replicas(pipeline, cluster, _replica_count(args), args.strategy,
                                    requests)


def _replica_count(args: argparse.Namespace) -> int | None:
    """--replicas as `solve_replicas` takes it: a count (1 when not given), or None for max."""
    return 1 if args.replicas is None else (None if args.replicas == "max" else args.replicas)


def _replicas(text: str):
    """argparse type of --replicas: a positive count, or `max`."""
    if text == "max":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of replicas; give a count "
                                         "of 1 or more, or max")
    return value


def _add_scale_args(p: argparse.ArgumentParser, cluster: bool = True) -> None:
    p.add_argument("--replicas", type=_replicas, metavar="N|max",
                   help="pack N copies of the placement onto the cluster (max: as many as fit)")
    if cluster:
        p.add_argument("--cluster", metavar="FILE|ray",
                       help="nodes to pack onto: a YAML file (nodes: [{name, gpus, cpus}]) or "
                            "`ray` for a running Ray cluster (default: this machine)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--pack", dest="strategy", action="store_const", const="pack",
                     help="fewest nodes and GPUs (default)")
    how.add_argument("--spread", dest="strategy", action="store_const", const="spread",
                     help="an even share on every node and GPU")
    p.set_defaults(strategy="pack")


def cmd_solve(args: argparse.Namespace) -> int:
    pipeline, result = _solve(args)
    if args.format == "json":
        print(result_json(result))
    elif args.format == "dot" and result.ok:
        print(plan_dot(result.plan, pipeline))
    else:
        from planner.render.text import render_result

        render_result(_console(), result)
    return result.exit_code


def cmd_serve(args: argparse.Namespace) -> int:
    from planner.render.text import render_result

    if args.ray_address is not None and args.backend != "ray":
        return _err(f"--ray-address {args.ray_address} is for --backend ray; add --backend ray, "
                    "or leave out --ray-address to serve on this machine.")
    if args.replicas is None and args.backend == "local":
        _, result = _solve(args)
        if not result.ok:
            render_result(_console(stderr=True), result)
            return result.exit_code
        render_result(_console(), result)
        serve = _serve_function()
        if isinstance(serve, int):
            return serve
        return serve(result.plan, result.to_dict(), host=args.host, port=args.port,
                      device=args.device, max_queued=args.max_queued)
    return _serve_replicas(args)


def _serve_function():
    """`launcher.serving.serve.serve`, or the exit code of the error saying which extra is missing."""
    try:
        from launcher.serving.serve import serve
    except ImportError as exc:
        return _err(f"`planner serve` needs the serve extra ({exc.name} is missing); install it "
                    "with `pip install 'stage-planner[serve]'`.")
    return serve


def _serve_replicas(args: argparse.Namespace) -> int:
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
        if args.backend == "ray":
            from launcher.backends.ray_backend import RaySession

            session = RaySession(args.ray_address)
            cluster = session.cluster()
        else:
            from planner.cluster import this_machine

            cluster = this_machine()
    except LaunchError as exc:
        return _err(str(exc))
    try:
        pipeline = load_pipeline(model_path=args.model_path, config=args.config,
                                 variant=args.variant)
        requests = from_options(args.isolate_stage, args.stage_process)
        from planner.api import solve_replicas

        # Counted as `planner solve --replicas` counts (GPU stages on CPU without GPUs).
        result = solve_replicas(pipeline, cluster, _replica_count(args), args.strategy, requests)
        if not result.ok:
            render_result(_console(stderr=True), result)
            return result.exit_code
        render_result(_console(), result)
        if cluster.gpu_count == 0:
            where = "the Ray cluster" if args.backend == "ray" else "this machine"
            print(f"note: {where} has no GPUs: GPU stages run on CPU and each replica needs "
                  "only its CPUs (one per process)", file=sys.stderr, flush=True)

        def start():
            return launch_replicas(result.plan, result.packing, args.device,
                                   backend=args.backend, session=session, cluster=cluster,
                                   max_queued=args.max_queued)

        return serve(result.plan, result.to_dict(), host=args.host, port=args.port,
                     device=args.device, start=start)
    finally:
        if session is not None:
            session.close()


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        from planner.app.bench.command import BenchError, run_bench
    except ImportError as exc:
        return _err(f"`planner bench` needs the bench extra ({exc.name} is missing); install it "
                    "with `pip install 'stage-planner[bench]'`.")
    try:
        return run_bench(args, _console(), _console(stderr=True))
    except BenchError as exc:
        _err(str(exc))
        return exc.exit_code


def cmd_tune(args: argparse.Namespace) -> int:
    from planner.app.tune_command import TuneError, run_tune

    try:
        return run_tune(args, _console(), _console(stderr=True))
    except TuneError as exc:
        return _err(str(exc))


COMMANDS = {"models": cmd_models, "show": cmd_show, "solve": cmd_solve, "serve": cmd_serve,
            "bench": cmd_bench}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_INVALID
    if getattr(args, "model", None) and getattr(args, "model_path", None) \
            and args.model != args.model_path:
        return _err(f"MODEL {args.model!r} and --model-path {args.model_path!r} disagree; give one.")
    if getattr(args, "model", None) and not getattr(args, "model_path", None):
        args.model_path = args.model  # the positional MODEL is shorthand for --model-path
    handler = COMMANDS.get(args.command) or getattr(args, "handler", None)
    try:
        code = handler(args)
        sys.stdout.flush()  # a reader that went away shows here, not as a traceback at exit
        return code
    except ConfigError as err:
        return _err(err.paragraph())
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """stdout's reader closed it (`planner ... | head`): stop quietly, as `cat` would, and keep
    Python from failing again on the final flush at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
