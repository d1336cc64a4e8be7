"""What every engine writer reads off a plan the same way: the model an engine loads, the
environment a stage starts with (its threads and the variables its config gave it), the carried
keys that environment holds, and one server command per replica over nodes. The writers differ in
where they put these facts, never in what the facts are."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from planner.pipeline import Carried
from planner.plan import THREAD_VARS, Plan, ProcessGroup, cpu_text

if TYPE_CHECKING:
    from planner.replicas import Packing


def served_model(plan: Plan) -> str:
    """The model an engine loads: the card's first model path, else the name it was asked by."""
    return plan.model_paths[0] if plan.model_paths else plan.model


def thread_env(threads: int) -> dict[str, str]:
    return {var: str(threads) for var in THREAD_VARS}


def is_stage_env(carried: Carried) -> bool:
    """A variable a config put in a stage's `env` (`stages.<name>.env.<VAR>`): every engine's
    stage takes an environment, so this carried key is written, not lost."""
    return len(carried.path) == 4 and carried.path[0] == "stages" and carried.path[2] == "env"


def stage_env(plan: Plan, stage: str, threads: int) -> dict[str, Any]:
    """The environment `stage` starts with: its thread variables at `threads`, then the variables
    its config gave it, values as they were read."""
    given = {c.path[3]: c.value for c in plan.carried if is_stage_env(c) and c.path[1] == stage}
    return {**thread_env(threads), **given}


def pinned(group: ProcessGroup) -> str:
    """How a note names a pinned group that the file has no CPU list for, one note a group; the
    engine's own reason follows a colon. (Ray Serve names them all in one note, its own words.)"""
    return f"process {group.name} is pinned to CPUs {cpu_text(group.cpus)}"


def several_replicas(packing: Packing | None) -> TypeGuard[Packing]:
    """Whether the plan runs as replicas over nodes: an engine with no replica of its own over
    nodes runs one server per replica, and its file lists their commands."""
    return packing is not None and len(packing.replicas) > 1


def replica_commands(plan: Plan, packing: Packing, serve: Callable[[int], str]) -> list[str]:
    """One serve command per replica (`serve(port)`), on its node, each server seeing the node's
    GPUs it was packed onto under the plan's own ids."""
    logical = [g.id for g in plan.gpus]
    out, ports = [], {}
    for r in packing.replicas:
        port = ports[r.node] = ports.get(r.node, 29999) + 1
        where = dict(r.gpus)
        # Renumbering holds only where the plan's ids are 0..n-1, as CUDA_VISIBLE_DEVICES numbers
        # what it lists; otherwise the server sees the node's GPUs as they are.
        visible = (",".join(str(where[l]) for l in logical)
                   if logical == list(range(len(logical))) else "")
        env = f"CUDA_VISIBLE_DEVICES={visible} " if visible else ""
        out.append(f"{r.node}: {env}{serve(port)}")
    return out
