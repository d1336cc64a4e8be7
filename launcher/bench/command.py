"""`planner bench` from parsed arguments to files and a table; the CLI's only entry point here.

Bad input raises `BenchError` (one paragraph, exit 2) before anything starts.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from rich.console import Console

from launcher.http import MAX_INPUT_CHARS
import planner

from .charts import write_charts
from .loadgen import MODE
from .machine import environment
from .placements import PlacementError, choose
from .report import LiveProgress, markdown, render_table, write_json
from .results import Bench
from .runner import Settings, run_all
from .server import ServerFailed

EXIT_INVALID = 2
EXIT_RUN_FAILED = 3  # a placement could not be served, as for `planner serve`
DEFAULT_REQUESTS = 96
DEFAULT_CONCURRENCY = (1,)
STAND_IN_SIZES = ("tiny", "small", "base")


class BenchError(Exception):
    def __init__(self, message: str, exit_code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _check(args: argparse.Namespace) -> None:
    if not args.model_path and not args.config:
        raise BenchError("give the model to benchmark with --model-path MODEL (a card name, model "
                         "path or architecture; see `planner models`) or --config FILE.")
    problems = []
    if args.requests is not None and args.requests < 1:
        problems.append(f"--requests must be at least 1, not {args.requests}")
    if args.duration is not None and args.duration <= 0:
        problems.append(f"--duration must be a positive number of seconds, not {args.duration:g}")
    bad_c = [c for c in args.concurrency or () if c < 1]
    if bad_c:
        problems.append(f"--concurrency must be at least 1, not {bad_c[0]}")
    if args.warmup < 0:
        problems.append(f"--warmup must be 0 or more, not {args.warmup}")
    if not 1 <= args.input_chars <= MAX_INPUT_CHARS:
        problems.append(f"--input-chars must be within 1..{MAX_INPUT_CHARS} (the speech "
                        f"endpoint's limit), not {args.input_chars}")
    if args.max is not None and not args.all_feasible:
        problems.append("--max only limits --all-feasible; add --all-feasible or drop --max")
    if args.max is not None and args.max < 1:
        problems.append(f"--max must be at least 1, not {args.max}")
    if problems:
        raise BenchError("; ".join(problems) + ".")
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError("`planner bench` draws its charts with matplotlib, which is not "
                         "installed; install the bench extra with "
                         "`pip install 'stage-planner[bench]'`.")


def command_line(args: argparse.Namespace, output: Path) -> list[str]:
    """The bench's arguments spelled out in full, so results.json says exactly what ran."""
    out = ["bench"]
    for flag, value in (("--model-path", args.model_path), ("--config", args.config),
                        ("--variant", args.variant)):
        if value:
            out += [flag, value]
    for p in args.placement:
        out += ["--placement", p]
    if args.all_feasible:
        out.append("--all-feasible")
        if args.max is not None:
            out += ["--max", str(args.max)]
    if args.duration is not None:
        out += ["--duration", f"{args.duration:g}"]
    else:
        out += ["--requests", str(args.requests or DEFAULT_REQUESTS)]
    for c in args.concurrency or DEFAULT_CONCURRENCY:
        out += ["--concurrency", str(c)]
    out += ["--warmup", str(args.warmup), "--input-chars", str(args.input_chars)]
    if args.stream:
        out.append("--stream")
    out += ["--output", str(output), "--device", args.device,
            "--seed", str(args.seed)]
    if args.stand_in_size:
        out += ["--stand-in-size", args.stand_in_size]
    return out


def run_bench(args: argparse.Namespace, out: Console, err: Console) -> int:
    _check(args)
    config = str(Path(args.config).resolve()) if args.config else None
    pipeline = planner.load(model_path=args.model_path, config=config, variant=args.variant)
    try:
        placements, notes = choose(pipeline, args.placement,
                                   (args.max or 0) if args.all_feasible else None)
    except PlacementError as exc:
        raise BenchError(str(exc)) from None
    if len(placements) < 2:
        notes.append(f"{pipeline.name} has no feasible placement other than its declared one; "
                     "measuring that alone")
    settings = Settings(
        model_path=args.model_path, config=config, variant=args.variant, device=args.device,
        stand_in_size=args.stand_in_size,
        concurrency=tuple(dict.fromkeys(args.concurrency or DEFAULT_CONCURRENCY)),
        requests=None if args.duration is not None else (args.requests or DEFAULT_REQUESTS),
        duration_s=args.duration, warmup=args.warmup, input_chars=args.input_chars,
        stream=args.stream, seed=args.seed)
    output = Path(args.output or Path("bench-results") / pipeline.name)
    output.mkdir(parents=True, exist_ok=True)
    argv = command_line(args, output)

    err.print(f"Benchmarking {len(placements)} placement(s) of {pipeline.name} × "
              f"{len(settings.concurrency)} concurrency level(s); {MODE} load over HTTP.")
    try:
        with LiveProgress(err) as progress:
            runs = run_all(settings, placements, progress)
    except ServerFailed as exc:
        raise BenchError(f"a placement could not be served, so the comparison stopped: {exc}",
                         EXIT_RUN_FAILED) from None

    bench = Bench(
        settings={"model": pipeline.name, "variant": pipeline.variant, "model_path": args.model_path,
                  "config": config, "device": args.device, "stand_in_size": args.stand_in_size,
                  "load_mode": MODE, "concurrency": list(settings.concurrency),
                  "requests": settings.requests, "duration_s": settings.duration_s,
                  "warmup": settings.warmup, "input_chars": settings.input_chars,
                  "stream": settings.stream, "seed": settings.seed},
        environment=environment(argv), placements=tuple(placements), runs=runs,
        notes=tuple(notes))
    write_json(bench, output / "results.json")
    charts = write_charts(bench, output)
    (output / "results.md").write_text(markdown(bench, charts))
    render_table(out, bench)
    out.print(f"Wrote {output / 'results.json'}, {output / 'results.md'} and "
              f"{', '.join(charts)} in {output}.", style="dim")
    return 0
