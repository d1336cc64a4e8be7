"""`--format ray-serve`: a plan as a Ray Serve config file (what `serve run FILE` and
`serve deploy FILE` take, `ray.serve.schema.ServeDeploySchema`).

The file runs the plan's own application (`IMPORT_PATH`), which re-solves `args` (the model,
config, variant, requests and CPUs this plan was solved for) with the planner, so the file and
what it starts describe one plan. The mapping:
- a process group -> a deployment of the same name; its copies x the replicas asked ->
  `num_replicas`; its widest stage's threads -> `ray_actor_options.num_cpus`; the memory
  fractions of its GPU stages -> `num_gpus` (a GPU stage without one: the whole GPU, 1);
- the front door (`planner serve`'s HTTP app) -> one more deployment, `front_door`, one replica
  per replica asked, reserving no CPU (the plan counts none for it).
What Ray Serve cannot say (`unexpressed`) is a comment in the file and, from the CLI, a line on
stderr each. A plan the application cannot run (tensor parallelism; a process group feeding two
others; terminal stages in several groups) is refused (`Unwritable`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.flags import command_line
from planner.plan import ComputeRequest, Plan, ProcessGroup, Request, Result, cpu_text
from planner.render.dicts import request_dict
from planner.render.engine_text import written_by

IMPORT_PATH = "launcher.ray_serve.app:build"
FRONT_DOOR = "front_door"
HTTP_OPTIONS = {"host": "127.0.0.1", "port": 8000}  # Ray Serve's defaults, written to be edited
GPU_STEP = 1e-4  # Ray's granularity of fractional resources


@dataclass(frozen=True)
class Asked:
    """What the application re-solves: the request as the user gave it."""

    model: str | None  # card name, model path or architecture (None: a complete config)
    config: Mapping[str, Any] | None  # the --config file's contents
    variant: str | None
    requests: tuple[Request | ComputeRequest, ...] = ()
    # stage fields given as sglang-omni's dotted flags (`--vocoder.gpu_memory_fraction 0.1`)
    overrides: Mapping[str, Any] | None = None


class Unwritable(ValueError):
    """A plan the Ray Serve application cannot run; the message is one paragraph."""


@dataclass(frozen=True)
class RayServeFile:
    text: str  # the YAML file, comments first
    notes: tuple[str, ...]  # what Ray Serve cannot say about the plan (also comments in `text`)


def ray_serve_file(result: Result, asked: Asked) -> RayServeFile:
    """The config file for a feasible result (with `--replicas`: its packing)."""
    import yaml

    plan = result.plan
    if plan is None:
        raise ValueError("only a feasible result has a plan to write")
    _check(plan)
    notes = unexpressed(result)
    config = serve_config(result, asked)
    return RayServeFile(_header(plan, asked, config, notes)
                        + yaml.safe_dump(config, sort_keys=False, width=100), notes)


def serve_config(result: Result, asked: Asked) -> dict[str, Any]:
    plan = result.plan
    assert plan is not None
    replicas = len(result.packing.replicas) if result.packing is not None else 1
    door = front_door_name(plan)
    args: dict[str, Any] = {"model": asked.model, "config": asked.config,
                            "variant": asked.variant, "overrides": asked.overrides,
                            "requests": [request_dict(r) for r in asked.requests],
                            "cpus": plan.cpu.cpus if plan.cpu is not None else None,
                            "front_door": door}
    deployments = [{"name": door, "num_replicas": replicas,
                    "ray_actor_options": {"num_cpus": 0}}]
    no_gpus = result.cluster is not None and result.cluster.gpu_count == 0
    for g in plan.groups:
        deployments.append({"name": g.name, "num_replicas": g.copies * replicas,
                            "ray_actor_options": {"num_cpus": threads(plan, g),
                                                  "num_gpus": 0 if no_gpus else num_gpus(plan, g)}})
    return {"proxy_location": "EveryNode", "http_options": dict(HTTP_OPTIONS),
            "applications": [{"name": plan.model, "route_prefix": "/",
                              "import_path": IMPORT_PATH,
                              "args": {k: v for k, v in args.items() if v not in (None, [])},
                              "deployments": deployments}]}


def front_door_name(plan: Plan) -> str:
    names = {g.name for g in plan.groups}
    return next(n for n in (FRONT_DOOR, *(f"{FRONT_DOOR}_{i}" for i in range(2, 99)))
                if n not in names)


def threads(plan: Plan, group: ProcessGroup) -> int:
    """CPUs one copy of the group takes: its widest stage's threads (`Plan.cpu_demand`)."""
    return max(plan.stage(s).threads for s in group.stages)


def num_gpus(plan: Plan, group: ProcessGroup) -> float:
    """The GPU share of one copy: its GPU stages' fractions; a stage without one takes the GPU."""
    if group.gpu is None:
        return 0
    fractions = [plan.stage(s).fraction for s in group.stages if plan.stage(s).gpus]
    if not fractions or any(f is None for f in fractions):
        return 1
    return max(GPU_STEP, round(sum(fractions), 4))


def unexpressed(result: Result) -> tuple[str, ...]:
    """What the plan decides and a Ray Serve config cannot say, one sentence each."""
    plan = result.plan
    assert plan is not None
    out = []
    if len(plan.groups) > 1:
        out.append(
            "a pipeline copy on one node: Ray Serve places each deployment's replicas on its own "
            "(placement_group_bundles and gang_scheduling_config hold together the replicas of "
            "one deployment, never of two), so the groups of one copy may land on different "
            "nodes; the application hands each payload to a replica on its own node when there "
            "is one (locality routing), and across nodes through Ray otherwise")
    if result.packing is not None:
        per_node: dict[str, int] = {}
        for r in result.packing.replicas:
            per_node[r.node] = per_node.get(r.node, 0) + 1
        out.append("which node runs which replica (planned: " + ", ".join(
            f"{n} on {node}" for node, n in per_node.items()) + "): Ray Serve chooses, within "
            "the resources each deployment asks")
    on_gpu = [g for g in plan.groups if g.gpu is not None]
    if result.cluster is not None and result.cluster.gpu_count == 0 and on_gpu:
        out.append("GPUs: the cluster has none, so num_gpus is 0 and the GPU stages run on CPU")
    elif on_gpu:
        shared = {}
        for g in on_gpu:
            shared.setdefault(g.gpu, []).append(g.name)
        said = "; ".join(f"GPU {gpu}: {', '.join(names)}" for gpu, names in shared.items())
        limits = sorted({u.limit for u in plan.gpus if u.limit < 1})
        limit = (f"; Ray fills a GPU up to 1.0, not to the plan's limit of "
                 f"{', '.join(f'{x:g}' for x in limits)}" if limits else "")
        out.append(f"GPU ids ({said}): Ray gives each replica a GPU with room for its num_gpus, "
                   f"so groups the plan puts on one GPU share one only where Ray packs them{limit}")
    shares = [s for s in plan.stages if s.gpus and s.gpu_compute_fraction is not None]
    if shares:
        out.append("MPS compute shares (" + ", ".join(
            f"{s.name} {s.gpu_compute_fraction:g}" for s in shares) + "): Ray Serve has no such "
            "resource; the application sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE in each replica as "
            "planner serve does, which holds only where an MPS daemon runs")
    pinned = [g for g in plan.groups if g.cpus]
    if pinned:
        out.append("CPU pins (" + ", ".join(f"{g.name} on CPUs {cpu_text(g.cpus)}"
                                            for g in pinned) + "): Ray Serve pins no CPU and "
                   "neither does the application; num_cpus reserves the count only")
    return tuple(out)


def _check(plan: Plan) -> None:
    """Refuse a plan whose process groups are not a tree into one terminal group."""
    if plan.tp_processes:
        raise Unwritable(
            f"stage {plan.tp_processes[0].stage} is tensor-parallel; a Ray Serve replica is one "
            "process and the application starts no rank actors: serve this plan with `planner "
            "serve` (add `--backend ray` for a Ray cluster), or give the stage tp_size 1")
    feeds: dict[str, set[str]] = {}
    for h in plan.handoffs:
        a, b = plan.group_of(h.source), plan.group_of(h.target)
        if a is not None and b is not None and a.name != b.name:
            feeds.setdefault(a.name, set()).add(b.name)
    for a, to in feeds.items():
        if len(to) > 1:
            raise Unwritable(
                f"process group '{a}' hands payloads to {len(to)} groups ({', '.join(sorted(to))})"
                "; on Ray Serve each group is called once per request by the one group it feeds: "
                f"keep what '{a}' feeds in one process")
    sources = {h.source for h in plan.handoffs}
    ends = {g.name for s in plan.stages if s.name not in sources
            if (g := plan.group_of(s.name)) is not None}
    if len(ends) > 1 or any(e in feeds for e in ends):
        raise Unwritable(
            f"the terminal stages are in process groups {', '.join(sorted(ends))}; on Ray Serve "
            "the front door calls one group, which must hold every terminal stage: place them "
            "in one process")


def _header(plan: Plan, asked: Asked, config: dict[str, Any], notes: tuple[str, ...]) -> str:
    flags = command_line(asked.requests)
    lines = [
        f"{written_by('Ray Serve config', plan, 'ray-serve')}{' with ' + flags if flags else ''}.",
        "Run it: `serve run FILE` (starts a local Ray when none runs) or `serve deploy FILE` (a "
        "running cluster); http_options says where it answers POST /v1/audio/speech and GET "
        "/v1/models, as planner serve does.",
        f"{IMPORT_PATH} re-solves `args` with the planner and runs each process group as a "
        "deployment of that name, with the launcher's own stage code:"]
    out = [_comment(line) for line in lines]
    width = max(len(d["name"]) for d in config["applications"][0]["deployments"])
    for d in config["applications"][0]["deployments"]:
        opts = d["ray_actor_options"]
        if d["name"] not in {g.name for g in plan.groups}:
            what = ("the HTTP front door, not a process group: reserves no CPU (the plan counts "
                    "none)")
        else:
            g = next(g for g in plan.groups if g.name == d["name"])
            where = "CPU" if g.gpu is None else f"GPU {g.gpu}, num_gpus {opts['num_gpus']:g}"
            what = (f"{', '.join(g.stages)}: {g.copies} cop{'y' if g.copies == 1 else 'ies'}, "
                    f"{opts['num_cpus']} thread{'s' if opts['num_cpus'] != 1 else ''}, {where}")
        out.append(_comment(f"  {d['name']:<{width}}  {what}", indent="  " + " " * (width + 4)))
    if notes:
        out.append(_comment("Ray Serve cannot say (the plan decides it; this file does not carry "
                            "it):"))
        out += [_comment(f"- {note}", indent="  ") for note in notes]
    return "\n".join(out) + "\n"


def _comment(text: str, indent: str = "") -> str:
    return "\n".join(textwrap.wrap(text, 98, initial_indent="# ",
                                   subsequent_indent="# " + indent, break_on_hyphens=False))

