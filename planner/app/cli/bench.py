"""`planner bench`: the same HTTP load against several placements of one model."""

from __future__ import annotations

import argparse

from planner.app.cli.console import console, error
from planner.app.cli.options import add_model_args


def add_parser(sub) -> None:
    # Imported here, not above: the options' module imports `planner.app.cli.options`, and a
    # module below the CLI that imports them first must find this package importable.
    from planner.app.bench.options import BenchOptions

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
    add_model_args(p, positional=True, declared=BenchOptions)


def run(args: argparse.Namespace) -> int:
    from planner.app.bench.options import BenchOptions

    options = BenchOptions.from_args(args)
    try:
        from planner.app.bench.command import run_bench
        from planner.app.bench.exits import BenchError
    except ImportError as exc:
        return error(f"`planner bench` needs the bench extra ({exc.name} is missing); install it "
                     "with `pip install 'stage-planner[bench]'`.")
    try:
        return run_bench(options, console(), console(stderr=True))
    except BenchError as exc:
        error(str(exc))
        return exc.exit_code
