"""How busy the CPUs are while a placement is served, against what `planner tune`'s model says.

The model shares the cores out as one queue: a core that frees takes the next thread waiting for
any core. Where the machine leaves a core idle while a thread waits (Linux keeps a queue per CPU,
issue 26), the model's throughput is high by as much as the cores idle, with the CPU per request
right. This shows that gap per placement, from numbers nothing else perturbs (/proc/stat):

    python -m benchmarks.tune_eval.cores_busy --config pipeline.yaml --profile answer.json \\
        --placement "" --placement "--isolate-stage s1" --concurrency 4
    python -m benchmarks.tune_eval.cores_busy --pipeline lock-bound --concurrency 8 \\
        --placement "--isolate-stage engine" \\
        --placement "--isolate-stage engine --isolate-stage out"

For each placement it serves the pipeline through the launcher's Python API (C client threads in
this process: no HTTP server and no load generator process, unlike `planner bench`), counts the
CPU time of the whole machine over the middle of the run, and prints the throughput, the CPUs
busy, the CPU per request, and, with `--profile` (a `planner tune` profile.json, or its
answer.json, which carries the profile), the model's throughput and CPUs busy for the same
placement and load. No pass/fail; a record for the model.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

import planner
from launcher import launch
from planner.app.cpu_steal import running_ticks
from planner.errors import ConfigError
from planner.tune.model import Workload, predict
from planner.tune.profile import Profile

from benchmarks.clients import run_clients
from benchmarks.tune_eval.replay import pipeline_for

WARMUP = 8


def busy_cpu_seconds() -> float:
    """CPU-seconds all CPUs have spent not idle since boot (/proc/stat; stolen time counts as
    busy: the CPU was wanted)."""
    ticks = running_ticks()
    if ticks is None:
        raise SystemExit("cores_busy.py reads /proc/stat, which this machine does not have")
    return ticks[1] / os.sysconf("SC_CLK_TCK")


def serve(plan: planner.Plan, concurrency: int, requests: int) -> tuple[float, float]:
    """(requests per second over the whole run, CPUs busy over its middle half)."""
    texts = [f"request number {i} with a few words in it to say." for i in range(requests)]
    done = 0
    lock = threading.Lock()
    window: dict[str, float] = {}
    with launch(plan, device="cpu") as deployment:
        for text in texts[:WARMUP]:
            deployment.synthesize(text, timeout=60)
        left = iter(texts)

        def client() -> None:
            nonlocal done
            while True:
                with lock:
                    text = next(left, None)
                if text is None:
                    return
                deployment.synthesize(text, timeout=120)
                with lock:
                    done += 1
                    # the CPUs are read once a quarter of the requests are done and again at
                    # three quarters: the start and the drain at the end are left out
                    for mark, at in (("start", requests // 4), ("end", 3 * requests // 4)):
                        if done == at:
                            window[mark], window[mark + " cpu"] = (time.perf_counter(),
                                                                   busy_cpu_seconds())

        wall = run_clients(client, concurrency)
    busy = ((window["end cpu"] - window["start cpu"]) / (window["end"] - window["start"])
            if "end" in window else float("nan"))
    return requests / wall, busy


def solved_placements(pipeline, placements: list[str]) -> list[tuple[str, planner.Plan]]:
    """Each `--placement` (flags as `planner solve` takes them; "" the declared topology) as
    (name, plan), all solved before anything is served; ValueError with the line to print for
    the first that cannot be."""
    plans = []
    for placement in placements or [""]:
        try:
            requests = planner.parse_flags(shlex.split(placement))
        except ValueError as e:
            raise ValueError(f"--placement {placement!r}: {e}") from None
        result = planner.solve_pipeline(pipeline, requests=requests)
        if result.plan is None:
            raise ValueError(f"{placement or 'declared'}: {result.diagnostics[0].message}")
        plans.append((placement or "declared", result.plan))
    return plans


def add_pipeline_args(ap: argparse.ArgumentParser) -> None:
    """Which pipeline and which placements of it (`--config`/`--pipeline`, `--placement`)."""
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, help="a complete pipeline config")
    source.add_argument("--pipeline", help="a synthetic pipeline of accuracy.py "
                                           "(lock-bound, native-device, four-mixed, ...) or a "
                                           "built-in card")
    ap.add_argument("--placement", action="append", default=None,
                    help='flags of one placement, e.g. "--isolate-stage s1" ("" is the '
                         "declared one); repeat to compare")


def read_profile(path: Path) -> Profile:
    data = json.loads(path.read_text(encoding="utf-8"))
    return Profile.from_dict(data.get("profile", data))  # an answer.json carries its profile


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pipeline_args(ap)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--profile", type=Path, help="also the model's figures from this profile")
    args = ap.parse_args(argv)
    if args.requests < 8:
        print("error: --requests must be at least 8 (the CPUs are read between the first and "
              "the last quarter of them)", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory() as tmp:  # a synthetic pipeline's config, read at once
            pipeline = (planner.load(config=str(args.config)) if args.config
                        else pipeline_for(args.pipeline, Path(tmp)))
        profile = read_profile(args.profile) if args.profile else None
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    print(f"{pipeline.name}, C={args.concurrency}, {args.requests} requests; {cores} CPUs, load "
          f"average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'placement':44} {'req/s':>6} {'CPUs busy':>9} {'CPU ms/req':>10}"
          + (f" {'model req/s':>11} {'CPUs busy':>9} {'error':>6}" if profile else ""))
    try:
        plans = solved_placements(pipeline, args.placement)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, plan in plans:
        rate, busy = serve(plan, args.concurrency, args.requests)
        row = f"{name:44} {rate:6.1f} {busy:9.2f} {1000 * busy / rate:10.1f}"
        if profile is not None:
            p = predict(plan, profile, Workload(concurrency=args.concurrency))
            model_busy = dict(p.utilization)["cores"] * profile.cores
            row += (f" {p.throughput_rps:11.1f} {model_busy:9.2f} "
                    f"{p.throughput_rps / rate - 1:+6.0%}")
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
