"""`planner tune --rate R --ttfa-p99-ms X --verify K`: serve the rate question's pick, the cheaper
runner-up it names and up to K - 1 other finalists with `planner bench`, open loop at the same
rate (its own load generator and Poisson arrivals), streamed when a target is on first audio, and
read back what each measured; `planner.tune.rate_verify` judges it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.app.tune.bench_run import bench_name, bench_options, command, placements, run_bench
from planner.tune import rate_question
from planner.tune.rate_verify import RateVerdict, Role, judge, replica_to_serve, to_serve

if TYPE_CHECKING:
    from rich.console import Console

    from planner.app.tune.options import TuneOptions
    from planner.tune.rate_question import Estimate, RateAnswer

# Measured requests per plan by default: a p99 needs a few hundred, as many as the question
# simulates per draw.
DEFAULT_REQUESTS = rate_question.RATE_REQUESTS


def requests(tune: TuneOptions) -> int:
    return tune.requests or DEFAULT_REQUESTS


def streamed(a: RateAnswer) -> bool:
    return any(t.metric == "ttfa" for t in a.targets)


def names(plans: list[tuple[Role, Estimate]]) -> dict[str, str]:
    """Bench names by candidate name: the declared topology is bench's baseline (it serves it
    always, as `declared`); the others as `bench_run.bench_name`, made unique."""
    out: dict[str, str] = {}
    for i, (_, e) in enumerate(plans):
        c = e.candidate
        name = bench_name(c) if c.requests else "declared"
        out[c.name] = name if name not in out.values() else f"{name}.{i + 1}"
    return out


def bench_command(tune: TuneOptions, a: RateAnswer, plans: list[tuple[Role, Estimate]],
                  output: Path, rate: float | None = None, alone: bool = False) -> list[str]:
    """Bench serving `plans` at the answer's rate (or `rate`, e.g. one replica's share); `alone`:
    without the declared topology beside them unless it is one of them."""
    by_name = names(plans)
    named = {by_name[e.candidate.name]: e.candidate.requests for _, e in plans
             if e.candidate.requests}
    return command(bench_options(
        tune, requests(tune), output, placement=placements(named), without_declared=alone,
        rate=(a.rate if rate is None else rate,), arrivals="poisson", stream=streamed(a)))


def load_measures(run: dict[str, Any]) -> dict[str, Any]:
    """A bench run's measures, in ms, by the keys `rate_verify.measured_ms` reads."""
    load = run.get("load", run)
    ms = (lambda v: None if v is None else v * 1000.0)
    out: dict[str, Any] = {"requests": load.get("requests", 0), "ok": load.get("ok", 0),
                           "errors": load.get("errors", 0),
                           "throughput_rps": load.get("throughput_rps")}
    for metric, key in (("latency", "latency_s"), ("ttfa", "ttfa_s")):
        summary = load.get(key) or {}
        for q in (50, 90, 99):
            out[f"{metric}_p{q}_ms"] = ms(summary.get(f"p{q}"))
    out["stalled_share"] = (load.get("stream_continuity") or {}).get("stalled_share")
    out["cpu_stolen_of_running"] = load.get("cpu_stolen_of_running")
    return out


def read_results(path: Path, rate: float,
                 bench_names: dict[str, str]) -> dict[str, dict[str, Any] | None]:
    """Each served plan's measures by candidate name (None: bench has no run of it at `rate`)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    baseline = data.get("baseline") or "declared"
    runs = {run["placement"]: run for run in data.get("runs", [])
            if math.isclose(run.get("load", run).get("rate") or 0.0, rate)}
    out: dict[str, dict[str, Any] | None] = {}
    for candidate, name in bench_names.items():
        run = runs.get(baseline if name == "declared" else name)
        out[candidate] = load_measures(run) if run else None
    return out


def verify(tune: TuneOptions, a: RateAnswer, output: Path, err: Console) -> RateVerdict:
    """Serve and judge; bench's own results go to `output`/verify (and a replica's, when
    nothing met on one machine, to `output`/verify-replica)."""
    plans = to_serve(a, tune.verify)
    cmd = bench_command(tune, a, plans, output / "verify")
    measured = read_results(run_bench(cmd, output / "verify", err), a.rate, names(plans))
    replica = replica_to_serve(a)
    if replica is None:
        return judge(a, plans, measured, streamed(a))
    # nothing meets on one machine: serve one of the replicas the answer names, alone at its
    # share of the rate, which is all a node of them would see
    count, e = replica
    share, where = a.rate / count, output / "verify-replica"
    one: list[tuple[Role, Estimate]] = [("replica", e)]
    cmd = bench_command(tune, a, one, where, rate=share, alone=True)
    got = read_results(run_bench(cmd, where, err), share, names(one))
    return judge(a, plans, measured, streamed(a), (count, e, got.get(e.candidate.name)))
