"""`planner bench` from its options to files and a table; the CLI's only entry point here.

Bad input raises `BenchError` (one paragraph, exit 2) before anything starts: each number was
checked by its argparse type (`planner.app.bench.options`); here, what one option says of another.
The other modules raise their own kinds of it, which pass through to the CLI as they are: a
`--url` target that cannot be reached or does not answer with audio is exit 3, as a placement
that cannot be served, found before anything is written (`targets.check`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

import planner

from planner.app.bench.charts import write_charts
from planner.app.bench.load_results import Slo
from planner.app.bench.load_shapes import Closed, Open, Shape, describe
from planner.app.bench.machine import environment
from planner.app.bench.exits import EXIT_ALL_FAILED, BenchError
from planner.app.bench.options import DEFAULT_REQUESTS, BenchOptions
from planner.app.bench.placements import choose
from planner.app.bench.report import LiveProgress, failures, markdown, render_table, write_json
from planner.app.bench.results import Bench
from planner.app.bench.runner import Settings, run_all
from planner.app.bench.speech import PIPER
from planner.app.bench.targets import UrlTarget, check, parse
from planner.app.bench.texts import warmup_texts

DEFAULT_CONCURRENCY = (1,)
DEFAULT_ARRIVALS = "poisson"


def _check(o: BenchOptions) -> None:
    if not o.model.model_path and not o.model.config:
        if not o.url:
            raise BenchError("give the model to benchmark with --model-path MODEL (a card name, "
                             "model path or architecture; see `planner models`) or --config "
                             "FILE, or a running server with --url NAME=URL.")
        served = [BenchOptions.flag(f) for f in ("placement", "all_feasible", "without_declared")
                  if getattr(o, f)]
        if served:
            raise BenchError(f"{', '.join(served)} choose placements of a model for bench to "
                             "serve; give the model (--model-path MODEL) or drop them.")
    problems = []
    if o.arrivals is not None and not o.rate:
        problems.append("--arrivals shapes open-loop load; add --rate R (requests/s)")
    if o.burstiness is not None and (o.arrivals or DEFAULT_ARRIVALS) != "gamma":
        problems.append("--burstiness is the shape of gamma arrivals; add --arrivals gamma")
    if o.slo_ttfa_ms is not None and not o.stream:
        problems.append("--slo-ttfa-ms needs --stream: time to first audio is measured on "
                        "streamed responses")
    if o.duration is None and (o.requests or DEFAULT_REQUESTS) < o.rounds:
        problems.append(f"--rounds {o.rounds} needs at least one request per round; give "
                        f"--requests {o.rounds} or more, or fewer rounds")
    if o.without_declared and not o.placement:
        problems.append("--without-declared serves only the --placement plans; name at least "
                        "one with --placement NAME='FLAGS'")
    if o.max is not None and not o.all_feasible:
        problems.append("--max only limits --all-feasible; add --all-feasible or drop --max")
    if o.output and Path(o.output).exists() and not Path(o.output).is_dir():
        problems.append(f"--output {o.output} is a file; results go into a directory "
                        "(results.json, results.md and charts): give a new or existing directory")
    if problems:
        raise BenchError("; ".join(problems) + ".")
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError("`planner bench` draws its charts with matplotlib, which is not "
                         "installed; install the bench extra with "
                         "`pip install 'stage-planner[bench]'`.")


def command_line(o: BenchOptions, output: Path) -> list[str]:
    """The bench's arguments spelled out in full, defaults given, so results.json says exactly
    what ran."""
    shapes = loads(o)
    ran = dataclasses.replace(
        o, requests=None if o.duration is not None else (o.requests or DEFAULT_REQUESTS),
        concurrency=tuple(s.concurrency for s in shapes if isinstance(s, Closed)),
        rate=tuple(s.rate for s in shapes if isinstance(s, Open)),
        arrivals=(o.arrivals or DEFAULT_ARRIVALS) if o.rate else None, output=str(output))
    return ["bench", *ran.to_argv()]


def loads(o: BenchOptions) -> tuple[Shape, ...]:
    """The loads to measure, in order, duplicates dropped: arrival rates (open loop) or
    concurrency levels (closed loop, the default)."""
    if o.rate:
        arrivals = o.arrivals or DEFAULT_ARRIVALS
        burstiness = o.burstiness if o.burstiness is not None else 1.0
        return tuple(dict.fromkeys(Open(r, arrivals, burstiness) for r in o.rate))
    return tuple(dict.fromkeys(Closed(c) for c in o.concurrency or DEFAULT_CONCURRENCY))


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


def _targets(o: BenchOptions) -> list[UrlTarget]:
    """The --url targets as a run of these options asks them; a malformed one is exit 2."""
    return [parse(text).for_stream(o.stream) for text in o.url]


def _reach(targets: list[UrlTarget], o: BenchOptions, err: Console) -> list[UrlTarget]:
    """Each target after one request as the run will send it (exit 3 where one fails)."""
    if targets:
        err.print(f"Checking that {', '.join(t.name for t in targets)} "
                  f"answer{'s' if len(targets) == 1 else ''} speech.")
    text = warmup_texts(o.seed, 1, o.input_chars)[0]
    return [check(t, o.stream, text) for t in targets]


def _url_notes(targets: list[UrlTarget], stream: bool) -> list[str]:
    if not targets:
        return []
    names = ", ".join(t.name for t in targets)
    notes = [f"{names}: running outside bench (--url), which neither starts nor stops "
             f"{'it' if len(targets) == 1 else 'them'}: start time, processes, memory and "
             "stage profile unknown (—)"]
    notes += [f"{t.name}: piper's /synthesize answers a whole WAV file, so its first audio "
              "comes with its last" for t in targets if stream and t.speech.api == PIPER]
    return notes


def run_bench(o: BenchOptions, out: Console, err: Console) -> int:
    _check(o)
    targets = _targets(o)
    model = o.model
    config = str(Path(model.config).resolve()) if model.config else None
    pipeline, placements, notes = None, [], []
    if model.model_path or config:
        pipeline = planner.load(model_path=model.model_path, config=config,
                                variant=model.variant)
        placements, notes = choose(pipeline, list(o.placement),
                                   (o.max or 0) if o.all_feasible else None,
                                   declared=not o.without_declared)
        if len(placements) < 2 and not o.without_declared and not targets:
            notes.append(f"{pipeline.name} has no feasible placement other than its declared "
                         "one; measuring that alone")
    taken = {p.name for p in placements}
    for t in targets:
        if t.name in taken:
            raise BenchError(f"two rows are named {t.name!r} (a placement or another --url); "
                             "give each --url a name of its own.")
        taken.add(t.name)
    shapes = loads(o)
    slo = Slo(ttfa_s=None if o.slo_ttfa_ms is None else o.slo_ttfa_ms / 1000,
              latency_s=None if o.slo_p99_ms is None else o.slo_p99_ms / 1000)
    settings = Settings(
        model_path=model.model_path, config=config, variant=model.variant, device=o.device,
        stand_in_size=o.stand_in_size, loads=shapes,
        requests=None if o.duration is not None else (o.requests or DEFAULT_REQUESTS),
        duration_s=o.duration, warmup=o.warmup, input_chars=o.input_chars,
        stream=o.stream, seed=o.seed, slo=slo, rounds=o.rounds)
    name = pipeline.name if pipeline else "-".join(t.name for t in targets)
    output = Path(o.output or Path("bench-results") / name)
    targets = _reach(targets, o, err)  # before anything is written
    _writable_directory(output)
    argv = command_line(o, output)
    env = environment(argv)  # before the load: its load average says how busy the machine was
    mode = shapes[0].mode
    notes += _url_notes(targets, o.stream)
    rows = [*placements, *targets]

    served = f"{len(placements)} placement(s) of {pipeline.name}" if pipeline else ""
    running = f"{len(targets)} running server(s)" if targets else ""
    err.print(f"Benchmarking {' and '.join(filter(None, (served, running)))} at "
              f"{describe(shapes)}; {mode} load over HTTP.")
    with LiveProgress(err) as progress:
        runs = run_all(settings, rows, progress)

    bench = Bench(
        settings={"model": pipeline and pipeline.name,
                  "variant": pipeline and pipeline.variant,
                  "model_path": model.model_path, "config": config, "device": o.device,
                  "stand_in_size": o.stand_in_size,
                  "load_mode": mode,
                  "concurrency": [s.concurrency for s in shapes if isinstance(s, Closed)],
                  "rates": [s.rate for s in shapes if isinstance(s, Open)],
                  "arrivals": (o.arrivals or DEFAULT_ARRIVALS) if o.rate else None,
                  "burstiness": (o.burstiness if o.burstiness is not None else 1.0)
                  if o.rate else None,
                  "requests": settings.requests, "duration_s": settings.duration_s,
                  "rounds": settings.rounds,
                  "warmup": settings.warmup, "input_chars": settings.input_chars,
                  "stream": settings.stream, "seed": settings.seed,
                  "slo_ttfa_ms": o.slo_ttfa_ms, "slo_p99_ms": o.slo_p99_ms,
                  "urls": [t.to_dict() for t in targets]},
        environment=env, placements=tuple(rows), runs=runs,
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
