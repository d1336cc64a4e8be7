"""What bench says under its table (`planner.app.bench.findings`): the winner at each load and
why, against the declared topology with an interval over interleaved rounds; advice where a figure
is bad, derived from what was measured (stalled streams: too little audio per stream or gaps
between chunks); notes on a bound measured past."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from planner.app.bench import findings as F
from planner.app.bench.intervals import paired_ratio
from planner.app.bench.load_results import Slo
from planner.app.bench.load_shapes import Closed, Open
from tests.planner.app.bench import synthetic as S


def closed_at(rps_by_row: dict, c: int = 4, rounds: dict | None = None, errors=()):
    """One closed-loop load, each row serving its req/s over 8 requests (and its rounds)."""
    runs = []
    for placement, rps in rps_by_row.items():
        bad = placement.name in errors
        samples = [S.sample(i, error="HTTP 500" if bad and i == 0 else None,
                            kind="http-500" if bad and i == 0 else None) for i in range(8)]
        run = S.run(placement, Closed(c), samples, wall=8 / rps, stream=False)
        runs.append(replace(run, round_rps=(rounds or {}).get(placement.name, ())))
    return S.bench(runs, stream=False, rounds=len(next(iter(rounds.values()))) if rounds else 1)


def test_paired_rounds_give_a_ratio_and_a_90_percent_interval():
    r = paired_ratio([1.3, 1.25, 1.35], [1.0, 1.0, 1.0])
    assert r.rounds == 3 and r.geomean == pytest.approx(math.exp(sum(
        math.log(x) for x in (1.3, 1.25, 1.35)) / 3))
    lo, hi = r.interval
    assert lo < r.geomean < hi and r.resolved
    assert paired_ratio([1.0, 1.2], [1.1, 1.0]).resolved is False  # holds 1: a tie at that noise
    assert paired_ratio([1.0], [1.0]).interval is None
    assert paired_ratio([1.0, 2.0], [1.0]) is None  # not the same rounds


def test_the_winner_is_named_with_its_flags_its_ratio_and_the_rounds_interval():
    bench = closed_at({S.DECLARED: 2.0, S.SPLIT: 2.6},
                      rounds={"declared": (2.0, 1.9, 2.1), "isolate vocoder": (2.6, 2.5, 2.7)})
    (w,) = F.winners(bench)
    assert w.run.placement is S.SPLIT and w.metric is F.REQ_S
    line = F.winner_line(bench, w)
    assert line.startswith("C=4: `isolate vocoder` wins on req/s (most): x1.30 of declared's "
                           "req/s (90% interval x1.")
    assert "over 3 rounds)" in line and "noise" not in line


def test_one_round_says_it_gives_no_interval_and_how_to_get_one():
    bench = closed_at({S.DECLARED: 2.0, S.SPLIT: 2.6})
    line = F.winner_line(bench, F.winners(bench)[0])
    assert "(one round: no interval; --rounds 3 gives one)" in line


def test_rows_measured_alike_name_no_winner():
    bench = closed_at({S.DECLARED: 2.0, S.SPLIT: 2.001, S.LONG: 1.5})
    line = F.winner_line(bench, F.winners(bench)[0])
    assert line.startswith("C=4: none; `isolate vocoder` and `declared` measured the same req/s")


def test_a_row_with_failed_requests_does_not_win_over_one_without():
    bench = closed_at({S.DECLARED: 2.0, S.SPLIT: 3.0}, errors=("isolate vocoder",))
    (w,) = F.winners(bench)
    assert w.run.placement is S.DECLARED
    assert any("`isolate vocoder` had 1 failed requests (1 http-500)" in a
               for a in F.advice(bench))


def test_open_loop_winners_go_by_first_audio_among_those_that_kept_up():
    bench = S.sweep()  # latency grows past 4 req/s; at 8 req/s nobody keeps up
    by_load = {w.shape.label: w for w in F.winners(bench)}
    assert by_load["2/s"].metric is F.TTFA_P99 and "kept up with 2.00 req/s" in by_load["2/s"].why
    assert by_load["2/s"].run.placement is S.DECLARED  # the lower TTFA p99
    assert by_load["8/s"].metric is F.REQ_S and "none kept up" in by_load["8/s"].why
    (saturated,) = F.saturation_advice(bench)
    assert saturated.startswith("8/s: every row served 4.00 of 8.00 req/s offered")
    assert "a lower rate per server (replicas)" in saturated


def test_with_an_slo_the_winner_has_the_most_goodput():
    bench = S.sweep(slo=Slo(latency_s=0.5))
    assert {w.metric for w in F.winners(bench)} == {F.GOODPUT}


def stalled(c: int, audio_s: float, stalls: int, wall: float = 2.0):
    samples = [S.sample(i, audio=audio_s, stalls=stalls if i % 2 == 0 else 0) for i in range(8)]
    return [S.run(p, Closed(c), samples, wall=wall) for p in (S.DECLARED, S.SPLIT)]


def test_too_little_audio_per_stream_advises_fewer_streams_or_cpu_for_the_busiest_stage():
    # C=4: 8 requests of 0.5 s of audio in 2 s: 2 s of audio a second over 4 streams
    bench = S.bench(stalled(1, 2.0, 0) + stalled(4, 0.5, 1))
    (advice,) = F.stall_advice(bench)
    assert advice.startswith("C=4: 50% of streams stalled in every row: each of the 4 streams at "
                             "once got 0.50 s of audio per second, less than it plays")
    assert "at the 2.00 s of audio per second made here, 2 would keep up" in advice
    assert "(at C=1 none stalled)" in advice
    assert "--stage-threads engine=2 or --process-copies pipeline=2" in advice


def test_rows_that_differ_are_given_as_a_range_from_least_to_most():
    every_other = [S.sample(i, audio=0.5, stalls=1 if i % 2 == 0 else 0) for i in range(8)]
    every_one = [S.sample(i, audio=0.5, stalls=1) for i in range(8)]
    bench = S.bench([S.run(S.DECLARED, Closed(4), every_other, wall=2.0),
                     S.run(S.SPLIT, Closed(4), every_one, wall=4.0)])
    (advice,) = F.stall_advice(bench)
    assert advice.startswith("C=4: 50-100% of streams stalled in every row: each of the 4 "
                             "streams at once got 0.25-0.50 s of audio per second")


def test_enough_audio_with_stalls_points_at_the_gaps_between_chunks():
    bench = S.bench(stalled(1, 4.0, 2))  # 16 s of audio a second for one stream
    (advice,) = F.stall_advice(bench)
    assert "though each stream got 16.00 s of audio per second, more than it plays" in advice
    assert "median 20 ms" in advice and "a bigger first chunk" in advice


def test_no_advice_for_a_clean_run():
    bench = S.closed((S.DECLARED, S.SPLIT), levels=(1, 4))
    assert F.advice(bench) == [] and F.stall_advice(bench) == []
    assert all(not n.startswith("*") for n in F.notes(bench))


def test_an_open_loops_streams_at_once_follow_littles_law():
    (run,) = [S.run(S.DECLARED, Open(4.0), [S.sample(i, latency=0.5, scheduled=i / 4)
                                             for i in range(8)], wall=2.0)]
    assert F.streams_at_once(run) == pytest.approx(4.0 * 0.5)
