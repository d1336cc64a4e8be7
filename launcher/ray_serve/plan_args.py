"""The plan a Ray Serve application runs: re-solved from its config file's `args` with the
planner's public API (the model, its config, variant and requests, and the CPUs its threads were
counted against), exactly as `planner solve --format ray-serve` solved it.

args (every key optional, but one of `model` and `config`):
    model: card name, model path or architecture       config: an overlay or a complete pipeline
    variant: the card's variant                          requests: [{isolate: vocoder}, ...]
    overrides: stage fields as sglang-omni's dotted flags give them, over the config
    cpus: the CPUs threads were counted against (absent: not counted)
    front_door: the ingress deployment's name (default front_door)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ARGS = ("model", "config", "variant", "overrides", "requests", "cpus", "front_door")
FRONT_DOOR = "front_door"


def solved(args: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(plan, its result as JSON data) for `args`; raises ValueError (one paragraph) for args
    the planner refuses."""
    import planner

    unknown = sorted(set(args) - set(ARGS))
    if unknown:
        raise ValueError(f"unknown args {', '.join(unknown)}; this application takes "
                         f"{', '.join(ARGS)}")
    try:
        requests = [planner.request_from_dict(r) for r in args.get("requests") or ()]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"args.requests: {exc}; write each as `planner solve --format "
                         "ray-serve` does, e.g. {isolate: vocoder}") from None
    cpus = args.get("cpus")
    try:
        pipeline = planner.load(args.get("model"), args.get("config"), args.get("variant"),
                                args.get("overrides"))
        result = planner.solve_pipeline(pipeline, requests=requests, cpus=cpus,
                                        count_cpus=cpus is not None)
    except planner.ConfigError as exc:
        raise ValueError(exc.paragraph()) from None
    if not result.ok:
        said = "; ".join(f"{d.code}: {d.message} (hint: {d.hint})" for d in result.diagnostics)
        raise ValueError(f"the plan in args is {result.status}: {said}")
    return result.plan, planner.result_dict(result)
