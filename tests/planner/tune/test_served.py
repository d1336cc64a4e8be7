"""Stage costs measured alone are scaled to what the stages took served (no processes here)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import planner
from planner.tune.calibration import calibrate_to_served as _as_served
from planner import HandoffCost, StageProfile

NO_HANDOFF = HandoffCost(fixed_ms=0.0, copy_gbps=1e9, latency_ms=0.0)


def chain(stream_last: bool = False, last_apart: bool = False) -> planner.Plan:
    def stage(name, nxt, **extra):
        process = "q" if last_apart and nxt is None else "p"
        s = {"name": name, "process": process, "factory": "launcher.synthetic:stage", **extra}
        return {**s, "next": nxt} if nxt else {**s, "terminal": True}
    stages = [stage("a", "b"), stage("b", "c", **({"stream_to": ["c"]} if stream_last else {})),
              stage("c", None)]
    return planner.solve(config={"name": "chain", "stages": stages,
                                 "process_safe_edges": [["a", "b"], ["b", "c"]]}).plan


def profiles(*busy):
    return [StageProfile(name, gil_ms=ms / 2, native_ms=ms / 2, device_ms=0.0)
            for name, ms in zip("abc", busy)]


def test_each_stage_that_ran_by_itself_takes_its_served_time_in_the_same_proportions():
    out = _as_served(chain(), profiles(10, 20, 4), {"a": 11.0, "b": 20.0, "c": 4.4}, NO_HANDOFF)
    assert [s.busy_ms for s in out] == pytest.approx([11.0, 20.0, 4.4])
    assert out[0].gil_ms == pytest.approx(5.5) and out[0].native_ms == pytest.approx(5.5)


def test_streaming_stages_overlapped_so_they_take_the_factor_of_the_others():
    # b streams to c: both ran beside each other and their served times include waiting
    out = _as_served(chain(stream_last=True), profiles(10, 20, 4),
                     {"a": 11.0, "b": 40.0, "c": 9.0}, NO_HANDOFF)
    assert [s.busy_ms for s in out] == pytest.approx([11.0, 22.0, 4.4])


def test_a_tiny_stage_alone_says_nothing_of_the_big_ones():
    out = _as_served(chain(stream_last=True), profiles(1, 200, 40),
                     {"a": 1.3, "b": 400.0, "c": 90.0}, NO_HANDOFF)
    assert [s.busy_ms for s in out] == pytest.approx([1.3, 200.0, 40.0])


def test_the_handoff_the_model_charges_apart_is_taken_out_and_wild_factors_are_ignored():
    handoff = HandoffCost(fixed_ms=0.5, copy_gbps=1e9, latency_ms=0.0)
    out = _as_served(chain(), profiles(10, 20, 4), {"a": 10.0, "b": 60.0, "c": 4.5}, handoff)
    # c is terminal: the result it sends is charged apart; b's 3x is not believed
    assert [s.busy_ms for s in out] == pytest.approx([10.0, 20.0, 4.0])


def test_streaming_stages_in_processes_of_their_own_take_their_own_factors():
    # b streams 4 chunks to c in another process: neither waited for the other's lock. c was
    # called once per chunk and sent a result each time; b sent each chunk across: the model
    # charges those sends apart, so they come out of the served times first.
    handoff = HandoffCost(fixed_ms=0.25, copy_gbps=1e9, latency_ms=0.0)
    stages = [replace(s, chunks_out=4.0) if s.name == "b" else s for s in profiles(10, 20, 4)]
    out = _as_served(chain(stream_last=True, last_apart=True), stages,
                     {"a": 11.0, "b": 23.0 + 4 * 0.25, "c": 4.8 + 4 * 0.25}, handoff)
    assert [s.busy_ms for s in out] == pytest.approx([11.0, 23.0, 4.8])


def test_stages_that_stream_to_each_other_are_timed_apart_where_the_rules_allow():
    from planner.app.tune.command import calibration_plan

    qwen3 = planner.load(model_path="qwen3-tts")  # the engine streams to the vocoder
    parted = calibration_plan(qwen3, planner.declared_plan(qwen3))
    assert [g.stages for g in parted.groups] == [("preprocessing", "tts_engine"), ("vocoder",)]
    # nothing of one request runs at once in a plain chain: it is timed as declared
    plain = planner.load(config={"name": "c", "stages": [
        {"name": "a", "process": "p", "next": "b"},
        {"name": "b", "process": "p", "terminal": True}], "process_safe_edges": [["a", "b"]]})
    assert calibration_plan(plain, planner.declared_plan(plain)) is None
