"""The Ray Serve application that runs a plan: `import_path: launcher.ray_serve.app:build`.

`build(args)` re-solves the plan from the config file's `args` with the planner's public API (the
model, its config, variant and requests, and the CPUs it was counted against), so the file
`planner solve --format ray-serve` wrote and the application it runs describe one plan. It binds
one deployment per process group, named as the group (`group.GroupReplica`), each with a handle to
the groups upstream of it, and the front door (`door.FrontDoor` behind `create_app`), named as
`args.front_door` says. Resources (replicas, CPUs, GPUs) are the config file's `deployments`.

args (every key but `model` / `config` optional):
    model: card name, model path or architecture       config: an overlay or a complete pipeline
    variant: the card's variant                          requests: [{isolate: vocoder}, ...]
    cpus: the CPUs threads were counted against (null: not counted)
    front_door: the ingress deployment's name (default front_door)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray import serve
from ray.serve import Application

from launcher.ray_serve.door import FrontDoor
from launcher.ray_serve.group import GroupReplica, terminal_group, upstream_groups
from launcher.serving.http import create_app

ARGS = ("model", "config", "variant", "requests", "cpus", "front_door")
FRONT_DOOR = "front_door"


class ProcessGroup:
    """A process group's deployment: `run` is a streaming call (what the group hands on)."""

    def __init__(self, plan: Any, group: str, upstream: Mapping[str, Any]) -> None:
        for handle in upstream.values():
            # A handoff goes to a replica on this node when there is one (Ray Serve's locality
            # routing): a pipeline copy stays on one node where Ray placed one there.
            handle._init(_prefer_local_routing=True)
        self.group = GroupReplica(plan, group, upstream)

    async def run(self, payload: dict[str, Any]):
        async for message in self.group.run(payload):
            yield message


@serve.ingress()
class Ingress:
    """The front door: `planner serve`'s HTTP app over the terminal group's deployment."""

    def __init__(self, plan: Any, topology: dict[str, Any], terminal: Any,
                 deployments: list[str]) -> None:
        terminal._init(_prefer_local_routing=True)
        self.door = FrontDoor(plan, terminal, tuple(deployments))
        self.topology = topology

    def __serve_build_asgi_app__(self):
        return create_app(self.door, self.topology)


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
        pipeline = planner.load(args.get("model"), args.get("config"), args.get("variant"))
        result = planner.solve_pipeline(pipeline, requests=requests, cpus=cpus,
                                        count_cpus=cpus is not None)
    except planner.ConfigError as exc:
        raise ValueError(exc.paragraph()) from None
    if not result.ok:
        said = "; ".join(f"{d.code}: {d.message} (hint: {d.hint})" for d in result.diagnostics)
        raise ValueError(f"the plan in args is {result.status}: {said}")
    return result.plan, planner.result_dict(result)


def build(args: dict[str, Any]) -> Application:
    """The application for `args` (Ray Serve's application builder)."""
    plan, topology = solved(args)
    inputs = upstream_groups(plan)  # refuses a plan these deployments cannot run
    front_door = args.get("front_door") or FRONT_DOOR
    names = [g.name for g in plan.groups]
    if front_door in names:
        raise ValueError(f"args.front_door {front_door!r} is also a process group's name; "
                         "give the front door another name")
    bound: dict[str, Application] = {}

    def bind(name: str) -> Application:  # a group after the groups upstream of it
        if name not in bound:
            upstream = {g: bind(g) for g in inputs[name]}
            bound[name] = serve.deployment(ProcessGroup, name=name).bind(plan, name, upstream)
        return bound[name]

    terminal = bind(terminal_group(plan))
    ingress = serve.deployment(Ingress, name=front_door)
    return ingress.bind(plan, topology, terminal, [front_door, *names])
