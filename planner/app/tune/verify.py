"""`planner tune --verify K`: serve the top K placements and the declared topology under the same
load with `planner bench` (`bench_run`), and read back what it measured, to print beside what was
predicted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.app.bench.options import DEFAULT_REQUESTS
from planner.app.tune.bench_run import bench_name, bench_options, command, placements, run_bench
from planner.tune.verify import Measured, Rows

if TYPE_CHECKING:
    from rich.console import Console

    from planner.app.tune.options import TuneOptions
    from planner.tune.choose import Choice


def _names(choice: Choice, picked: list[int]) -> dict[int, str]:
    """Bench names of the picked candidates, made unique (`#2` appended) if two would clash."""
    out: dict[int, str] = {}
    for i in picked:
        name = bench_name(choice.ranked[i])
        out[i] = name if name not in out.values() and name != "declared" else f"{name}.{i + 1}"
    return out


def to_serve(choice: Choice, k: int) -> list[int]:
    """The top `k` ranked placements that need flags; `planner bench` adds the declared one."""
    return [i for i, c in enumerate(choice.ranked[:k]) if c.requests]


def bench_command(tune: TuneOptions, choice: Choice, picked: list[int],
                  output: Path, declared: bool = True) -> list[str]:
    """Bench serving the `picked` candidates (and, with `declared`, the declared topology, its
    baseline) at every workload asked, as many requests as a prediction is of (`planner
    bench`'s default), streamed where the objective is first audio (measured of the kind
    predicted)."""
    named = {name: choice.ranked[i].requests for i, name in _names(choice, picked).items()}
    loads = choice.workloads
    return command(bench_options(
        tune, tune.requests or DEFAULT_REQUESTS, output, placement=placements(named),
        concurrency=tuple(w.concurrency for w in loads if w.concurrency is not None),
        rate=tuple(w.rate for w in loads if w.concurrency is None),
        stream=choice.objective == "ttfa", without_declared=not declared))


def _measured(run: dict[str, Any]) -> dict[str, Any]:
    load = run.get("load", run)
    lat = load.get("latency_s") or {}
    ttfa = load.get("ttfa_s") or {}
    ms = (lambda v: None if v is None else round(v * 1000.0, 2))
    return {"throughput_rps": load.get("throughput_rps"), "latency_p50_ms": ms(lat.get("p50")),
            "latency_p99_ms": ms(lat.get("p99")), "ttfa_p90_ms": ms(ttfa.get("p90")),
            "errors": load.get("errors", 0),
            # each interleaved round's, in order: a lead one round contradicts is not taken
            "round_throughput_rps": run.get("round_throughput_rps"),
            # how disturbed the measurement was: a judge can set apart the runs the host slowed
            "cpu_stolen_of_running": load.get("cpu_stolen_of_running")}


def read_results(path: Path, choice: Choice, picked: list[int]) -> Measured:
    data = json.loads(path.read_text(encoding="utf-8"))
    by_name: dict[tuple[str, Any, Any], dict[str, Any]] = {}
    for run in data.get("runs", []):
        load = run.get("load", run)
        by_name[run["placement"], load.get("concurrency"), load.get("rate")] = run

    def rows(name: str) -> Rows:
        return [_measured(run) if (run := by_name.get((name, w.concurrency, w.rate)))
                else {"throughput_rps": None} for w in choice.workloads]

    ranked = {i: rows(name) for i, name in _names(choice, picked).items()}
    if data.get("baseline") is None:  # served without it (--without-declared)
        return Measured(ranked)
    # The bench runs the declared topology as its baseline, also when tune left it out of the
    # ranking: what it served is reported either way.
    baseline = rows(data["baseline"])
    declared = next((i for i, c in enumerate(choice.ranked) if not c.requests), None)
    if declared is not None:
        return Measured({**ranked, declared: baseline})
    return Measured(ranked, excluded_baseline=baseline)


def verify(tune: TuneOptions, choice: Choice, k: int, err: Console) -> Measured:
    """--verify K: the top K and the declared topology."""
    picked = to_serve(choice, k)
    output = Path(tune.output or f"tune-results/{choice.declared.plan.model}") / "verify"
    return read_results(run_bench(bench_command(tune, choice, picked, output), output, err),
                        choice, picked)


def serve_two(tune: TuneOptions, choice: Choice, pair: tuple[int, int], output: Path,
              err: Console) -> Measured:
    """Serve the ranked plans `pair` alone (the declared topology only if it is one of them),
    into `output`."""
    picked = [i for i in pair if choice.ranked[i].requests]
    declared = len(picked) < len(pair)
    return read_results(run_bench(bench_command(tune, choice, picked, output, declared),
                                  output, err), choice, picked)
