"""stage-planner: plan where the stages of a model-serving pipeline run, before anything starts.

    >>> import planner
    >>> result = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")])
    >>> result.status, [g.name for g in result.plan.groups]
    ('ok', ['pipeline', 'vocoder'])

This module is the public API: the CLI, the launcher, the bench and `planner tune` use only what
`__all__` lists. Everything else under `planner.` is internal and may change.
"""

from planner.api import declared_plan, load, solve, solve_pipeline, solve_replicas
from planner.cards import Card, all_cards, find_card
from planner.errors import ConfigError, ConfigIssue
from planner.fair_queue import FairQueue
from planner.pipeline import DEFAULT_SAMPLE_RATE, Pipeline, StageConfig
from planner.plan import (
    Assign,
    Diagnostic,
    Fix,
    GpuUsage,
    Handoff,
    Isolate,
    Plan,
    PlannedStage,
    PlanWarning,
    ProcessGroup,
    Request,
    Result,
    TpProcess,
    cpu_text,
)
from planner.flags import command_line, flag, flags, from_options
from planner.flags import parse as parse_flags
from planner.topology import tp_rank_names

load_pipeline = load  # the name the API had before `load`; kept for scripts that use it

# Loaded on first use: `planner solve` needs none of these, and importing them (the package
# metadata above all) cost it a fifth of its cold start beside OR-Tools' own import; the graph,
# the placement enumerator and the JSON shapes are for other commands and formats.
_LAZY = {"allowed_cpus": ("planner.cpus", "allowed_cpus"),
         "Cluster": ("planner.cluster", "Cluster"), "Node": ("planner.cluster", "Node"),
         "load_cluster": ("planner.cluster", "load_cluster"),
         "cluster_from_ray_nodes": ("planner.cluster", "from_ray_nodes"),
         "Packing": ("planner.replicas", "Packing"), "pack": ("planner.replicas", "pack"),
         "HandoffCost": ("planner.tune.profile", "HandoffCost"),
         "Profile": ("planner.tune.profile", "Profile"),
         "StageProfile": ("planner.tune.profile", "StageProfile"),
         "build_graph": ("planner.graph", "build_graph"),
         "MAX_ENUMERATED_UNITS": ("planner.placements", "MAX_ENUMERATED_UNITS"),
         "FeasiblePlacement": ("planner.placements", "FeasiblePlacement"),
         "TooManyPlacements": ("planner.placements", "TooManyPlacements"),
         "feasible_placements": ("planner.placements", "feasible_placements"),
         "request_dict": ("planner.render.dicts", "request_dict"),
         "request_from_dict": ("planner.render.dicts", "request_from_dict"),
         "result_dict": ("planner.render.dicts", "result_dict")}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("stage-planner")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0.1.0"


def __getattr__(name: str):  # noqa: ANN202 - PEP 562
    if name == "__version__":
        value = _version()
    elif name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'planner' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "__version__"})


__all__ = [
    "MAX_ENUMERATED_UNITS", "Assign", "Card", "ConfigError", "ConfigIssue", "Diagnostic",
    "FeasiblePlacement", "Fix", "GpuUsage", "Handoff", "Isolate", "Pipeline", "Plan",
    "PlanWarning", "PlannedStage", "ProcessGroup", "Request", "Result", "StageConfig",
    "TooManyPlacements", "TpProcess", "all_cards", "build_graph", "command_line", "declared_plan",
    "feasible_placements", "find_card", "flag", "flags", "from_options", "load", "load_pipeline",
    "parse_flags", "request_dict", "request_from_dict", "result_dict", "solve", "solve_pipeline",
    "tp_rank_names", "Cluster", "Node", "load_cluster", "cluster_from_ray_nodes", "Packing", "pack",
    "solve_replicas",
    "HandoffCost", "Profile", "StageProfile", "FairQueue", "__version__",
    "allowed_cpus", "cpu_text", "DEFAULT_SAMPLE_RATE",
]
