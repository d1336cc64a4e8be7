"""`planner bench --rounds N`: the placements take turns round by round, each round sends its own
share of the texts, and each placement's rounds merge into one run whose figures are those of
all its requests."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from planner.app.bench import rounds, runner
from planner.app.bench.load_results import LoadResult, Sample
from planner.app.bench.load_shapes import Closed
from planner.app.bench.measure import ProcessPeak, StageTime
from planner.app.bench.placements import Placement
from planner.app.bench.results import Run

DECLARED = Placement("declared", (), (("pipeline", ("a", "b")),), ())
SPLIT = Placement("split", (), (("pipeline", ("a",)), ("b", ("b",))), ())


def sample(index, started, latency):
    return Sample(index=index, scheduled_s=None, started_s=started, latency_s=latency,
                  ttfa_s=None, audio_s=1.0, status=200, error=None)


def run(placement, wall, latencies, a_s, rss, start=0.0):
    samples = tuple(sample(i, start + 0.1 * i, lat) for i, lat in enumerate(latencies))
    n = len(latencies)
    return Run(placement=placement, device="cpu", startup_s=2.0,
               processes=(ProcessPeak("pipeline", 10, ("a", "b"), rss, None),),
               profile=(StageTime("a", "pipeline", n, a_s * n, a_s),
                        StageTime("b", "pipeline", n, 0.01 * n, 0.01)),
               ideal_rps=None, load=LoadResult(Closed(2), False, wall, samples))


def test_requests_split_into_rounds_cover_every_text_once():
    assert rounds.split(96, 3) == [(0, 32), (32, 32), (64, 32)]
    assert rounds.split(10, 3) == [(0, 4), (4, 3), (7, 3)]
    assert rounds.split(5, 1) == [(0, 5)]


def test_merged_rounds_are_all_the_requests_over_all_the_time():
    # a fast round (4 requests in 1 s) and a slow one (4 in 3 s): 8 over 4 s, not the mean of
    # 4 and 1.33 req/s
    fast = run(DECLARED, 1.0, [0.1, 0.2, 0.3, 0.4], a_s=0.02, rss=100)
    slow = run(DECLARED, 3.0, [0.5, 0.6, 0.7, 0.8], a_s=0.04, rss=300)
    merged = rounds.merge([fast, slow])
    assert merged.load.throughput_rps == pytest.approx(8 / 4.0)
    assert merged.round_rps == pytest.approx((4.0, 4 / 3))
    assert rounds.spread(merged) == pytest.approx(2.0)
    assert len(merged.load.samples) == 8
    assert merged.load.latency.p50 == pytest.approx(0.45)
    # the second round's samples follow the first round's in time
    assert [s.started_s for s in merged.load.samples][4] == pytest.approx(1.0)
    a = next(s for s in merged.profile if s.stage == "a")
    assert (a.invocations, a.per_request_s) == (8, pytest.approx(0.03))
    assert merged.processes[0].peak_rss_bytes == 300  # the highest of its rounds
    assert merged.ideal_rps == pytest.approx(1 / (0.03 + 0.01))
    assert rounds.merge([fast]) is fast and rounds.spread(fast) is None


def test_the_cpu_stolen_over_merged_rounds_is_over_all_their_running_time():
    fast = run(DECLARED, 1.0, [0.1, 0.2], a_s=0.02, rss=100)
    slow = run(DECLARED, 3.0, [0.5, 0.6], a_s=0.04, rss=300)
    fast = replace(fast, load=replace(fast.load, cpu_ticks=(10, 100)))
    slow = replace(slow, load=replace(slow.load, cpu_ticks=(90, 300)))
    assert fast.load.stolen_of_running == pytest.approx(0.1)
    assert rounds.merge([fast, slow]).load.stolen_of_running == pytest.approx(100 / 400)
    # a round that could not read /proc/stat leaves the whole unknown, not a part of it
    unknown = replace(slow, load=replace(slow.load, cpu_ticks=None))
    assert rounds.merge([fast, unknown]).load.stolen_of_running is None


class Recorder:
    def begin(self, label, total):
        self.labels.append(label)

    def phase(self, text):
        pass

    def done(self, sample):
        pass

    def end(self, summary):
        pass

    def __init__(self):
        self.labels = []


def test_placements_take_turns_round_by_round_each_with_its_own_texts(monkeypatch):
    calls = []

    def fake_run_one(settings, placement, shape, texts, warm, progress):
        calls.append((placement.name, texts, settings.requests))
        return run(placement, 1.0, [0.1] * len(texts), a_s=0.02, rss=100)

    monkeypatch.setattr(runner, "run_one", fake_run_one)
    settings = runner.Settings(model_path="m", config=None, variant=None, device="cpu",
                               stand_in_size=None, loads=(Closed(2),), requests=5,
                               duration_s=None, warmup=1, input_chars=40, stream=False, seed=3,
                               rounds=2)
    progress = Recorder()
    runs = runner.run_all(settings, [DECLARED, SPLIT], progress)
    assert [c[0] for c in calls] == ["declared", "split", "declared", "split"]
    texts = runner.request_texts(3, 5, 40)
    assert [c[1] for c in calls] == [texts[:3], texts[:3], texts[3:], texts[3:]]
    assert [c[2] for c in calls] == [3, 3, 2, 2]
    assert progress.labels[0] == "declared · C=2 · round 1/2"
    assert [r.placement.name for r in runs] == ["declared", "split"]
    # one merged run per placement, its samples numbered by the text each sent
    assert sorted(s.index for s in runs[0].load.samples) == [0, 1, 2, 3, 4]
    assert math.isclose(runs[0].load.wall_s, 2.0) and len(runs[0].round_rps) == 2
