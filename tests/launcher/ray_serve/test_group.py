"""The Ray Serve application's parts without Ray: process groups hosted in this process, each
fed through a stand-in for a Ray Serve handle, behind the front door `create_app` serves. The
audio does not depend on how the plan is cut into deployments; a stage's failure, at build or on
a request, names the stage; plans the application cannot run are refused before anything builds.

(A hosted worker lives as long as its process, a replica's on Ray Serve: the workers built here
leave their idle threads in this test process. Serving with Ray: tests/scale/test_ray_serve.py.)
"""

from __future__ import annotations

import asyncio

import pytest

import planner
from launcher.errors import LaunchError, StageFailed
from launcher.ray_serve.door import FrontDoor
from launcher.ray_serve.group import GroupReplica, terminal_group, upstream_groups
from tests.launcher.conftest import TINY
from tests.launcher.plans import qwen3
from tests.planner.test_ray_serve_file import FORK, TENSOR_PARALLEL

TEXT = "the same audio, however the plan is cut"


class Handle:
    """What the application calls on a Ray Serve handle: `options(stream=True).run.remote(x)`."""

    def __init__(self, target) -> None:
        self.run = self
        self._target = target

    def options(self, **_):
        return self

    def remote(self, payload):
        return self._target.run(payload)


def failing_vocoder(**_):
    def run(payload):
        raise RuntimeError("no vocoder today")
    return run


def _door(plan) -> FrontDoor:
    """Every group of `plan` hosted here, each with handles to the groups upstream of it."""
    built: dict[str, GroupReplica] = {}
    for name, ups in upstream_groups(plan).items():  # a chain: upstream first
        built[name] = GroupReplica(plan, name, {u: Handle(built[u]) for u in ups},
                                   factory_defaults=TINY)
    return FrontDoor(plan, Handle(built[terminal_group(plan)]))


async def _speak(door: FrontDoor, stream: bool):
    handle = door.submit(TEXT, None, stream=stream)
    return await asyncio.to_thread(handle.result, 60)


def test_the_audio_is_the_same_in_one_deployment_or_two():
    whole, split = _door(qwen3()), _door(qwen3("vocoder"))
    for stream in (False, True):
        one, two = (asyncio.run(_speak(d, stream)) for d in (whole, split))
        assert one.samples.numel() > 0 and one.wav() == two.wav()
    assert split.health()["in_flight"] == 0
    assert 'stage_planner_requests_total{outcome="ok"} 2.0' in split.metrics()[0]


def test_a_stage_that_fails_a_request_is_named():
    door = _door(qwen3("vocoder", vocoder_factory="tests.launcher.ray_serve.test_group:"
                                                  "failing_vocoder"))
    with pytest.raises(StageFailed, match="stage 'vocoder' in process group 'vocoder' failed: "
                                          "RuntimeError: no vocoder today"):
        asyncio.run(_speak(door, stream=False))


def test_a_stage_that_cannot_be_built_is_named():
    plan = qwen3("vocoder", vocoder_factory="tests.launcher.factories:broken")
    with pytest.raises(LaunchError, match="stage 'vocoder' of process group 'vocoder' could not "
                                          "be built: RuntimeError: weights file"):
        GroupReplica(plan, "vocoder", {"pipeline": None}, factory_defaults=TINY)


def test_the_groups_must_form_a_chain_into_the_terminal_one():
    assert upstream_groups(qwen3("vocoder")) == {"pipeline": (), "vocoder": ("pipeline",)}
    with pytest.raises(LaunchError, match="process group 'p' hands payloads to 2 groups"):
        upstream_groups(planner.solve(config=FORK, cpus=2).plan)
    with pytest.raises(LaunchError, match="stage tts_engine is tensor-parallel"):
        upstream_groups(planner.solve(config=TENSOR_PARALLEL, cpus=2).plan)
