"""The bench's arithmetic and placement choice, without starting anything."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import planner
from planner.app.bench import placements as P
from planner.app.bench.compare import Point, dominates, pareto_front, ratio
from planner.app.bench.measure import ideal_throughput, parse_metrics, stage_profile
from planner.app.bench.stats import percentile, summarise
from planner.app.bench.texts import request_texts, warmup_texts

# -- percentile ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None),
    ([7.0], 99, 7.0),
    ([1, 2, 3, 4], 0, 1),
    ([1, 2, 3, 4], 100, 4),
    ([1, 2, 3, 4], 50, 2.5),
    ([4, 1, 3, 2], 50, 2.5),  # order of the input does not matter
    (list(range(1, 101)), 99, 99.01),
    ([10, 20], 90, 19.0),
])
def test_percentile_interpolates_linearly(values, q, expected):
    got = percentile(values, q)
    assert got == expected if expected is None else math.isclose(got, expected)


def test_percentile_rejects_out_of_range():
    with pytest.raises(ValueError):
        percentile([1.0], 101)


@given(st.lists(st.floats(0, 1e6), min_size=1), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values, q1, q2):
    lo, hi = sorted((q1, q2))
    a, b = percentile(values, lo), percentile(values, hi)
    assert min(values) <= a <= b + 1e-9 and b <= max(values)


def test_summary():
    s = summarise([0.1, 0.2, 0.3])
    assert (s.count, s.min, s.max) == (3, 0.1, 0.3) and math.isclose(s.mean, 0.2)
    assert summarise([]) is None


# -- ideal bound ---------------------------------------------------------------------------------
def test_ideal_bound_is_the_busiest_process():
    times = {"pre": 0.01, "engine": 0.10, "vocoder": 0.05}
    together = {"pipeline": ("pre", "engine", "vocoder")}
    split = {"pipeline": ("pre", "engine"), "vocoder": ("vocoder",)}
    assert math.isclose(ideal_throughput(times, together), 1 / 0.16)
    assert math.isclose(ideal_throughput(times, split), 1 / 0.11)
    every = {s: (s,) for s in times}
    assert math.isclose(ideal_throughput(times, every), 1 / 0.10)


def test_ideal_bound_divides_a_process_by_its_copies():
    times = {"pre": 0.01, "engine": 0.10, "vocoder": 0.05}
    split = {"pipeline": ("pre", "engine"), "vocoder": ("vocoder",)}
    assert math.isclose(ideal_throughput(times, split, {"pipeline": 2}), 1 / 0.055)
    assert math.isclose(ideal_throughput(times, split, {"vocoder": 2}), 1 / 0.11)


def test_ideal_bound_unknown_without_a_profile():
    assert ideal_throughput({"a": None, "b": 0.1}, {"p": ("a", "b")}) is None
    assert ideal_throughput({"a": 0.0}, {"p": ("a",)}) is None


def test_placement_resources_count_a_tp_stage_once():
    pl = P.Placement("x", (), (("pipeline", ("pre", "voc")),), (("engine", ("e_tp0", "e_tp1")),))
    assert pl.resources() == {"pipeline": ("pre", "voc"), "engine (tp)": ("engine",)}
    assert pl.process_count == 3


# -- Pareto front --------------------------------------------------------------------------------
def test_pareto_front_three_dimensions():
    pts = [
        Point("declared", 10.0, 0.50, 1),   # fewest processes: on the front
        Point("split", 14.0, 0.40, 2),      # faster and lower latency: on the front
        Point("worse", 12.0, 0.45, 3),      # dominated by split
        Point("lowlat", 9.0, 0.20, 3),      # best p99: on the front
    ]
    assert pareto_front(pts) == {"declared", "split", "lowlat"}
    assert dominates(pts[1], pts[2]) and not dominates(pts[2], pts[1])


def test_pareto_ties_and_missing_latency():
    a, b = Point("a", 5.0, 0.1, 1), Point("b", 5.0, 0.1, 1)
    assert pareto_front([a, b]) == {"a", "b"}
    failed = Point("failed", 5.0, None, 1)
    assert pareto_front([a, failed]) == {"a"}


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0.001, 10), st.integers(1, 5)),
                min_size=1, max_size=8))
def test_pareto_front_is_never_empty_and_undominated(raw):
    pts = [Point(str(i), *t) for i, t in enumerate(raw)]
    front = pareto_front(pts)
    assert front
    for p in pts:
        if p.key in front:
            assert not any(dominates(q, p) for q in pts)
        else:
            assert any(dominates(q, p) for q in pts)


def test_ratio():
    assert ratio(3.0, 2.0) == 1.5 and ratio(None, 1.0) is None and ratio(1.0, 0.0) is None


# -- placement enumeration -----------------------------------------------------------------------
def test_default_placements_for_qwen3_are_declared_and_isolated_vocoder():
    pipeline = planner.load_pipeline(model_path="Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    chosen, notes = P.choose(pipeline, [], None)
    assert [(p.name, p.flags, p.describe()) for p in chosen] == [
        ("declared", (), "preprocessing+tts_engine+vocoder"),
        ("isolate vocoder", ("--isolate-stage vocoder",), "preprocessing+tts_engine | vocoder")]
    assert notes == []


def test_all_feasible_keeps_only_what_solves_and_names_the_declared_one():
    pipeline = planner.load_pipeline(model_path="higgs-tts")
    found = P.all_feasible(pipeline, 0)
    assert len(found) == len({p.signature for p in found})
    for p in found:  # each one re-solves to the same processes
        assert P.from_plan(p.name, p.requests, P.solve_requests(pipeline, p.requests).plan) == p
    chosen, _ = P.choose(pipeline, [], 0)
    assert chosen[0].name == "declared" and len(chosen) == len(found)
    assert chosen[0].signature in {p.signature for p in found}
    assert len(P.choose(pipeline, [], 3)[0]) == 3


def test_all_feasible_qwen3_keeps_unsafe_handoffs_together():
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    # preprocessing -> tts_engine is process-local: of the 5 partitions, 2 keep it together.
    assert [p.describe() for p in P.all_feasible(pipeline, 0)] == [
        "preprocessing+tts_engine+vocoder", "preprocessing+tts_engine | vocoder"]


def test_placement_option_parsing():
    assert P.parse_placement_option("split=--isolate-stage vocoder --stage-process a=b") == (
        "split", (planner.Assign("a", "b"), planner.Isolate("vocoder")))
    assert P.parse_placement_option("same=") == ("same", ())
    for bad in ("noequals", "=--isolate-stage vocoder", "x=--gpu 1", "x=--isolate-stage"):
        with pytest.raises(P.PlacementError):
            P.parse_placement_option(bad)


def test_user_placement_that_cannot_run_says_why():
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    with pytest.raises(P.PlacementError, match="splits preprocessing -> tts_engine.*hint"):
        P.user_placement(pipeline, "bad=--isolate-stage preprocessing")


def test_duplicate_user_placements_are_measured_once():
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    chosen, notes = P.choose(pipeline, ["a=--isolate-stage vocoder",
                                        "b=--stage-process vocoder=voc", "c="], None)
    assert [p.name for p in chosen] == ["declared", "a"]
    assert len(notes) == 2


def test_without_the_declared_topology_only_the_placements_named_are_served():
    # tune's replica check serves one plan at a rate of its own; the declared topology beside
    # it would double the run for nothing
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    chosen, _ = P.choose(pipeline, ["a=--isolate-stage vocoder", "b=--stage-process "
                                    "vocoder=voc"], None, declared=False)
    assert [p.name for p in chosen] == ["a"]
    chosen, _ = P.choose(pipeline, ["declared="], None, declared=False)
    assert [(p.name, p.is_baseline) for p in chosen] == [("declared", True)]


def test_the_same_processes_with_other_threads_or_copies_are_other_placements():
    # tune --verify served a rate question's pick and the cheaper plan it named as one, since
    # they split the stages alike: the copies made the difference it had to judge.
    pipeline = planner.load_pipeline(model_path="piper-joe")
    chosen, notes = P.choose(pipeline, [
        "split=--isolate-stage vocoder",
        "copies=--isolate-stage vocoder --process-copies vocoder=2",
        "threads=--isolate-stage vocoder --stage-threads vocoder=2",
        "pinned=--isolate-stage vocoder --process-cpus vocoder=0",
        "again=--process-copies vocoder=2 --isolate-stage vocoder"], None)
    # pinned: the same processes on chosen CPUs measured 14% apart (benchmarks/EVIDENCE.md)
    assert [p.name for p in chosen] == ["declared", "split", "copies", "threads", "pinned"]
    assert notes == ["again runs the same processes as copies; measured once"]
    copies = chosen[2]
    assert copies.process_count == 3  # pipeline, and two copies of the vocoder
    assert copies.resource_copies() == {"vocoder": 2}
    # two vocoders share its work: the pipeline process (0.05 s a request) bounds it, not the
    # vocoder (0.08 s over 2)
    assert math.isclose(copies.ideal_rps({"frontend": 0.02, "acoustic": 0.03, "vocoder": 0.08}),
                        1 / 0.05)


# -- texts and metrics ---------------------------------------------------------------------------
def test_same_seed_same_texts():
    assert request_texts(3, 5, 80) == request_texts(3, 5, 80)
    assert request_texts(3, 5, 80) != request_texts(4, 5, 80)
    assert not set(warmup_texts(3, 5, 80)) & set(request_texts(3, 50, 80))
    assert all(len(t) <= 80 and t.endswith(".") for t in request_texts(0, 50, 80))


METRICS = """# HELP x
stage_planner_stage_latency_seconds_sum{stage="a"} 1.0
stage_planner_stage_latency_seconds_count{stage="a"} 4
stage_planner_stage_latency_seconds_sum{stage="b"} 0.5
stage_planner_stage_latency_seconds_count{stage="b"} 40
stage_planner_requests_total{outcome="ok"} 4
stage_planner_requests_total{outcome="error"} 1
"""


def test_stage_profile_is_time_per_finished_request():
    before = parse_metrics(METRICS)
    after = parse_metrics(METRICS.replace("} 1.0", "} 3.0").replace('count{stage="a"} 4',
                                                                      'count{stage="a"} 8')
                          .replace('"ok"} 4', '"ok"} 8').replace("} 0.5", "} 1.3"))
    prof = {s.stage: s for s in stage_profile(before, after, {"a": "p", "b": "q"})}
    assert math.isclose(prof["a"].per_request_s, 0.5) and prof["a"].invocations == 4
    assert math.isclose(prof["b"].per_request_s, 0.2) and prof["b"].process == "q"


def test_timings_are_in_once_every_process_reported_twice_since():
    from launcher.control.metric_names import timings_in

    first = {"pipeline": 3.0, "vocoder": 1.0}
    # The first report after a look may have been taken before it: not yet.
    assert not timings_in(first, {"pipeline": 5.0, "vocoder": 2.0})
    assert timings_in(first, {"pipeline": 5.0, "vocoder": 3.0})
    assert not timings_in(first, {"pipeline": 9.0})  # the vocoder has not reported since
    assert timings_in({}, {"pipeline": 0.0})  # no worker had reported: nothing to wait for
