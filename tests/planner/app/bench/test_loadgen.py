"""The load generator against a stub HTTP server in the test process: schedules, per-request
metrics, errors.

Timed values are checked against what the fake server is known to do (it sleeps before it
answers), from below exactly and from above loosely: these tests check what is measured, never
how fast anything is.
"""

from __future__ import annotations

import itertools
import math
import socket
import statistics

import pytest

from planner.app.bench import load_results, load_shapes, loadgen
from planner.app.bench.load_results import Playback, Sample, Slo
from planner.app.bench.load_shapes import Closed, Load, Open, arrival_times
from planner.app.bench.loadgen import run_load
from tests.planner.app.bench.stub_server import Reply, StubServer

RATE = 24_000
EDGE_S = 0.01  # the client stamps a request sent once its write returned: a few ms late
SLACK_S = 0.25  # a loaded 2-core machine may add this much; the lower bounds are exact to EDGE_S


def silence(seconds: float) -> bytes:
    return b"\0\0" * round(seconds * RATE)


def paced(first_s: float, chunks: list[tuple[float, float]], **reply):
    """A speech endpoint that waits `first_s`, sends no audio until then, then per chunk
    (audio seconds, wait after it)."""
    audio = tuple((silence(seconds), wait) for seconds, wait in chunks)
    return StubServer(lambda n: Reply(first_s=first_s, chunks=audio, **reply))


def drive(shape, server, requests=4, stream=True, seed=0):
    with server:
        return run_load(server.url, Load(shape, ("Some text.",), requests, None, stream, seed))


# -- arrival schedules -------------------------------------------------------------------------
def test_schedules_are_seeded_and_start_at_zero():
    for arrivals in load_shapes.ARRIVALS:
        shape = Open(5.0, arrivals, 0.5 if arrivals == "gamma" else 1.0)
        a = arrival_times(shape, 1, count=50)
        assert a == arrival_times(shape, 1, count=50) and a[0] == 0.0 and len(a) == 50
        assert all(x < y for x, y in itertools.pairwise(a))
        if arrivals != "constant":
            assert a != arrival_times(shape, 2, count=50)


def test_constant_arrivals_are_evenly_spaced():
    assert arrival_times(Open(4.0, "constant"), 0, count=4) == pytest.approx((0, 0.25, 0.5, 0.75))


@pytest.mark.parametrize(("arrivals", "burstiness", "cv"), [
    ("poisson", 1.0, 1.0), ("gamma", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5),
])
def test_gaps_have_the_rate_and_burstiness_asked_for(arrivals, burstiness, cv):
    times = arrival_times(Open(10.0, arrivals, burstiness), 3, count=20_000)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = statistics.fmean(gaps)
    assert math.isclose(mean, 0.1, rel_tol=0.05)
    assert math.isclose(statistics.pstdev(gaps) / mean, cv, rel_tol=0.08)


def test_duration_takes_what_the_rate_offers_in_it():
    times = arrival_times(Open(3.0, "constant"), 0, duration_s=1.0)
    assert times == pytest.approx((0.0, 1 / 3, 2 / 3))
    assert len(arrival_times(Open(3.0), 0, duration_s=10.0)) == 30
    assert arrival_times(Open(0.1), 0, duration_s=1.0) == (0.0,)


@pytest.mark.parametrize("arrivals", load_shapes.ARRIVALS)
def test_a_schedule_offers_exactly_its_rate(arrivals):
    # However few requests, n arrivals span (n - 1) / rate: a 2/s point is a 2/s point.
    for n in (2, 5, 24):
        times = arrival_times(Open(2.0, arrivals, 0.5), 7, count=n)
        assert math.isclose(times[-1], (n - 1) / 2.0)


@pytest.mark.parametrize("shape", [Open(0.0), Open(1.0, "gamma", 0.0), Open(1.0, "uniform")])
def test_bad_schedules_are_refused(shape):
    with pytest.raises(ValueError):
        arrival_times(shape, 0, count=3)


# -- playback continuity -----------------------------------------------------------------------
def test_playback_without_a_gap_never_stalls():
    p = Playback()
    for k in range(5):
        p.feed(0.1 * k, 0.2)  # 0.2 s of audio every 0.1 s
    assert (p.first, p.stalls, p.stall_s) == (0.0, 0, 0.0)


def test_playback_stalls_when_the_next_bytes_come_after_the_audio_ran_out():
    p = Playback()
    p.feed(1.0, 0.05)   # plays until 1.05
    p.feed(1.10, 0.30)  # 0.05 s late: one stall; plays until 1.40
    p.feed(1.20, 0.30)  # on time: plays until 1.70
    p.feed(1.80, 0.10)  # 0.10 s late: a second stall
    assert p.stalls == 2 and math.isclose(p.stall_s, 0.15)


# -- per-request metrics -----------------------------------------------------------------------
def test_sample_arithmetic():
    s = Sample(0, scheduled_s=1.0, started_s=1.0004, latency_s=0.5, ttfa_s=0.1, audio_s=2.0,
               status=200, error=None)
    assert math.isclose(s.lag_s, 0.0004) and not s.late and s.rtf == 0.25
    late = Sample(1, 1.0, 1.0 + 2 * load_results.LATE_S, 0.5, None, 0.0, 500, "HTTP 500", "http-500")
    assert late.late and late.rtf is None
    assert Sample(2, None, 1.0, 0.5, None, 1.0, 200, None).lag_s is None


def test_slo_and_goodput():
    fast = Sample(0, None, 0.0, 0.3, 0.05, 1.0, 200, None)
    slow_start = Sample(1, None, 0.0, 0.3, 0.25, 1.0, 200, None)
    slow_end = Sample(2, None, 0.0, 0.9, 0.05, 1.0, 200, None)
    failed = Sample(3, None, 0.0, 0.01, None, 0.0, 503, "HTTP 503", "http-503")
    result = load_results.LoadResult(Closed(1), True, 2.0, (fast, slow_start, slow_end, failed))
    slo = Slo(ttfa_s=0.2, latency_s=0.5)
    assert [slo.met(s) for s in result.samples] == [True, False, False, False]
    assert result.goodput_rps(slo) == 0.5 and result.slo_attainment(slo) == 0.25
    assert result.goodput_rps(Slo()) is None and not Slo()
    assert result.goodput_rps(Slo(latency_s=0.5)) == 1.0  # failed requests never count


def test_time_to_first_audio_rtf_and_stalls_against_a_paced_server():
    # First audio after 60 ms: 0.05 s of it, then 0.1 s later 0.3 s (one stall of ~0.05 s),
    # then 0.3 s more right away. 0.65 s of audio in about 0.16 s.
    transport = paced(0.06, [(0.05, 0.1), (0.3, 0.0), (0.3, 0.0)])
    result = drive(Closed(1), transport)
    assert result.errors == 0 and len(result.ok) == 4
    for s in result.samples:
        # The client's clock starts a moment before the server's sleep does: a few ms early is
        # the measurement's edge, not an error (0.056 s for a 0.06 s pause was seen under load).
        assert 0.06 - EDGE_S <= s.ttfa_s < 0.06 + SLACK_S
        assert 0.16 - EDGE_S <= s.latency_s < 0.16 + SLACK_S and s.ttfa_s < s.latency_s
        assert math.isclose(s.audio_s, 0.65)
        assert s.rtf == s.latency_s / s.audio_s
        assert s.stalls == 1 and 0 < s.stall_s < 0.05 + SLACK_S
    assert result.stalled_share == 1.0 and result.rtf.count == 4
    assert math.isclose(result.audio_per_s, 4 * 0.65 / result.wall_s)


def test_whole_responses_have_no_ttfa_and_no_stalls():
    result = drive(Closed(2), paced(0.0, [(0.05, 0.02), (0.5, 0.0)]), stream=False)
    assert all(s.ttfa_s is None and s.stalls == 0 for s in result.samples)
    assert result.ttfa is None and result.stalled_share is None and result.rtf.count == 4


# -- the open-loop schedule --------------------------------------------------------------------
def test_open_loop_sends_on_schedule_and_reports_its_lag():
    shape = Open(40.0, "poisson")
    result = drive(shape, paced(0.01, [(0.1, 0.0)]), requests=12, seed=5)
    assert [s.scheduled_s for s in result.samples] == list(arrival_times(shape, 5, count=12))
    assert all(s.lag_s is not None and s.lag_s >= 0 for s in result.samples)
    assert result.lag.count == 12 and result.late == sum(s.late for s in result.samples)
    assert result.not_sent == 0 and result.offered_rps > 0
    closed = drive(Closed(1), paced(0.0, [(0.1, 0.0)]), requests=2)
    assert closed.lag is None and closed.offered_rps is None


def test_open_loop_never_waits_for_responses():
    # Five requests due 10 ms apart to a server taking 0.3 s each: a closed loop would need
    # 1.5 s; arrivals do not wait, so all five are in flight together.
    result = drive(Open(100.0, "constant"), paced(0.3, [(0.1, 0.0)]), requests=5)
    starts = [s.started_s for s in result.samples]
    assert max(starts) < 0.3 and result.errors == 0


def test_requests_that_cannot_be_sent_are_counted(monkeypatch):
    monkeypatch.setattr(loadgen, "MAX_IN_FLIGHT", 1)
    result = drive(Open(100.0, "constant"), paced(0.2, [(0.1, 0.0)]), requests=3)
    assert result.not_sent == 2 and result.errors_by_kind() == {"not-sent": 2}
    assert "not sent: 1 requests were still in flight" in result.error_messages()[0]
    assert result.lag.count == 1  # only what was sent has a lag


# -- errors by kind ----------------------------------------------------------------------------
def test_errors_are_sorted_by_kind(monkeypatch):
    monkeypatch.setattr(loadgen, "REQUEST_TIMEOUT_S", 0.2)
    replies = {0: Reply(503, chunks=((b'{"error": {"message": "restarting"}}', 0.0),),
                        chunked=False),
               1: Reply(hang_up=True), 2: Reply(first_s=5.0), 3: Reply()}
    result = drive(Closed(1), StubServer(lambda n: replies[n % 4]), requests=8)
    assert result.errors_by_kind() == {"http-503": 2, "disconnect": 2, "timeout": 2,
                                       "empty-audio": 2}
    assert result.error_messages(1)[0].startswith("HTTP 503: {\"error\"")
    assert result.throughput_rps == 0.0 and result.latency is None


def test_a_server_that_is_not_there_is_a_connect_error():
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    for shape in (Closed(1), Open(100.0, "constant")):
        result = run_load(url, Load(shape, ("Some text.",), 2, None, True))
        assert result.errors_by_kind() == {"connect": 2}


def test_whole_and_chunked_bodies_carry_the_same_audio():
    whole = drive(Closed(1), paced(0.0, [(0.25, 0.0), (0.5, 0.0)], chunked=False),
                  stream=False)
    assert [s.audio_s for s in whole.samples] == pytest.approx([0.75] * 4)
    assert whole.errors == 0
