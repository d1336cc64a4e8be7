"""A plan as sglang-omni's config file (its current dialect: `stages:` keyed by stage name).

Every stage is written in full (process, gpu, tp_size, gpu_memory_fraction, env), so that the
file says the plan whatever the model's defaults; `processes:` gives each copied group its
`num_replicas` and `replica_devices`; `mps`, `placement` and every carried key follow. Read back
with `planner solve --config FILE` it gives the same plan (`tests/planner/test_engine_files.py`),
except for what sglang-omni cannot say, which is said instead:

- a stage's threads are environment variables, and sglang-omni refuses two stages of one process
  whose environments differ: such a process is written with its widest stage's count;
- CPU pins: its config has no per-process CPU list (`--cpu-allocator static` plans its own);
- replicas over nodes: it has no cross-node replica; N servers behind its router do that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.errors import ConfigError
from planner.plan import Plan
from planner.render import engine_facts
from planner.render.engine_text import (
    EngineFile,
    block,
    comment,
    commented_commands,
    nested,
    scalar,
    unsaid_comments,
    written_by,
)

if TYPE_CHECKING:
    from planner.replicas import Packing

FORMAT = "sglang-omni"


def _selection(plan: Plan, unsaid: list[str]) -> dict[str, Any]:
    """`config_cls` / `model_path` (and `variant` where no class names it)."""
    from planner.cards import find_card

    carried = {c.path: c.value for c in plan.carried}
    try:
        card = find_card(plan.model)
    except ConfigError:
        card = None
    out: dict[str, Any] = {}
    cls = carried.get(("config_cls",)) or (card.config_class(plan.variant) if card else None)
    if cls is None and card is not None and card.config_classes:
        cls = card.config_class(card.default_variant)
    if cls is not None:
        out["config_cls"] = cls
    elif card is not None:
        unsaid.append(f"sglang-omni has no config class for {plan.model} that the planner "
                      "knows: set config_cls to your model's pipeline config class")
    else:
        unsaid.append(f"{plan.model} is a pipeline of your own, not a built-in card: sglang-omni "
                      "takes its stages from a config class; set config_cls to yours")
    out["model_path"] = engine_facts.served_model(plan)
    if not plan.model_paths:
        unsaid.append(f"{plan.model} lists no model path: model_path names the card; set it "
                      "to your checkpoint")
    if card is not None and plan.variant != card.default_variant and (
            card.config_class(plan.variant) is None or cls != card.config_class(plan.variant)):
        out["variant"] = plan.variant
        unsaid.append(f"sglang-omni has no card variants: `variant: {plan.variant}` tells "
                      "`planner solve --config` which facts this plan was checked against; "
                      "delete it before `sgl-omni serve`")
    return out


def _stage_threads(plan: Plan, unsaid: list[str]) -> dict[str, int]:
    """Each stage's thread count as its process's environment can hold it: one value a process."""
    out = {s.name: s.threads for s in plan.stages}
    for g in plan.groups:
        counts = {s: plan.stage(s).threads for s in g.stages}
        if len(set(counts.values())) > 1:
            widest = max(counts.values())
            said = ", ".join(f"{s} {n}" for s, n in counts.items())
            unsaid.append(f"process {g.name}: sglang-omni's env is one per process and its "
                          f"stages take different thread counts ({said}); written as "
                          f"{widest} for each")
            out.update({s: widest for s in g.stages})
    return out


def _stages(plan: Plan, threads: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in plan.stages:
        fields: dict[str, Any] = {"process": s.process, "gpu": s.gpu}
        if s.gpus:
            fields["tp_size"] = s.tp_size
        if s.gpus or s.fraction is not None:
            fields["gpu_memory_fraction"] = s.fraction
        fields["env"] = engine_facts.stage_env(plan, s.name, threads[s.name])
        fields.update(nested({c.path[2:]: c.value for c in plan.carried
                              if c.path[:2] == ("stages", s.name)
                              and not engine_facts.is_stage_env(c)}))
        out[s.name] = fields
    return out


def _processes(plan: Plan, unsaid: list[str]) -> dict[str, Any]:
    carried = {c.path: c.value for c in plan.carried}
    out: dict[str, Any] = {}
    for g in plan.groups:
        fields: dict[str, Any] = {}
        if g.copies > 1 or g.devices:
            fields["num_replicas"] = g.copies
            if g.gpu is not None:
                fields["replica_devices"] = list(g.copy_gpus())
        fields.update({p[2]: v for p, v in carried.items() if p[:2] == ("processes", g.name)})
        if fields:
            out[g.name] = fields
        if g.cpus:
            unsaid.append(f"{engine_facts.pinned(g)}: sglang-omni's config has no per-process "
                          "CPU list (`sgl-omni serve --cpu-allocator static` pins its processes "
                          "itself)")
    return out


def _replicas(plan: Plan, packing: Packing | None, unsaid: list[str]) -> list[str]:
    if not engine_facts.several_replicas(packing):
        return []
    nodes = sorted({r.node for r in packing.replicas})
    unsaid.append(f"{len(packing.replicas)} replicas over {len(nodes)} node"
                  f"{'s' if len(nodes) != 1 else ''}: sglang-omni has no cross-node replica; run "
                  "one `sgl-omni serve` per replica behind its router (commands in the file)")
    commands = engine_facts.replica_commands(
        plan, packing, lambda port: f"sgl-omni serve --config FILE --host 0.0.0.0 --port {port}")
    urls = " ".join(f"http://{c.split(':', 1)[0]}:{c.rsplit('--port ', 1)[1]}" for c in commands)
    router = f"sgl-omni-router --port 8000 --worker-urls {urls} --policy least_request"
    return commented_commands("Replicas: sglang-omni has no cross-node replica. Run one server "
                              "per replica, on its node, and its router in front:",
                              [*commands, router])


def write(plan: Plan, packing: Packing | None = None) -> EngineFile:
    unsaid: list[str] = []
    selection = _selection(plan, unsaid)
    threads = _stage_threads(plan, unsaid)
    top: dict[str, Any] = dict(selection)
    top.update({c.path[0]: c.value for c in plan.carried
                if len(c.path) == 1 and c.path[0] != "config_cls"})
    if plan.mps is not None:
        top["mps"] = plan.mps
    top["placement"] = {
        "max_total_gpu_memory_fraction_per_gpu":
            plan.placement.max_total_gpu_memory_fraction_per_gpu,
        "require_memory_fraction_for_colocation":
            plan.placement.require_memory_fraction_for_colocation}
    top["stages"] = _stages(plan, threads)
    processes = _processes(plan, unsaid)
    if processes:
        top["processes"] = processes
    replicas = _replicas(plan, packing, unsaid)
    head = [f"# {written_by('sglang-omni config', plan, FORMAT)}.",
            "# Serve it with: sgl-omni serve --config FILE"]
    head += unsaid_comments(unsaid)
    lines = head + [f"{scalar(k)}: {scalar(v)}" for k, v in top.items()
                    if k not in ("placement", "stages", "processes")]
    for key in ("placement", "stages", "processes"):
        if key in top:
            lines += block({key: top[key]})
    return EngineFile(FORMAT, "\n".join(lines + replicas) + "\n", tuple(unsaid))
