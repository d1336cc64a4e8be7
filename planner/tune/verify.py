"""`planner tune --verify K`: serve the top K placements and the declared topology under the same
load with `planner bench` (a child process, so the bench's own isolation and reporting apply),
read back what it measured, to print beside what was predicted, and judge the pick by it."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.flags import ISOLATE, command_line, flags
from planner.tune.choose import TIE, objective_score

if TYPE_CHECKING:
    from rich.console import Console

    from planner.tune.choose import Candidate, Choice


def bench_name(c: Candidate) -> str:
    """The candidate's flags as a bench placement name (letters, digits and `_.+:@-`): e.g.
    `isolate:vocoder` for `--isolate-stage vocoder`, `pre@p2` for `--stage-process pre=p2`, several
    joined by `+`, so the bench's own report says which placement each row is."""
    parts = []
    for f in flags(c.requests):
        option, _, value = f.partition(" ")
        parts.append(f"isolate:{value}" if option == ISOLATE else value.replace("=", "@"))
    name = re.sub(r"[^A-Za-z0-9_.+:@-]", "_", "+".join(parts)) or "declared"
    return name if name[0].isalnum() else f"p{name}"


def _names(choice: Choice, picked: list[int]) -> dict[int, str]:
    """Bench names of the picked candidates, made unique (`#2` appended) if two would clash."""
    out: dict[int, str] = {}
    for i in picked:
        name = bench_name(choice.ranked[i])
        out[i] = name if name not in out.values() and name != "declared" else f"{name}.{i + 1}"
    return out


def bench_command(args: argparse.Namespace, choice: Choice, picked: list[int],
                  output: Path) -> list[str]:
    cmd = [sys.executable, "-m", "planner", "bench"]
    if args.model_path:
        cmd += ["--model-path", args.model_path]
    if args.config:
        cmd += ["--config", str(args.config)]
    if args.variant:
        cmd += ["--variant", args.variant]
    for i, name in _names(choice, picked).items():
        cmd += ["--placement", f"{name}={command_line(choice.ranked[i].requests)}"]
    for w in choice.workloads:
        cmd += (["--concurrency", str(w.concurrency)] if w.concurrency is not None
                else ["--rate", f"{w.rate:g}"])
    cmd += ["--requests", str(args.requests), "--output", str(output), "--seed", str(args.seed),
            "--device", args.device, "--rounds", str(min(args.rounds, args.requests))]
    if args.stand_in_size:
        cmd += ["--stand-in-size", args.stand_in_size]
    return cmd


def _measured(run: dict[str, Any]) -> dict[str, Any]:
    load = run.get("load", run)
    lat = load.get("latency_s") or {}
    ttfa = load.get("ttfa_s") or {}
    ms = (lambda v: None if v is None else round(v * 1000.0, 2))
    return {"throughput_rps": load.get("throughput_rps"), "latency_p50_ms": ms(lat.get("p50")),
            "latency_p99_ms": ms(lat.get("p99")), "ttfa_p90_ms": ms(ttfa.get("p90")),
            "errors": load.get("errors", 0)}


def read_results(path: Path, choice: Choice, picked: list[int]) -> dict[int, list[dict[str, Any]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    by_name: dict[tuple[str, Any, Any], dict[str, Any]] = {}
    for run in data.get("runs", []):
        load = run.get("load", run)
        by_name[run["placement"], load.get("concurrency"), load.get("rate")] = run
    names = _names(choice, picked)
    declared = next((i for i, c in enumerate(choice.ranked) if not c.requests), None)
    if declared is not None:
        names[declared] = data.get("baseline") or "declared"  # the bench always runs it
    out: dict[int, list[dict[str, Any]]] = {}
    for i, name in names.items():
        rows = []
        for w in choice.workloads:
            run = by_name.get((name, w.concurrency, w.rate))
            rows.append(_measured(run) if run else {"throughput_rps": None})
        out[i] = rows
    return out


def verify(args: argparse.Namespace, choice: Choice, k: int,
           err: Console) -> dict[int, list[dict[str, Any]]]:
    picked = [i for i, c in enumerate(choice.ranked[:k]) if c.requests]  # bench adds the declared
    output = Path(args.output or f"tune-results/{choice.declared.plan.model}") / "verify"
    cmd = bench_command(args, choice, picked, output)
    err.print(f"tune: verifying with {shlex.join(['planner', *cmd[3:]])}")
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    results = output / "results.json"
    if done.returncode not in (0,) and not results.exists():
        from planner.app.tune_command import TuneError

        raise TuneError(f"verification could not run: planner bench exited with "
                        f"{done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return read_results(results, choice, picked)


def errors(predicted: Candidate, measured: list[dict[str, Any]]) -> list[float | None]:
    out = []
    for p, m in zip(predicted.predicted, measured):
        got = m.get("throughput_rps")
        out.append(None if not got else (p.throughput_rps - got) / got)
    return out


@dataclass(frozen=True)
class Verdict:
    """What the served placements say of the predicted pick (index 0 of `choice.ranked`)."""

    best: int  # index into choice.ranked of the placement that measured best by the objective
    gain: float  # its measured score over the pick's, >= 1; 1.0 when the pick measured best
    overturned: bool  # it beat the pick by more than the model resolves: recommend it instead
    served: int  # placements measured at every workload


def _measured_score(rows: list[dict[str, Any]], objective: str) -> float | None:
    """`choose.objective_score` of what was measured; None if a workload went unmeasured or had
    errors."""
    if not rows or any(not r.get("throughput_rps") or not r.get("latency_p50_ms")
                       or r.get("errors") for r in rows):
        return None
    return objective_score(objective, [r["throughput_rps"] for r in rows],
                           [r["latency_p50_ms"] for r in rows], [r.get("ttfa_p90_ms") for r in rows])


def verdict(choice: Choice, measured: dict[int, list[dict[str, Any]]]) -> Verdict | None:
    """The placement that measured best, if the pick was measured. The same tie applies as to
    predictions: a measured lead within it is not a reason to change the recommendation."""
    scores = {i: _measured_score(rows, choice.objective) for i, rows in measured.items()}
    scores = {i: v for i, v in scores.items() if v is not None}
    if 0 not in scores:
        return None
    best = max(scores, key=lambda i: (scores[i], -i))
    mine, top = scores[0], scores[best]
    gain = top / mine if top > 0 else mine / top
    return Verdict(best, gain, best != 0 and top - mine > abs(mine) * TIE, len(scores))
