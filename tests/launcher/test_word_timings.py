"""Word timings carried from a stage to the caller (`launcher.words`), across processes and on the
Ray Serve application's parts: each word timed from the start of the response, with the piece of
audio that reaches it, the same in every placement."""

from __future__ import annotations

import asyncio

import pytest

from launcher import launch
from launcher.ray_serve.door import FrontDoor
from launcher.ray_serve.group import GroupReplica, terminal_group, upstream_groups
from launcher.words import TIMESTAMPS

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY
from tests.launcher.ray_serve.test_group import Handle

TEXT = "Every chunk is a word here."
WORDED = "tests.launcher.factories:worded_generator"


def _check(pieces, sample_rate):
    """Each piece's words are its own chunk's (`chunk<k>` on the k-th piece of audio), timed
    from the start of the response; returns the words."""
    words, before = [], 0
    for k, (samples, due) in enumerate(pieces):
        assert [w.word for w in due] == [f"chunk{k}"], k
        assert due[0].start == pytest.approx(before / sample_rate + 0.001)
        before += len(samples)
        words += due
    assert len(words) > 2
    return [(w.word, w.start, w.end) for w in words]


@pytest.mark.slow
def test_words_cross_processes_timed_from_the_start_of_the_response():
    got = []
    for split in (None, "vocoder"):
        with launch(plans.qwen3(split, generator_factory=WORDED), device=DEVICE,
                    factory_defaults=TINY) as d:
            for stream in (True, False):
                handle = d.submit(TEXT, "alice", stream=stream, options={TIMESTAMPS: True})
                got.append(_check(handle.captioned(60), d.plan.sample_rate))
            plain = d.submit(TEXT, "alice").captioned_result(60)
            assert plain[1] == () and plain[0].samples.numel() > 0  # not asked: none
    assert all(words == got[0] for words in got)


def test_the_ray_serve_door_carries_the_words_of_every_group():
    plan = plans.qwen3("vocoder", generator_factory=WORDED)
    built: dict[str, GroupReplica] = {}
    for name, ups in upstream_groups(plan).items():
        built[name] = GroupReplica(plan, name, {u: Handle(built[u]) for u in ups},
                                   factory_defaults=TINY)
    door = FrontDoor(plan, Handle(built[terminal_group(plan)]))

    async def speak():
        handle = door.submit(TEXT, None, stream=True, options={TIMESTAMPS: True})
        return await asyncio.to_thread(lambda: list(handle.captioned(60)))

    _check(asyncio.run(speak()), plan.sample_rate)
