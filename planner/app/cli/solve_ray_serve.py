"""`planner solve ... --format ray-serve`: the plan as a Ray Serve config file. Unlike the other
engines' files it carries the request as the user gave it (model, config, variant, flags), which
its application re-solves where it runs."""

from __future__ import annotations

import argparse

from planner.app.cli.options import ModelChoice, PlacementFlags
from planner.plan import Result
from planner.render.engine_text import EngineFile


def ray_serve_text(args: argparse.Namespace, result: Result) -> EngineFile | str:
    """The file for a feasible result, or the one paragraph saying why the plan cannot run on
    Ray Serve."""
    from planner.render.ray_serve import Asked, Unwritable, ray_serve_file

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
        return f"--format ray-serve: {exc}"
    return EngineFile("ray-serve", written.text, written.notes)
