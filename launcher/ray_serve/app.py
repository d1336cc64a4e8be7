"""The Ray Serve application that runs a plan: `import_path: launcher.ray_serve.app:build`.

`build(args)` re-solves the plan from the config file's `args` (`plan_args`), so the file
`planner solve --format ray-serve` wrote and the application it runs describe one plan. It binds
one deployment per process group, named as the group (`group.GroupReplica`), each with a handle to
the groups upstream of it, and the front door (`door.FrontDoor` behind `create_app`), named as
`args.front_door` says. Resources (replicas, CPUs, GPUs) are the config file's `deployments`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray import serve
from ray.serve import Application

from launcher.ray_serve.door import FrontDoor
from launcher.ray_serve.group import GroupReplica, terminal_group, upstream_groups
from launcher.ray_serve.plan_args import FRONT_DOOR, solved
from launcher.serving.http import create_app


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

    def check_health(self) -> None:
        self.group.check()  # a replica whose worker stopped is replaced


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
