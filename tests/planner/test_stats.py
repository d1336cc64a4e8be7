"""One percentile: the bench measures and tune predicts p50/p90/p99 with `planner.stats.percentile`,
so a predicted tail and a measured one are the same statistic of their samples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import planner
from planner.stats import percentile
from planner.tune import simulated_run
from planner.tune.model import Workload, predict
from planner.tune.profile import HandoffCost, Profile, StageProfile

from planner.app.bench import stats as bench_stats


@given(st.lists(st.floats(0.0, 1e4, allow_nan=False), min_size=1, max_size=300),
       st.sampled_from([0, 1, 50, 90, 99, 99.9, 100]))
def test_the_percentile_is_numpys_default_linear_interpolation(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), abs=1e-9)


def test_no_values_have_no_percentile_and_q_is_checked():
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match="0..100"):
        percentile([1.0], 101)


def test_the_bench_summarises_with_the_planners_percentile():
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4, 0.5]
    s = bench_stats.summarise(values)
    assert (s.p50, s.p90, s.p99) == tuple(percentile(values, q) for q in (50, 90, 99))
    assert bench_stats.percentile is percentile


def _streaming_chain() -> tuple[planner.Plan, Profile]:
    plan = planner.solve(config={"name": "chain", "stages": [
        {"name": "gen", "process": "p", "next": "voc", "stream_to": ["voc"]},
        {"name": "voc", "process": "p", "terminal": True}],
        "process_safe_edges": [["gen", "voc"]]}).plan
    profile = Profile(model="chain", variant="default", cores=2, cpu_model="test", stages=(
        StageProfile("gen", 4.0, 2.0, 0.0, chunks_out=4, out_bytes=1000),
        StageProfile("voc", 1.0, 1.0, 0.0)), handoff=HandoffCost(0.05, 5.0, 0.05),
        frontend_ms=0.5, process_rss_mib=100.0, request_scale=(0.5, 1.0, 1.5, 2.0))
    return plan, profile


def test_tune_predicts_the_percentiles_the_bench_would_measure_from_the_same_latencies(
        monkeypatch):
    calls: dict[tuple[tuple[float, ...], float], float | None] = {}

    def recorded(values, q):
        calls[(tuple(values), q)] = result = percentile(values, q)
        return result

    monkeypatch.setattr(simulated_run, "percentile", recorded)
    plan, profile = _streaming_chain()
    p = predict(plan, profile, Workload(concurrency=3, requests=40, warmup=4))
    samples = {values for values, _ in calls}
    told = {"latency": (p.latency_p50_ms, p.latency_p90_ms, p.latency_p99_ms),
            "ttfa": (p.ttfa_p50_ms, p.ttfa_p90_ms, p.ttfa_p99_ms)}
    for metric, (p50, p90, p99) in told.items():
        # the simulated requests' times that the prediction summarised ...
        (values,) = [v for v in samples if calls.get((v, 50)) == p50
                     and calls.get((v, 90)) == p90 and calls.get((v, 99)) == p99]
        # ... summarised by the bench as it summarises measured ones: the same numbers
        measured = bench_stats.summarise(list(values))
        assert (measured.p50, measured.p90, measured.p99) == (p50, p90, p99), metric
    assert len(samples) == 2 and p.latency_p99_ms > p.latency_p50_ms
