"""The options several commands share: their argparse arguments and the typed values a command
works with, built once from argparse (nothing below the CLI sees an `argparse.Namespace` of
these)."""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from planner.app.cli.declared import Declared, Flag, option
from planner.dotted import DottedFlags
from planner.flags import from_options
from planner.limits import MAX_COUNT
from planner.plan import ComputeRequest, Request

MAX_QUEUED = 1_000_000


# -- argparse types: bad input stops here, before anything starts ----------------------------------
def port(text: str) -> int:
    """A TCP port, checked before anything starts."""
    value = int(text) if text.isascii() and text.isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a TCP port; give a number from 0 to 65535 (0 picks any free port)")
    return value


def bounded_int(low: int, high: int, why: str = ""):
    """A whole number from `low` to `high` (`why`: what sets the bounds, said when out of them)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low}..{high}"
                                             + (f" ({why})" if why else ""))
        return value
    return parse


def positive(kind, high: float = MAX_COUNT, low: float | None = None):
    """A finite number above 0 (at least `low`), at most `high`."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:  # also an int past Python's digit limit
            value = 0
        if not value > 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite positive "
                                             f"{'whole number' if kind is int else 'number'}")
        if value > high or (low is not None and value < low):
            within = f"from {low:g} to {high:g}" if low is not None else f"at most {high:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number {within}")
        return value
    return parse


def replicas(text: str):
    """--replicas: a positive count, or `max`."""
    if text == "max":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of replicas; give a count "
                                         "of 1 or more, or max")
    return value


# -- the shared arguments ----------------------------------------------------------------------------
def add_model_args(p: argparse.ArgumentParser, positional: bool = False,
                   declared: type[Declared] | None = None) -> None:
    """MODEL (with `positional`), then the model's options, or `declared`'s: a command's options
    that hold a `ModelChoice`."""
    if positional:
        p.add_argument("model", nargs="?", metavar="MODEL",
                       help="card name, model path or architecture (see `planner models`)")
    (declared or ModelChoice).add_arguments(p)


def add_placement_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--isolate-stage", action="append", default=[], metavar="STAGE",
                   help="run STAGE alone in a process of its own (repeatable; a role such as "
                        "`vocoder` works too)")
    p.add_argument("--stage-process", action="append", default=[], metavar="STAGE=PROCESS",
                   help="place STAGE in PROCESS; repeat one PROCESS to group stages (repeatable)")
    p.add_argument("--stage-threads", action="append", default=[], metavar="STAGE=N",
                   help="give STAGE N CPU intra-op threads in each copy of its process "
                        "(repeatable; default: the config's `threads`, else 1)")
    p.add_argument("--process-copies", action="append", default=[], metavar="PROCESS=N",
                   help="run N copies of process group PROCESS (or of the group holding a "
                        "stage of that name); each request uses one copy (repeatable)")
    p.add_argument("--process-cpus", action="append", default=[], metavar="PROCESS=CPUS",
                   help="run process group PROCESS on these CPUs only (e.g. 0, 0-1, 0,2), "
                        "each copy on its share of them in order (repeatable; default: "
                        "wherever the OS puts them)")


def add_scale_args(p: argparse.ArgumentParser, cluster: bool = True) -> None:
    p.add_argument("--replicas", type=replicas, metavar="N|max",
                   help="pack N copies of the placement onto the cluster (max: as many as fit)")
    if cluster:
        p.add_argument("--cluster", metavar="FILE|ray",
                       help="nodes to pack onto: a YAML file (nodes: [{name, gpus, cpus}]) or "
                            "`ray` for a running Ray cluster (default: this machine)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--pack", dest="strategy", action="store_const", const="pack",
                     help="fewest nodes and GPUs (default)")
    how.add_argument("--spread", dest="strategy", action="store_const", const="spread",
                     help="an even share on every node and GPU")
    p.set_defaults(strategy="pack")


# -- typed options -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelChoice(Declared):
    """Which pipeline: a card (name, model path or architecture), a YAML config, a variant."""

    model_path: str | None = option(Flag(
        "--model-path", "-m", metavar="MODEL",
        help="card name, model path (e.g. Qwen/Qwen3-TTS-12Hz-0.6B-Base) or architecture"))
    config: str | None = option(Flag(
        "--config", "-c", metavar="FILE",
        help="YAML config: an overlay on a card (`model:`) or a complete pipeline"))
    variant: str | None = option(Flag(
        "--variant", metavar="V", help="card variant (default: the card's default)"))
    # Stage fields from sglang-omni's dotted flags (`--vocoder.gpu_memory_fraction 0.1`), over
    # the config: an sglang-omni `stages:` mapping (None: none given). Not an option of its own:
    # the dotted flags are read before argparse (planner.app.cli).
    overrides: dict | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ModelChoice:
        chosen = super().from_args(args)
        dotted = getattr(args, "dotted", None)
        return dataclasses.replace(chosen, overrides=dotted.overrides()) if dotted else chosen

    def load(self):
        from planner.cards import load_pipeline

        return load_pipeline(model_path=self.model_path, config=self.config,
                             variant=self.variant, overrides=self.overrides)


@dataclass(frozen=True)
class PlacementFlags:
    """--isolate-stage and --stage-process as given; `requests()` parses them (request errors
    are diagnostics of the result, not exceptions)."""

    isolate: tuple[str, ...]
    stage_process: tuple[str, ...]
    stage_threads: tuple[str, ...] = ()
    process_copies: tuple[str, ...] = ()
    process_cpus: tuple[str, ...] = ()
    # sglang-omni's `--STAGE.process P` and `--STAGE.env.OMP_NUM_THREADS N`: the same requests
    # as `--stage-process STAGE=P` and `--stage-threads STAGE=N`, checked with them as one.
    dotted: DottedFlags = DottedFlags()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PlacementFlags:
        return cls(tuple(args.isolate_stage), tuple(args.stage_process),
                   tuple(args.stage_threads), tuple(args.process_copies),
                   tuple(args.process_cpus), getattr(args, "dotted", DottedFlags()))

    def requests(self) -> tuple[Request | ComputeRequest, ...]:
        return from_options(self.isolate, self.stage_process, self.stage_threads,
                            self.process_copies, self.process_cpus) + self.dotted.requests()


@dataclass(frozen=True)
class Scale:
    """--replicas, --cluster and --pack/--spread."""

    replicas: int | Literal["max"] | None
    cluster: str | None
    strategy: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Scale:
        return cls(args.replicas, getattr(args, "cluster", None), args.strategy)

    @property
    def requested(self) -> bool:
        return self.replicas is not None or self.cluster is not None

    @property
    def count(self) -> int | None:
        """As `solve_replicas` takes it: a count (1 when not given), or None for max."""
        return 1 if self.replicas is None else (None if self.replicas == "max" else self.replicas)
