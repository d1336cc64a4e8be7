"""`planner tune`: recommend the placement for a workload from a measured profile."""

from __future__ import annotations

import argparse

from planner.app.cli.console import console, error
from planner.app.cli.options import add_model_args


def add_parser(sub) -> None:
    # Imported here, not above: the options' module imports `planner.app.cli.options`, and a
    # module below the CLI that imports them first must find this package importable.
    from planner.app.tune.options import TuneOptions

    p = sub.add_parser(
        "tune", help="recommend the placement for a workload from a measured profile",
        description="Profile the declared pipeline's stages on this machine (or read --profile), "
                    "predict every placement the planner accepts under the workload (and, for the "
                    "best, more threads and copies), and rank them; --verify K serves the top K and the declared topology to compare.")
    add_model_args(p, positional=True, declared=TuneOptions)


def run(args: argparse.Namespace) -> int:
    from planner.app.tune.command import TuneError, run_tune
    from planner.app.tune.options import TuneOptions

    try:
        return run_tune(TuneOptions.from_args(args), console(), console(stderr=True))
    except TuneError as exc:
        return error(str(exc))
