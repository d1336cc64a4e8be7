"""`planner solve ... --format ray-serve`: the plan as a Ray Serve config file on stdout, and on
stderr a line for each thing the plan decides that the file cannot say."""

from __future__ import annotations

import argparse
import sys

from planner.app.cli.console import console, error
from planner.app.cli.options import ModelChoice, PlacementFlags
from planner.plan import Result


def write(args: argparse.Namespace, result: Result) -> int:
    from planner.render.ray_serve import Asked, Unwritable, ray_serve_file
    from planner.render.text import render_result

    if not result.ok:  # the diagnostics, as the table format gives them; no file
        render_result(console(stderr=True), result)
        return result.exit_code
    model = ModelChoice.from_args(args)
    config = None
    if model.config is not None:
        from planner.config import read_yaml

        config = read_yaml(model.config)  # carried whole: the file runs where this one is not
    asked = Asked(model.model_path, config, model.variant,
                  PlacementFlags.from_args(args).requests())
    try:
        written = ray_serve_file(result, asked)
    except Unwritable as exc:
        return error(f"--format ray-serve: {exc}")
    sys.stdout.write(written.text)
    for note in written.notes:
        print(f"note: ray-serve cannot say {note}", file=sys.stderr)
    return result.exit_code
