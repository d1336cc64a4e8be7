"""`planner tune --verify K`: serve the top K placements and the declared topology under the same
load with `planner bench` (a child process, so the bench's own isolation and reporting apply),
and read back what it measured, to print beside what was predicted."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.flags import COPIES, ISOLATE, PIN, THREADS, command_line, flags
from planner.tune.errors import TuneError
from planner.tune.verify import Measured, Rows

if TYPE_CHECKING:
    from rich.console import Console

    from planner.tune.choose import Candidate, Choice


# Measured requests per placement and workload when verifying the ranking, as `planner bench`'s
# default, so that a prediction (of a workload of as many) is the figure such a run gives.
DEFAULT_REQUESTS = 96


def bench_name(c: Candidate) -> str:
    """The candidate's flags as a bench placement name (letters, digits and `_.+:@-`): e.g.
    `isolate:vocoder` for `--isolate-stage vocoder`, `pre@p2` for `--stage-process pre=p2`,
    `threads:vocoder@2`, `copies:vocoder@2` and `cpus:vocoder@1` for `--stage-threads`,
    `--process-copies` and `--process-cpus` (a CPU list's `,` becomes `_`), several
    joined by `+`, so the bench's own report says which placement each row is."""
    parts = []
    for f in flags(c.requests):
        option, _, value = f.partition(" ")
        prefix = {ISOLATE: "isolate:", THREADS: "threads:", COPIES: "copies:",
                  PIN: "cpus:"}.get(option, "")
        parts.append(prefix + value.replace("=", "@"))
    name = re.sub(r"[^A-Za-z0-9_.+:@-]", "_", "+".join(parts)) or "declared"
    return name if name[0].isalnum() else f"p{name}"


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


def bench_base(args: argparse.Namespace) -> list[str]:
    """`planner bench` for the pipeline tune was asked about."""
    cmd = [sys.executable, "-m", "planner", "bench"]
    if args.model_path:
        cmd += ["--model-path", args.model_path]
    if args.config:
        cmd += ["--config", str(args.config)]
    if args.variant:
        cmd += ["--variant", args.variant]
    return cmd


def bench_command(args: argparse.Namespace, choice: Choice, picked: list[int],
                  output: Path) -> list[str]:
    cmd = bench_base(args)
    for i, name in _names(choice, picked).items():
        cmd += ["--placement", f"{name}={command_line(choice.ranked[i].requests)}"]
    if not picked:
        # Only the declared topology is to be served. Bench given no --placement would serve
        # its default comparison (every single isolation) and tune would report one of them.
        cmd += ["--placement", "declared="]
    for w in choice.workloads:
        cmd += (["--concurrency", str(w.concurrency)] if w.concurrency is not None
                else ["--rate", f"{w.rate:g}"])
    requests = args.requests or DEFAULT_REQUESTS
    cmd += ["--requests", str(requests), "--output", str(output), "--seed", str(args.seed),
            "--device", args.device, "--rounds", str(min(args.rounds, requests))]
    if args.stand_in_size:
        cmd += ["--stand-in-size", args.stand_in_size]
    if choice.objective == "ttfa":  # measured of the request kind predicted (streamed)
        cmd += ["--stream"]
    return cmd


def _measured(run: dict[str, Any]) -> dict[str, Any]:
    load = run.get("load", run)
    lat = load.get("latency_s") or {}
    ttfa = load.get("ttfa_s") or {}
    ms = (lambda v: None if v is None else round(v * 1000.0, 2))
    return {"throughput_rps": load.get("throughput_rps"), "latency_p50_ms": ms(lat.get("p50")),
            "latency_p99_ms": ms(lat.get("p99")), "ttfa_p90_ms": ms(ttfa.get("p90")),
            "errors": load.get("errors", 0),
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
    # The bench always runs the declared topology, also when tune left it out of the ranking:
    # what it served is reported either way.
    baseline = rows(data.get("baseline") or "declared")
    declared = next((i for i, c in enumerate(choice.ranked) if not c.requests), None)
    if declared is not None:
        return Measured({**ranked, declared: baseline})
    return Measured(ranked, excluded_baseline=baseline)


def run_bench(cmd: list[str], output: Path, err: Console) -> Path:
    """Run `planner bench` as `cmd` (writing to `output`) and return its results.json."""
    err.print(f"tune: verifying with {shlex.join(['planner', *cmd[3:]])}")
    results = output / "results.json"
    results.unlink(missing_ok=True)  # an earlier run's results are not this one's
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 and not results.exists():
        last = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise TuneError(f"verification could not run: planner bench exited with "
                        f"{done.returncode}: {last[0]}")
    return results


def verify(args: argparse.Namespace, choice: Choice, k: int, err: Console) -> Measured:
    picked = to_serve(choice, k)
    output = Path(args.output or f"tune-results/{choice.declared.plan.model}") / "verify"
    return read_results(run_bench(bench_command(args, choice, picked, output), output, err),
                        choice, picked)
