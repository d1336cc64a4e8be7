"""tune profiles the request kind its question is about: a question on first audio gets a
streaming pipeline's stages profiled with streamed requests (a stage such as piper-joe's acoustic
stage chunks only those), a throughput question with whole ones, as `planner bench` sends them by
default; the profile says which, and a profile saved before it said so reads as whole."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

import planner
from planner import Profile, StageProfile
from tests.planner.tune.kind_stand_in import CHUNKS

pytest.importorskip("torch", reason="planner.app.profiling needs the serve extra (torch)")

CARD = {"name": "kinds", "stages": [
    {"name": "gen", "process": "p", "next": "voc", "stream_to": ["voc"],
     "factory": "tests.planner.tune.kind_stand_in:stage", "args": {"gil_ms": 4}},
    {"name": "voc", "process": "p", "terminal": True, "factory": "launcher.synthetic:stage",
     "args": {"gil_ms": 0.5, "audio_ms": 20}}],
    "process_safe_edges": [["gen", "voc"]]}


@pytest.fixture(scope="module")
def plan():
    return planner.solve(config=CARD).plan


def test_a_streamed_request_is_profiled_in_chunks_and_a_whole_one_in_one_piece(plan):
    from planner.app.profiling.stage_timing import build_stage, first_chunk_share, run_request

    stages = {s.name: build_stage(s, "cpu", {}) for s in plan.stages}
    seen = {}
    for stream in (True, False):
        extra: dict[str, list[float]] = defaultdict(list)
        for i in range(2):
            run_request(plan, stages, f"request {i}.", defaultdict(list), extra, stream=stream)
        seen[stream] = (extra["gen:items"], first_chunk_share(extra, "gen"))
    items, share = seen[True]
    assert items == [float(CHUNKS)] * 2 and share is not None and share < 0.75
    assert seen[False] == ([1.0, 1.0], None)


def test_the_profile_says_its_kind_and_holds_that_kind_s_chunks(plan, monkeypatch):
    from planner.app.profiling import measure_profile
    from planner.tune.profile import HandoffCost

    # What serving adds is measured by serving a pipeline: not the question here.
    monkeypatch.setattr(measure_profile, "front_door", lambda *a, **k: (0.1, 0.1, HandoffCost()))
    monkeypatch.setattr(measure_profile, "served_stage_ms", lambda *a, **k: {})
    streamed = measure_profile.measure(plan, requests=2, warmup=1, stream=True)
    whole = measure_profile.measure(plan, requests=2, warmup=1)
    assert streamed.stream and not whole.stream
    gen = streamed.stage("gen")
    assert gen.chunks_out == CHUNKS and gen.first_chunk_share < 0.75
    assert whole.stage("gen").chunks_out == 1 and whole.stage("gen").first_chunk_share is None
    assert Profile.from_dict(json.loads(json.dumps(streamed.to_dict()))).stream


@pytest.mark.parametrize("asked, streamed", [
    ({"rate": (2.0,), "ttfa_p99_ms": 400.0}, True),
    ({"objective": "ttfa", "concurrency": (4,)}, True),
    ({"concurrency": (4,)}, False),
    ({"rate": (2.0,)}, False),
    ({"objective": "latency", "rate": (2.0,), "slo_p99_ms": 900.0}, False),
])
def test_the_kind_profiled_is_the_question_s(asked, streamed):
    from planner.app.tune.command import profile_kind
    from planner.app.tune.options import TuneOptions

    assert profile_kind(TuneOptions(**asked), planner.load(config=CARD)) is streamed


def test_a_pipeline_that_does_not_stream_is_profiled_whole_whatever_is_asked():
    from planner.app.tune.command import profile_kind
    from planner.app.tune.options import TuneOptions

    flat = {"name": "flat", "stages": [
        {"name": "only", "process": "p", "terminal": True, "factory": "launcher.synthetic:stage",
         "args": {"audio_ms": 20}}]}
    assert not profile_kind(TuneOptions(rate=(2.0,), ttfa_p99_ms=400.0),
                            planner.load(config=flat))


def test_a_profile_saved_before_the_kind_was_kept_reads_as_whole_responses():
    old = json.loads(json.dumps(
        Profile("m", "default", 2, "test", (StageProfile("a", 1.0, 0.0, 0.0),)).to_dict()))
    del old["stream"]
    assert Profile.from_dict(old).stream is False
    with pytest.raises(ValueError, match="stream is a string, not true or false"):
        Profile.from_dict({**old, "stream": "yes"})
