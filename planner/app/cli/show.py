"""`planner show`: a pipeline's stages, handoffs and declared topology."""

from __future__ import annotations

import argparse
import json

from planner.api import declared_plan
from planner.app.cli.console import FORMATS, console
from planner.app.cli.options import ModelChoice, add_model_args
from planner.plan import EXIT_OK


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="show a pipeline's stages, handoffs and declared topology",
                       description="Show stages, handoffs (process-safe or why not), the declared "
                                   "process groups, fractions and per-GPU totals.")
    add_model_args(p, positional=True)
    p.add_argument("--format", choices=FORMATS, default="table")


def run(args: argparse.Namespace) -> int:
    pipeline = ModelChoice.from_args(args).load()
    plan = declared_plan(pipeline)
    if args.format == "json":
        from planner.render.dicts import show_dict  # each format loads its own renderer

        print(json.dumps(show_dict(pipeline, plan), indent=2))
    elif args.format == "dot":
        from planner.render.dot import plan_dot

        print(plan_dot(plan, pipeline))
    else:
        from planner.render.text import render_show

        render_show(console(), pipeline, plan)
    return EXIT_OK
