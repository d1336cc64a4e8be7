"""The interleaved rounds of the peer benchmarks (`peer_piper`, `peer_hibari`, `request_costs`):
the options they take for them (our plans as `--ours NAME=FLAGS`, the loads, the rounds and
requests, a smoke run) and the checks on them, declared once, and how a run's requests split
over its rounds and who goes first in each."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence


def ours_entry(text: str) -> tuple[str, list[str]]:
    """`NAME=FLAGS` -> (NAME, the flags split as a shell would)."""
    name, sep, flags = text.partition("=")
    name = name.strip()
    if not sep or not name or not name.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(
            f"--ours {text!r} is not NAME=FLAGS; give a name of letters, digits, - or _, then "
            "`=` and the `planner serve` flags (maybe none), e.g. --ours declared= or --ours "
            "'split=--isolate-stage vocoder'")
    try:
        return name, shlex.split(flags)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--ours {text!r}: its flags do not split ({e}); "
                                         "check the quotes") from None


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def add_round_options(p: argparse.ArgumentParser, defaults: dict, quick: dict,
                      ours_help: str) -> None:
    p.add_argument("--ours", type=ours_entry, action="append", metavar="NAME=FLAGS",
                   help=ours_help)
    p.add_argument("--concurrency", type=positive, action="append", metavar="C",
                   help="closed-loop clients (repeatable; default 1 and 4)")
    p.add_argument("--rounds", type=positive, help=f"interleaved rounds (default "
                   f"{defaults['rounds']}; --quick {quick['rounds']})")
    p.add_argument("--requests", type=positive, help=f"measured requests per system and load, "
                   f"over all rounds (default {defaults['requests']}; --quick "
                   f"{quick['requests']})")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {quick['rounds']} rounds, {quick['requests']} requests")
    p.add_argument("--startup-timeout", type=float, default=300.0, metavar="S")


def settle_rounds(p: argparse.ArgumentParser, args: argparse.Namespace, defaults: dict,
                  quick: dict, default_ours: Sequence[tuple[str, list[str]]],
                  taken: Callable[[str], str | None]) -> dict:
    """Fill in the defaults (those of --quick with it) and refuse what cannot run: two plans of
    one name, a name `taken` says is the peer's (its message), fewer requests than rounds.
    Returns the defaults used."""
    base = quick if args.quick else defaults
    args.rounds = args.rounds or base["rounds"]
    args.requests = args.requests or base["requests"]
    args.concurrency = sorted(set(args.concurrency or [1, 4]))
    args.ours = args.ours or list(default_ours)
    names = [n for n, _ in args.ours]
    if len(set(names)) != len(names):
        p.error(f"--ours names must differ (got {', '.join(names)}); name each entry")
    for name in names:
        if (why := taken(name)) is not None:
            p.error(why)
    if args.requests < args.rounds:
        p.error(f"--requests {args.requests} is fewer than --rounds {args.rounds}; give each "
                "round at least one request")
    return base


def per_round(total: int, rounds: int) -> list[int]:
    """`total` requests split over `rounds` as evenly as whole requests allow."""
    return [total // rounds + (r < total % rounds) for r in range(rounds)]


def rotated(items: list, by: int) -> list:
    """The round's order: each round starts one system further on, so none always goes first."""
    by %= len(items)
    return items[by:] + items[:by]
