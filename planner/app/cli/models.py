"""`planner models`: the built-in model cards."""

from __future__ import annotations

import argparse
import json

from planner.app.cli.console import console
from planner.cards import all_cards
from planner.plan import EXIT_OK


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list the built-in model cards",
                       description="List the built-in model cards with their variants and the "
                                   "model paths and architectures that select them.")
    p.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    cards = all_cards()
    if args.format == "json":
        from planner.render.dicts import models_dict  # loaded by the format that needs it

        print(json.dumps(models_dict(cards), indent=2))
    else:
        from planner.render.text import render_models

        render_models(console(), cards)
    return EXIT_OK
