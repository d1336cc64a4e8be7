"""`planner tune`: recommend the placement for a workload from a measured profile."""

from __future__ import annotations

import argparse

from planner.app.cli.console import console, error
from planner.app.cli.options import add_model_args, positive
from planner.limits import MAX_CONCURRENCY, MAX_MS, MAX_RATE, MIN_RATE


def add_parser(sub) -> None:
    p = sub.add_parser(
        "tune", help="recommend the placement for a workload from a measured profile",
        description="Profile the declared pipeline's stages on this machine (or read --profile), "
                    "predict every placement the planner accepts under the workload (and, for the "
                    "best, more threads and copies), and rank them; --verify K serves the top K and the declared topology to compare.")
    add_model_args(p, positional=True)
    p.add_argument("--concurrency", type=positive(int, MAX_CONCURRENCY), action="append",
                   metavar="C", help="closed-loop clients (repeatable; default 1 and 4)")
    p.add_argument("--rate", type=positive(float, MAX_RATE, MIN_RATE), action="append",
                   metavar="R",
                   help="open-loop Poisson arrivals in requests/s (repeatable)")
    p.add_argument("--objective", choices=("throughput", "latency", "ttfa"), default="throughput")
    p.add_argument("--slo-p99-ms", type=positive(float, MAX_MS), metavar="X",
                   help="leave out placements whose predicted p99 exceeds X ms at any workload")
    for q in (50, 90, 99):
        p.add_argument(f"--ttfa-p{q}-ms", type=positive(float, MAX_MS), metavar="X",
                       help=f"with one --rate: the cheapest plan predicted to keep time to first "
                            f"audio p{q} at most X ms" + (" (any of these; with --slo-p99-ms, "
                            "latency too); docs/tune.md" if q == 50 else ""))
    p.add_argument("--max-processes", type=positive(int), metavar="N")
    p.add_argument("--profile", metavar="FILE", help="a profile.json from an earlier run")
    p.add_argument("--profile-requests", type=positive(int), default=12, metavar="N",
                   help="requests per profiling pass (default 12)")
    p.add_argument("--cores", type=positive(int), metavar="N",
                   help="predict for a machine with N cores (default: the profiled machine's)")
    p.add_argument("--cpu-speed", type=positive(float, 1.0, 0.05), default=1.0, metavar="S",
                   help="predict for CPUs that run S (0.05-1) of the time they are wanted, as a "
                        "shared host's do while its hypervisor serves other guests (default 1: "
                        "full speed, as profiled); a rate question measures how fast short "
                        "bursts of work run now and says so when they are slow")
    p.add_argument("--placements-only", action="store_true",
                   help="rank placements alone, one thread per stage and one copy per group "
                        "(default: also give the best placements' busiest stages more threads "
                        "and their processes more copies, within the machine's CPUs)")
    p.add_argument("--verify", type=positive(int), metavar="K",
                   help="serve the top K and the declared topology under the same load (a "
                        "rate question: its pick, the cheaper plan it names and K - 1 more "
                        "finalists, open loop at the rate)")
    p.add_argument("--requests", type=positive(int), metavar="N",
                   help="measured requests per placement and workload when verifying (default "
                        "96, as planner bench: --verify can change the recommendation, and 48 "
                        "left a placement 5-15%% apart between runs; a rate question's 300, "
                        "for a p99)")
    p.add_argument("--rounds", type=positive(int), default=3, metavar="N",
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


def run(args: argparse.Namespace) -> int:
    from planner.app.tune_command import TuneError, run_tune

    try:
        return run_tune(args, console(), console(stderr=True))
    except TuneError as exc:
        return error(str(exc))
