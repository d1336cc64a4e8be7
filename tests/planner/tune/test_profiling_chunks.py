"""The profiler measures when a streaming stage's first chunk comes out, relative to its work:
a stage that computes a whole request and then yields its chunks in a burst is told apart from one
that streams as it computes (the model holds the next stage back by as much)."""

from __future__ import annotations

from collections import defaultdict

import pytest

import planner
pytest.importorskip("torch", reason="planner.app.profiling needs the serve extra (torch)")
from planner.app.profiling.stage_timing import build_stage, first_chunk_share, run_request


def _shares(burst: bool, requests: int = 3) -> dict[str, float | None]:
    cfg = {"name": "chunks", "stages": [
        {"name": "gen", "process": "p", "next": "voc", "stream_to": ["voc"],
         "factory": "launcher.synthetic:stage",
         "args": {"native_ms": 16, "gil_ms": 4, "chunks": 8, "out_bytes": 4096, "burst": burst}},
        {"name": "voc", "process": "p", "terminal": True, "factory": "launcher.synthetic:stage",
         "args": {"native_ms": 1, "audio_ms": 20}}],
        "process_safe_edges": [["gen", "voc"]]}
    plan = planner.solve(config=cfg).plan
    stages = {s.name: build_stage(s, "cpu", {}) for s in plan.stages}
    run_request(plan, stages, "warm up.", defaultdict(list), defaultdict(list))
    cost, extra = defaultdict(list), defaultdict(list)
    for i in range(requests):
        run_request(plan, stages, f"request {i}.", cost, extra)
    assert extra["gen:items"] == [8.0] * requests
    return {name: first_chunk_share(extra, name) for name in stages}


def test_a_stage_that_works_then_yields_a_burst_spends_nearly_all_its_time_before_its_first_chunk():
    assert _shares(burst=True)["gen"] > 0.9


def test_a_stage_that_streams_as_it_computes_spends_about_one_chunk_of_it():
    share = _shares(burst=False)["gen"]
    # 1/8 of the work, and a busy machine's hiccup on the first chunk at most doubles it
    assert share == pytest.approx(1 / 8, abs=0.125)


def test_a_stage_handing_on_one_item_has_no_first_chunk_share():
    cfg = {"name": "one", "stages": [
        {"name": "only", "process": "p", "terminal": True, "factory": "launcher.synthetic:stage",
         "args": {"native_ms": 1, "audio_ms": 20}}]}
    plan = planner.solve(config=cfg).plan
    stages = {s.name: build_stage(s, "cpu", {}) for s in plan.stages}
    extra = defaultdict(list)
    run_request(plan, stages, "one.", defaultdict(list), extra)
    assert first_chunk_share(extra, "only") is None
