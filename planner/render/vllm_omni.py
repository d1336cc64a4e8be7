"""A plan as a vLLM-Omni deploy config (`vllm serve MODEL --omni --deploy-config FILE`).

vLLM-Omni's deploy YAML lists `stages:` by `stage_id`, each with its placement fields (its
`vllm_omni/config/stage_config.py`, `StageDeployConfig`): `devices` (a string of GPU ids; with
`num_replicas` > 1, one id per replica and TP rank, replica by replica), `num_replicas`,
`gpu_memory_utilization`, `tensor_parallel_size` and `env`. One entry is written per GPU stage of
the plan, in pipeline order, with the stage's name in a comment. What vLLM-Omni cannot say is
said in the file and in `EngineFile.unsaid`:

- each stage is its own engine process there: stages the plan runs in one process are written
  as separate engines (a shared process cannot be written);
- stages on CPU are no deploy stage (vLLM-Omni prepares inputs in its own server process);
- CPU pins, MPS, sglang-omni's carried keys, replicas over nodes (one server per replica).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.plan import Plan
from planner.render import engine_facts
from planner.render.engine_text import (
    EngineFile,
    block,
    comment,
    commented_commands,
    unsaid_comments,
    written_by,
)

if TYPE_CHECKING:
    from planner.replicas import Packing

FORMAT = "vllm-omni"


def stage_entries(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """(stage name, deploy fields) for every GPU stage, `stage_id` in pipeline order."""
    out = []
    for s in (s for s in plan.stages if s.gpus):
        group = plan.group_of(s.name)
        if group is None:  # a tensor-parallel stage: one engine over its ranks' GPUs
            copies, devices = 1, list(s.gpus)
        else:
            copies, devices = group.copies, list(group.copy_gpus())
        fields: dict[str, Any] = {"stage_id": len(out), "devices": ",".join(map(str, devices)),
                                  "num_replicas": copies}
        if s.fraction is not None:
            fields["gpu_memory_utilization"] = s.fraction
        fields["tensor_parallel_size"] = s.tp_size
        # strings, as a process environment holds them (sglang-omni's file keeps them as read)
        env = engine_facts.stage_env(plan, s.name, s.threads)
        fields["env"] = {var: str(v) for var, v in env.items()}
        out.append((s.name, fields))
    return out


def _unsaid(plan: Plan, packing: Packing | None) -> list[str]:
    out = []
    for g in plan.groups:
        on_gpu = [s for s in g.stages if plan.stage(s).gpus]
        if len(on_gpu) > 1:
            out.append(f"process {g.name} runs {', '.join(on_gpu)} in one process; vLLM-Omni runs "
                       "each stage as its own engine, so they are written as separate stages")
        if g.cpus:
            out.append(f"{engine_facts.pinned(g)}: a vLLM-Omni deploy config has no CPU list "
                       "(pin the server with taskset)")
    cpu = [s.name for s in plan.stages if not s.gpus]
    if cpu:
        out.append(f"{', '.join(cpu)} run{'s' if len(cpu) == 1 else ''} on CPU: no vLLM-Omni "
                   "deploy stage, it prepares inputs in its own server process")
    missing = [s.name for s in plan.stages if s.gpus and s.fraction is None]
    if missing:
        out.append(f"{', '.join(missing)} declare{'s' if len(missing) == 1 else ''} no GPU memory "
                   "fraction: vLLM-Omni's default gpu_memory_utilization applies")
    if plan.mps not in (None, "off"):
        out.append(f"mps: {plan.mps} has no vLLM-Omni deploy field: start the CUDA MPS daemon "
                   "yourself")
    engine = sorted(c.key for c in plan.carried if not engine_facts.is_stage_env(c))
    if engine:
        out.append("sglang-omni's keys " + ", ".join(engine) + " are not vLLM-Omni's: not "
                   "written")
    if engine_facts.several_replicas(packing):
        out.append(f"{len(packing.replicas)} replicas over nodes: one vLLM-Omni server per "
                   "replica, behind your load balancer (commands in the file)")
    return out


def write(plan: Plan, packing: Packing | None = None) -> EngineFile:
    unsaid = _unsaid(plan, packing)
    model = engine_facts.served_model(plan)
    lines = [f"# {written_by('vLLM-Omni deploy config', plan, FORMAT)}.",
             f"# Serve it with: vllm serve {model} --omni --deploy-config FILE"]
    lines += comment("One stage per GPU stage of the plan, stage_id in pipeline order: check the "
                     "ids against your model's stage order in vLLM-Omni, and keep its other "
                     "deploy fields (connectors, sampling parameters) beside these.")
    lines += unsaid_comments(unsaid)
    entries = stage_entries(plan)
    lines.append("stages:" if entries else "stages: []")
    for name, fields in entries:
        group = plan.group_of(name)
        lines.append(f"  # {name} (process {group.name if group else plan.stage(name).process})")
        first, *rest = block(fields, 4)
        lines.append("  - " + first.lstrip())
        lines += rest
    if engine_facts.several_replicas(packing):
        def serve(port: int) -> str:
            return f"vllm serve {model} --omni --deploy-config FILE --port {port}"

        lines += commented_commands("Replicas: one server per replica, on its node:",
                                    engine_facts.replica_commands(plan, packing, serve))
    return EngineFile(FORMAT, "\n".join(lines) + "\n", tuple(unsaid))

