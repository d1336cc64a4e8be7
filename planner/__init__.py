"""stage-planner: plan where the stages of a model-serving pipeline run, before anything starts.

    >>> import planner
    >>> result = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")])
    >>> result.status, [g.name for g in result.plan.groups]
    ('ok', ['pipeline', 'vocoder'])

This module is the public API: the CLI, the launcher, the bench and `planner tune` use only what
`__all__` lists. Everything else under `planner.` is internal and may change.
"""

from importlib import metadata as _metadata

from planner.api import declared_plan, load, solve, solve_pipeline, solve_replicas
from planner.cards import Card, all_cards, find_card
from planner.cluster import Cluster, Node, load_cluster
from planner.cluster import from_ray_nodes as cluster_from_ray_nodes
from planner.errors import ConfigError, ConfigIssue
from planner.graph import build_graph
from planner.pipeline import Pipeline, StageConfig
from planner.placements import (
    MAX_ENUMERATED_UNITS,
    FeasiblePlacement,
    TooManyPlacements,
    feasible_placements,
)
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
)
from planner.render.dicts import request_dict, request_from_dict, result_dict
from planner.flags import command_line, flag, flags, from_options
from planner.flags import parse as parse_flags
from planner.replicas import Packing, pack
from planner.topology import tp_rank_names
from planner.tune.profile import HandoffCost, Profile, StageProfile

load_pipeline = load  # the name the API had before `load`; kept for scripts that use it

try:
    __version__ = _metadata.version("stage-planner")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.1.0"

__all__ = [
    "MAX_ENUMERATED_UNITS", "Assign", "Card", "ConfigError", "ConfigIssue", "Diagnostic",
    "FeasiblePlacement", "Fix", "GpuUsage", "Handoff", "Isolate", "Pipeline", "Plan",
    "PlanWarning", "PlannedStage", "ProcessGroup", "Request", "Result", "StageConfig",
    "TooManyPlacements", "TpProcess", "all_cards", "build_graph", "command_line", "declared_plan",
    "feasible_placements", "find_card", "flag", "flags", "from_options", "load", "load_pipeline",
    "parse_flags", "request_dict", "request_from_dict", "result_dict", "solve", "solve_pipeline",
    "tp_rank_names", "Cluster", "Node", "load_cluster", "cluster_from_ray_nodes", "Packing", "pack",
    "solve_replicas",
    "HandoffCost", "Profile", "StageProfile", "__version__",
]
