"""stage-planner: plan where the stages of a model-serving pipeline run, before anything starts.

    >>> import planner
    >>> result = planner.solve(model_path="qwen3-tts", isolate_stages=["vocoder"])
    >>> result.status, [g.name for g in result.plan.groups]
    ('ok', ['pipeline', 'vocoder'])
"""

from planner.api import solve, solve_pipeline
from planner.cards import all_cards, find_card, load_pipeline
from planner.errors import ConfigError
from planner.graph import build_graph
from planner.plan import Diagnostic, Plan, Result

__all__ = ["solve", "solve_pipeline", "load_pipeline", "all_cards", "find_card", "build_graph",
           "ConfigError", "Diagnostic", "Plan", "Result"]
