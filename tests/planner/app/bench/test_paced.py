"""`planner bench` end to end on paced stand-in stages whose timings are known
(tests/planner/app/bench/factories.py): time to first audio, latency, audio duration, real-time factor,
stream continuity and goodput come out as the stages dictate; a pipeline whose every request
fails exits 1 naming the first error."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import yaml

from planner.app.cli import main
from tests.planner.app.bench.factories import paced_config
from tests.launcher.conftest import leftovers

pytestmark = pytest.mark.slow

FIRST_S, CHUNKS, CHUNK_S, FIRST_AUDIO_S, AUDIO_S = 0.15, 4, 0.1, 0.05, 0.3
TTFA_S = FIRST_S + CHUNK_S  # the first chunk, once the vocoder has made it
LATENCY_S = FIRST_S + CHUNKS * CHUNK_S
AUDIO_TOTAL_S = FIRST_AUDIO_S + (CHUNKS - 1) * AUDIO_S
STALL_S = CHUNK_S - FIRST_AUDIO_S  # the first chunk plays out before the second arrives
SLACK_S = 0.15  # what a loaded 2-core machine may add on top; the lower bounds are exact
REQUESTS = 4


def _bench(tmp_path, config: dict, *argv: str) -> tuple[int, str]:
    path = tmp_path / "paced.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    code = main(["bench", "--config", str(path), "--requests", str(REQUESTS), "--warmup", "1",
                 "--stream", "--device", "cpu", "--output", str(out), *argv])
    return code, out


@pytest.fixture(scope="module")
def paced(tmp_path_factory):
    # Arrivals 0.8 s apart, each request done in ~0.55 s: every request has the server alone.
    code, out = _bench(tmp_path_factory.mktemp("paced"),
                       paced_config(FIRST_S, CHUNKS, CHUNK_S, FIRST_AUDIO_S, AUDIO_S),
                       "--rate", "1.25", "--arrivals", "constant",
                       "--slo-ttfa-ms", "1000", "--slo-p99-ms", f"{LATENCY_S * 1000 - 50:g}")
    assert code == 0
    data = json.loads((out / "results.json").read_text())
    (run,) = data["runs"]
    return run["load"]


def test_time_to_first_audio_latency_and_rtf_are_the_stages_timings(paced):
    assert (paced["requests"], paced["ok"], paced["errors"]) == (REQUESTS, REQUESTS, 0)
    for s in paced["samples"]:
        assert TTFA_S <= s["ttfa_s"] < TTFA_S + SLACK_S
        assert LATENCY_S <= s["latency_s"] < LATENCY_S + SLACK_S
        assert math.isclose(s["audio_s"], AUDIO_TOTAL_S)
        assert math.isclose(s["rtf"], s["latency_s"] / AUDIO_TOTAL_S)
        assert LATENCY_S / AUDIO_TOTAL_S <= s["rtf"] < (LATENCY_S + SLACK_S) / AUDIO_TOTAL_S
    assert TTFA_S <= paced["ttfa_s"]["p50"] <= paced["ttfa_s"]["p99"] < TTFA_S + SLACK_S
    assert paced["rtf"]["count"] == REQUESTS


def test_each_stream_stalls_once_where_the_first_chunk_runs_out(paced):
    for s in paced["samples"]:
        assert s["stalls"] == 1
        assert STALL_S - SLACK_S < s["stall_s"] < STALL_S + SLACK_S
    assert paced["stream_continuity"]["stalled_share"] == 1.0


def test_goodput_counts_only_requests_within_the_objectives(paced):
    # The latency objective is 50 ms under what the stages take: no request meets it.
    assert paced["goodput_rps"] == 0.0 and paced["slo_attainment"] == 0.0
    assert paced["throughput_rps"] > 0


def test_the_schedule_and_its_lag_are_reported(paced):
    assert paced["mode"] == "open-loop" and paced["arrivals"] == "constant"
    assert [s["scheduled_s"] for s in paced["samples"]] == pytest.approx([0, 0.8, 1.6, 2.4])
    schedule = paced["schedule"]
    assert schedule["lag_s"]["count"] == REQUESTS and schedule["not_sent"] == 0
    assert schedule["late"] == sum(s["lag_s"] >= schedule["late_after_s"]
                                   for s in paced["samples"])


def test_every_request_failing_exits_1_and_leaves_nothing(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out = _bench(tmp_path, paced_config(FIRST_S, CHUNKS, CHUNK_S, FIRST_AUDIO_S,
                                                  AUDIO_S, failing=True), "--concurrency", "2")
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "error: every request to declared at C=2 failed (4 of 4); the first: HTTP 500" in err
    assert "RuntimeError: weights file not found" in err
    assert (out / "results.md").exists() and (out / "overview.png").exists()
    assert leftovers() == (set(), [])
