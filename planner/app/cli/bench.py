"""`planner bench`: the same HTTP load against several placements of one model."""

from __future__ import annotations

import argparse

from planner.app.cli.console import console, error
from planner.app.cli.options import add_model_args


def add_parser(sub) -> None:
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
    add_model_args(p, positional=True)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--placement", action="append", default=[], metavar="NAME='FLAGS'",
                       help="a placement to compare, e.g. split='--isolate-stage vocoder' "
                            "(repeatable; the declared topology is always measured too)")
    which.add_argument("--all-feasible", action="store_true",
                       help="compare every feasible partition of the stages into processes")
    p.add_argument("--without-declared", action="store_true",
                   help="with --placement: serve only the placements named (the declared "
                        "topology too only when one of them is it); no ratios are given")
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


def run(args: argparse.Namespace) -> int:
    try:
        from planner.app.bench.command import BenchError, run_bench
    except ImportError as exc:
        return error(f"`planner bench` needs the bench extra ({exc.name} is missing); install it "
                     "with `pip install 'stage-planner[bench]'`.")
    try:
        return run_bench(args, console(), console(stderr=True))
    except BenchError as exc:
        error(str(exc))
        return exc.exit_code
