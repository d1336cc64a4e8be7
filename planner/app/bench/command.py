"""`planner bench` from parsed arguments to files and a table; the CLI's only entry point here.

Bad input raises `BenchError` (one paragraph, exit 2) before anything starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

import planner
from launcher.serving.limits import MAX_INPUT_CHARS
from planner.limits import (
    MAX_BURSTINESS, MAX_CONCURRENCY, MAX_COUNT, MAX_DURATION_S, MAX_MS, MAX_RATE, MIN_RATE,
)

from planner.app.bench.charts import write_charts
from planner.app.bench.load_results import Slo
from planner.app.bench.load_shapes import Closed, Open, Shape, describe
from planner.app.bench.machine import environment
from planner.app.bench.placements import PlacementError, choose
from planner.app.bench.report import LiveProgress, failures, markdown, render_table, write_json
from planner.app.bench.results import Bench
from planner.app.bench.runner import Settings, run_all
from planner.app.bench.server import ServerFailed

EXIT_ALL_FAILED = 1  # every request of some placement at some load failed
EXIT_INVALID = 2
EXIT_RUN_FAILED = 3  # a placement could not be served, as for `planner serve`
DEFAULT_REQUESTS = 96
DEFAULT_CONCURRENCY = (1,)
DEFAULT_ARRIVALS = "poisson"
STAND_IN_SIZES = ("tiny", "small", "base")


class BenchError(Exception):
    def __init__(self, message: str, exit_code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _out_of_range(args: argparse.Namespace) -> list[str]:
    """Numbers that are not finite, or beyond what any run can use (`planner.limits`): a rate of
    1e-300 waited for ever for its first arrival; inf and nan raised from deep inside."""
    problems = []
    floats = [("--duration", [args.duration], 0.0, MAX_DURATION_S, "seconds"),
              ("--rate", args.rate or [], MIN_RATE, MAX_RATE, "requests per second"),
              ("--burstiness", [args.burstiness], 0.0, MAX_BURSTINESS, ""),
              ("--slo-ttfa-ms", [args.slo_ttfa_ms], 0.0, MAX_MS, "milliseconds"),
              ("--slo-p99-ms", [args.slo_p99_ms], 0.0, MAX_MS, "milliseconds")]
    for flag, values, low, high, unit in floats:
        for v in values:
            if v is None or v <= 0:
                continue  # a number that is not positive is said below
            if not (math.isfinite(v) and low <= v <= high):
                within = f"from {low:g} to {high:g}" if low else f"above 0 and at most {high:g}"
                problems.append(f"{flag} must be a finite number {within}"
                                f"{' ' + unit if unit else ''}, not {v:g}")
    ints = [("--concurrency", args.concurrency or [], MAX_CONCURRENCY),
            ("--requests", [args.requests], MAX_COUNT), ("--warmup", [args.warmup], MAX_COUNT),
            ("--rounds", [args.rounds], MAX_COUNT), ("--max", [args.max], MAX_COUNT)]
    for flag, values, high in ints:
        for v in values:
            if v is not None and v > high:
                problems.append(f"{flag} must be at most {high}, not {v}")
    return problems


def _check(args: argparse.Namespace) -> None:
    if not args.model_path and not args.config:
        raise BenchError("give the model to benchmark with --model-path MODEL (a card name, model "
                         "path or architecture; see `planner models`) or --config FILE.")
    problems = _out_of_range(args)
    if args.requests is not None and args.requests < 1:
        problems.append(f"--requests must be at least 1, not {args.requests}")
    if args.duration is not None and args.duration <= 0:
        problems.append(f"--duration must be a positive number of seconds, not {args.duration:g}")
    bad_c = [c for c in args.concurrency or () if c < 1]
    if bad_c:
        problems.append(f"--concurrency must be at least 1, not {bad_c[0]}")
    bad_r = [r for r in args.rate or () if r <= 0]  # NaN: `_out_of_range`
    if bad_r:
        problems.append(f"--rate must be a positive number of requests per second, not "
                        f"{bad_r[0]:g}")
    if args.arrivals is not None and not args.rate:
        problems.append("--arrivals shapes open-loop load; add --rate R (requests/s)")
    if args.burstiness is not None:
        if (args.arrivals or DEFAULT_ARRIVALS) != "gamma":
            problems.append("--burstiness is the shape of gamma arrivals; add --arrivals gamma")
        elif args.burstiness <= 0:
            problems.append(f"--burstiness must be positive (1 is as bursty as Poisson, less "
                            f"is burstier), not {args.burstiness:g}")
    for flag, value in (("--slo-ttfa-ms", args.slo_ttfa_ms), ("--slo-p99-ms", args.slo_p99_ms)):
        if value is not None and value <= 0:
            problems.append(f"{flag} must be a positive number of milliseconds, not {value:g}")
    if args.slo_ttfa_ms is not None and not args.stream:
        problems.append("--slo-ttfa-ms needs --stream: time to first audio is measured on "
                        "streamed responses")
    if args.warmup < 0:
        problems.append(f"--warmup must be 0 or more, not {args.warmup}")
    if args.rounds < 1:
        problems.append(f"--rounds must be at least 1, not {args.rounds}")
    elif args.duration is None and (args.requests or DEFAULT_REQUESTS) < args.rounds:
        problems.append(f"--rounds {args.rounds} needs at least one request per round; give "
                        f"--requests {args.rounds} or more, or fewer rounds")
    if not 1 <= args.input_chars <= MAX_INPUT_CHARS:
        problems.append(f"--input-chars must be within 1..{MAX_INPUT_CHARS} (the speech "
                        f"endpoint's limit), not {args.input_chars}")
    if args.without_declared and not args.placement:
        problems.append("--without-declared serves only the --placement plans; name at least "
                        "one with --placement NAME='FLAGS'")
    if args.max is not None and not args.all_feasible:
        problems.append("--max only limits --all-feasible; add --all-feasible or drop --max")
    if args.max is not None and args.max < 1:
        problems.append(f"--max must be at least 1, not {args.max}")
    if args.output and Path(args.output).exists() and not Path(args.output).is_dir():
        problems.append(f"--output {args.output} is a file; results go into a directory "
                        "(results.json, results.md and charts): give a new or existing directory")
    if problems:
        raise BenchError("; ".join(problems) + ".")
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError("`planner bench` draws its charts with matplotlib, which is not "
                         "installed; install the bench extra with "
                         "`pip install 'stage-planner[bench]'`.")


def _num(x: float) -> str:
    """A float as typed, without a trailing .0 and without losing digits (`:g` keeps six)."""
    return str(int(x)) if x == int(x) else repr(x)


def command_line(args: argparse.Namespace, output: Path) -> list[str]:
    """The bench's arguments spelled out in full, so results.json says exactly what ran."""
    out = ["bench"]
    for flag, value in (("--model-path", args.model_path), ("--config", args.config),
                        ("--variant", args.variant)):
        if value:
            out += [flag, value]
    for p in args.placement:
        out += ["--placement", p]
    if args.without_declared:
        out.append("--without-declared")
    if args.all_feasible:
        out.append("--all-feasible")
        if args.max is not None:
            out += ["--max", str(args.max)]
    if args.duration is not None:
        out += ["--duration", _num(args.duration)]
    else:
        out += ["--requests", str(args.requests or DEFAULT_REQUESTS)]
    for shape in loads(args):
        if isinstance(shape, Closed):
            out += ["--concurrency", str(shape.concurrency)]
        else:
            out += ["--rate", _num(shape.rate)]
    if args.rate:
        out += ["--arrivals", args.arrivals or DEFAULT_ARRIVALS]
        if args.burstiness is not None:
            out += ["--burstiness", _num(args.burstiness)]
    if args.rounds > 1:
        out += ["--rounds", str(args.rounds)]
    out += ["--warmup", str(args.warmup), "--input-chars", str(args.input_chars)]
    if args.stream:
        out.append("--stream")
    for flag, value in (("--slo-ttfa-ms", args.slo_ttfa_ms), ("--slo-p99-ms", args.slo_p99_ms)):
        if value is not None:
            out += [flag, _num(value)]
    out += ["--output", str(output), "--device", args.device,
            "--seed", str(args.seed)]
    if args.stand_in_size:
        out += ["--stand-in-size", args.stand_in_size]
    return out


def loads(args: argparse.Namespace) -> tuple[Shape, ...]:
    """The loads to measure, in order, duplicates dropped: arrival rates (open loop) or
    concurrency levels (closed loop, the default)."""
    if args.rate:
        arrivals = args.arrivals or DEFAULT_ARRIVALS
        burstiness = args.burstiness if args.burstiness is not None else 1.0
        return tuple(dict.fromkeys(Open(r, arrivals, burstiness) for r in args.rate))
    return tuple(dict.fromkeys(Closed(c) for c in args.concurrency or DEFAULT_CONCURRENCY))


def _writable_directory(path: Path) -> None:
    """Create `path` if needed and prove a file can be written there, before anything runs."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except FileExistsError:
        raise BenchError(f"--output {path}: a file is in the way of that directory; give "
                         "a new or existing directory.") from None
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise BenchError(f"--output {path}: cannot write results there ({why}); give a "
                         "directory you can write to.") from None


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise BenchError(f"could not write {path}: {exc.strerror or exc}.") from None


def run_bench(args: argparse.Namespace, out: Console, err: Console) -> int:
    _check(args)
    config = str(Path(args.config).resolve()) if args.config else None
    pipeline = planner.load(model_path=args.model_path, config=config, variant=args.variant)
    try:
        placements, notes = choose(pipeline, args.placement,
                                   (args.max or 0) if args.all_feasible else None,
                                   declared=not args.without_declared)
    except PlacementError as exc:
        raise BenchError(str(exc), exc.exit_code) from None
    if len(placements) < 2 and not args.without_declared:
        notes.append(f"{pipeline.name} has no feasible placement other than its declared one; "
                     "measuring that alone")
    shapes = loads(args)
    slo = Slo(ttfa_s=None if args.slo_ttfa_ms is None else args.slo_ttfa_ms / 1000,
              latency_s=None if args.slo_p99_ms is None else args.slo_p99_ms / 1000)
    settings = Settings(
        model_path=args.model_path, config=config, variant=args.variant, device=args.device,
        stand_in_size=args.stand_in_size, loads=shapes,
        requests=None if args.duration is not None else (args.requests or DEFAULT_REQUESTS),
        duration_s=args.duration, warmup=args.warmup, input_chars=args.input_chars,
        stream=args.stream, seed=args.seed, slo=slo, rounds=args.rounds)
    output = Path(args.output or Path("bench-results") / pipeline.name)
    _writable_directory(output)
    argv = command_line(args, output)
    env = environment(argv)  # before the load: its load average says how busy the machine was
    mode = shapes[0].mode

    err.print(f"Benchmarking {len(placements)} placement(s) of {pipeline.name} at "
              f"{describe(shapes)}; {mode} load over HTTP.")
    try:
        with LiveProgress(err) as progress:
            runs = run_all(settings, placements, progress)
    except ServerFailed as exc:
        raise BenchError(f"a placement could not be served, so the comparison stopped: {exc}",
                         EXIT_RUN_FAILED) from None

    bench = Bench(
        settings={"model": pipeline.name, "variant": pipeline.variant, "model_path": args.model_path,
                  "config": config, "device": args.device, "stand_in_size": args.stand_in_size,
                  "load_mode": mode,
                  "concurrency": [s.concurrency for s in shapes if isinstance(s, Closed)],
                  "rates": [s.rate for s in shapes if isinstance(s, Open)],
                  "arrivals": (args.arrivals or DEFAULT_ARRIVALS) if args.rate else None,
                  "burstiness": (args.burstiness if args.burstiness is not None else 1.0)
                  if args.rate else None,
                  "requests": settings.requests, "duration_s": settings.duration_s,
                  "rounds": settings.rounds,
                  "warmup": settings.warmup, "input_chars": settings.input_chars,
                  "stream": settings.stream, "seed": settings.seed,
                  "slo_ttfa_ms": args.slo_ttfa_ms, "slo_p99_ms": args.slo_p99_ms},
        environment=env, placements=tuple(placements), runs=runs,
        notes=tuple(notes))
    try:
        write_json(bench, output / "results.json")
        charts = write_charts(bench, output)
    except OSError as exc:
        raise BenchError(f"could not write the results into {output}: "
                         f"{exc.strerror or exc}.") from None
    _write(output / "results.md", markdown(bench, charts))
    render_table(out, bench)
    out.print(f"Wrote results.json, results.md and {len(charts)} charts ({charts[0]} first) "
              f"in {output}.", style="dim")
    failed = failures(bench)
    for run, first in failed:
        err.print(f"[bold red]error:[/] every request to {escape(run.placement.name)} at "
                  f"{escape(run.shape.label)} failed ({run.load.errors} of "
                  f"{len(run.load.samples)}); the first: {escape(first)}")
    return EXIT_ALL_FAILED if failed else 0
